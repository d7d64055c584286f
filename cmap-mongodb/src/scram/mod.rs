//! SCRAM-SHA-1 and SCRAM-SHA-256 as the auth specification defines them
//! (sections "SCRAM-SHA-1" and "SCRAM-SHA-256", over RFC 5802 and
//! RFC 7677): a sans-IO client. It only builds and checks the SASL
//! payloads; the caller wraps them in `saslStart` / `saslContinue` commands
//! (or in `speculativeAuthenticate`) and sends them.
//!
//! The conversation is: [`ScramClient::client_first`] (the `saslStart`
//! payload), [`ScramClient::handle_server_first`] (takes the server's
//! first reply, returns the first `saslContinue` payload), then
//! [`ScramClient::handle_server_final`] (checks that the server knows the
//! password too).
//!
//! The derived keys are cached process-wide, as the auth specification's
//! "Caching credentials in SCRAM" requires: every new pooled connection
//! authenticates, and PBKDF2 with thousands of iterations would otherwise
//! cost milliseconds of CPU per connection.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{EagerHash, Hmac, KeyInit, Mac};
use sha2::Digest;

/// The GS2 header of the client-first message: no channel binding, no
/// authorization identity. The auth specification: drivers MUST NOT
/// advertise channel binding, "the client-first-message MUST start with
/// `n,`".
const GS2_HEADER: &str = "n,,";

/// How many random bytes make the client nonce. The auth specification
/// asks for a cryptographically secure nonce without fixing its length;
/// 24 bytes (192 bits, 32 base64 characters) is well past guessing.
const NONCE_BYTES: usize = 24;

/// Which SCRAM variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// SCRAM-SHA-1, with MongoDB's hashed password (auth spec, "SCRAM-SHA-1").
    ScramSha1,
    /// SCRAM-SHA-256, with a SASLprep'd password (auth spec, "SCRAM-SHA-256").
    ScramSha256,
}

impl Mechanism {
    /// The mechanism's name, as sent in `saslStart`'s `mechanism` field
    /// and as the server lists it in `saslSupportedMechs`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::ScramSha1 => "SCRAM-SHA-1",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
        }
    }

    /// The mechanism a name denotes, `None` for any other (the caller
    /// must tolerate unknown names in `saslSupportedMechs`: the auth
    /// specification forbids erroring on them). The match is exact, as
    /// the server spells the names.
    pub fn from_name(name: &str) -> Option<Mechanism> {
        [Mechanism::ScramSha1, Mechanism::ScramSha256]
            .into_iter()
            .find(|mechanism| mechanism.name() == name)
    }

    /// The lowest iteration count the client accepts. Both SCRAM sections
    /// of the auth specification: drivers MUST enforce a minimum of 4096
    /// and MUST error below it, against a man-in-the-middle downgrade.
    fn min_iterations(self) -> u32 {
        4096
    }

    /// The highest iteration count the client accepts: PBKDF2 runs on the
    /// caller's thread and cannot be cut short by a timeout, so a server
    /// asking for billions would hold it for hours. A million is over 60
    /// times MongoDB's defaults (10,000 and 15,000).
    fn max_iterations(self) -> u32 {
        1_000_000
    }

    /// The mechanism's hash function `H()`.
    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::ScramSha1 => sha1::Sha1::digest(data).to_vec(),
            Mechanism::ScramSha256 => sha2::Sha256::digest(data).to_vec(),
        }
    }

    /// The mechanism's `HMAC(key, data)`.
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::ScramSha1 => hmac_of::<sha1::Sha1>(key, data),
            Mechanism::ScramSha256 => hmac_of::<sha2::Sha256>(key, data),
        }
    }

    /// Whether `tag` is `HMAC(key, data)`, compared in constant time so
    /// that the time taken says nothing about how much of it matched.
    fn hmac_matches(self, key: &[u8], data: &[u8], tag: &[u8]) -> bool {
        match self {
            Mechanism::ScramSha1 => hmac_verify::<sha1::Sha1>(key, data, tag),
            Mechanism::ScramSha256 => hmac_verify::<sha2::Sha256>(key, data, tag),
        }
    }

    /// RFC 5802's `Hi(password, salt, i)`: PBKDF2 with the mechanism's
    /// HMAC, one output block long.
    fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::ScramSha1 => pbkdf2_of::<sha1::Sha1>(password, salt, iterations),
            Mechanism::ScramSha256 => pbkdf2_of::<sha2::Sha256>(password, salt, iterations),
        }
    }
}

/// A keyed HMAC instance. HMAC accepts keys of any length (longer ones are
/// hashed first), so keying cannot fail.
fn keyed_hmac<D: EagerHash>(key: &[u8]) -> Hmac<D> {
    <Hmac<D> as KeyInit>::new_from_slice(key).expect("HMAC accepts keys of any length")
}

/// `HMAC(key, data)` with the hash `D`.
fn hmac_of<D: EagerHash>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = keyed_hmac::<D>(key);
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Whether `tag` is `HMAC(key, data)` with the hash `D`, in constant time.
fn hmac_verify<D: EagerHash>(key: &[u8], data: &[u8], tag: &[u8]) -> bool {
    let mut mac = keyed_hmac::<D>(key);
    mac.update(data);
    mac.verify_slice(tag).is_ok()
}

/// PBKDF2-HMAC with the hash `D`, as long as one digest of `D`.
fn pbkdf2_of<D: EagerHash + Digest>(password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut salted = vec![0; <D as Digest>::output_size()];
    pbkdf2::pbkdf2_hmac::<D>(password, salt, iterations, &mut salted);
    salted
}

/// Why a SCRAM conversation failed on the client's side. No variant
/// carries the password or anything derived from it.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScramError {
    /// SASLprep (RFC 4013) refused the SCRAM-SHA-256 password: it holds a
    /// prohibited or unassigned character, or mixes text directions. Which
    /// character is deliberately not said: it is part of the password.
    #[error("the password cannot be prepared with SASLprep for SCRAM-SHA-256")]
    PasswordPreparation,
    /// A client nonce given to `ScramClient::with_nonce` is empty or not
    /// RFC 5802's `printable` (ASCII 0x21..=0x7E except `,`).
    #[error("the client nonce must be non-empty printable ASCII without ','")]
    InvalidNonce,
    /// The operating system's random source failed to draw a nonce.
    #[error("the operating system's random source failed: {0}")]
    RandomSource(String),
    /// A server message does not parse.
    #[error("malformed {message} message from the server: {problem}")]
    Malformed {
        /// Which message: `"server-first"` or `"server-final"`.
        message: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The server's nonce does not start with the client's nonce followed
    /// by a part of its own (RFC 5802 section 5.1), so the reply does not
    /// belong to this conversation.
    #[error("the server's nonce does not extend the client's nonce")]
    NonceMismatch,
    /// The server asked for fewer PBKDF2 iterations than the auth
    /// specification's minimum.
    #[error("the server's iteration count {iterations} is below the minimum of {minimum}")]
    IterationCountTooLow {
        /// The server's `i=`.
        iterations: u32,
        /// The minimum (4096).
        minimum: u32,
    },
    /// The server asked for more PBKDF2 iterations than the client runs
    /// (a hostile server could otherwise hold the thread for hours).
    #[error("the server's iteration count {iterations} is over the maximum of {maximum}")]
    IterationCountTooHigh {
        /// The server's `i=`.
        iterations: u32,
        /// The maximum (1,000,000).
        maximum: u32,
    },
    /// The server's signature (`v=`) is not the one its knowledge of the
    /// password would give: the server did not prove who it is.
    #[error("the server's signature does not match: the server did not prove it knows the password")]
    ServerSignatureMismatch,
    /// The server ended the conversation with an error (`e=`, RFC 5802's
    /// `server-error-value`).
    #[error("the server reported a SCRAM error: {0}")]
    Server(String),
    /// A step was called out of order.
    #[error("SCRAM step out of order: {0}")]
    OutOfOrder(&'static str),
}

/// Where a conversation stands.
enum Step {
    /// The client-first message is ready; the server's first reply is due.
    AwaitingServerFirst,
    /// The client-final message went out; the server's signature is due.
    AwaitingServerFinal {
        /// `ServerKey`, to compute the expected `ServerSignature`.
        server_key: Vec<u8>,
        /// RFC 5802's `AuthMessage`, which the signature covers.
        auth_message: String,
    },
    /// The server proved it knows the password.
    Complete,
    /// A step failed; the conversation cannot go on.
    Failed,
}

impl Step {
    /// The step's name, for `Debug` (which must not show the keys).
    fn name(&self) -> &'static str {
        match self {
            Step::AwaitingServerFirst => "AwaitingServerFirst",
            Step::AwaitingServerFinal { .. } => "AwaitingServerFinal",
            Step::Complete => "Complete",
            Step::Failed => "Failed",
        }
    }
}

/// One SCRAM conversation: [`client_first`](Self::client_first), then
/// [`handle_server_first`](Self::handle_server_first) (which returns the
/// client-final message), then
/// [`handle_server_final`](Self::handle_server_final).
pub struct ScramClient {
    /// Which variant.
    mechanism: Mechanism,
    /// The user name as given, for the cache's key.
    username: String,
    /// The password the mechanism derives keys from: the hex MD5 digest
    /// for SCRAM-SHA-1, the SASLprep'd password for SCRAM-SHA-256. Secret.
    password: String,
    /// This side's nonce.
    client_nonce: String,
    /// RFC 5802's `client-first-message-bare`: `n=<user>,r=<nonce>`.
    client_first_bare: String,
    /// Where the conversation stands.
    step: Step,
}

impl fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password and the keys stay out; what is shown is public.
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("client_nonce", &self.client_nonce)
            .field("step", &self.step.name())
            .finish_non_exhaustive()
    }
}

impl ScramClient {
    /// A conversation for `username` (as given, unescaped) and `password`
    /// (as given), with a fresh random nonce. The password is prepared as
    /// the mechanism requires: for SCRAM-SHA-1 it is the hex MD5 of
    /// `"{username}:mongo:{password}"` (MongoDB's rule, no SASLprep); for
    /// SCRAM-SHA-256 it is SASLprep'd, which can refuse it. The user name
    /// is never SASLprep'd (auth spec: "User names MUST NOT be prepared
    /// with SASLprep").
    pub fn new(mechanism: Mechanism, username: &str, password: &str) -> Result<ScramClient, ScramError> {
        ScramClient::with_nonce(mechanism, username, password, &random_nonce()?)
    }

    /// [`new`](Self::new) with a given client nonce, for tests against the
    /// published conversations (the nonce must be unpredictable otherwise).
    pub fn with_nonce(
        mechanism: Mechanism,
        username: &str,
        password: &str,
        nonce: &str,
    ) -> Result<ScramClient, ScramError> {
        if nonce.is_empty() || !nonce.bytes().all(is_printable) {
            return Err(ScramError::InvalidNonce);
        }
        let password = prepare_password(mechanism, username, password)?;
        let client_first_bare = format!("n={},r={nonce}", escape_username(username));
        Ok(ScramClient {
            mechanism,
            username: username.to_owned(),
            password,
            client_nonce: nonce.to_owned(),
            client_first_bare,
            step: Step::AwaitingServerFirst,
        })
    }

    /// The client-first message, `n,,n=<user>,r=<nonce>`: the payload of
    /// `saslStart` (or of `speculativeAuthenticate`).
    pub fn client_first(&self) -> Vec<u8> {
        format!("{GS2_HEADER}{}", self.client_first_bare).into_bytes()
    }

    /// Takes the server-first message and returns the client-final
    /// message, the payload of the first `saslContinue`. Checks that the
    /// server's nonce extends ours and that the iteration count is at least
    /// 4096, then proves knowledge of the password. The keys come from the
    /// process-wide cache when this password, salt and count were seen
    /// before. Any error ends the conversation.
    pub fn handle_server_first(&mut self, payload: &[u8]) -> Result<Vec<u8>, ScramError> {
        match self.step {
            Step::AwaitingServerFirst => {}
            Step::Failed => return Err(ScramError::OutOfOrder("the conversation already failed")),
            _ => return Err(ScramError::OutOfOrder("handle_server_first was already called")),
        }
        match self.client_final(payload) {
            Ok((client_final, next)) => {
                self.step = next;
                Ok(client_final.into_bytes())
            }
            Err(error) => {
                self.step = Step::Failed;
                Err(error)
            }
        }
    }

    /// Takes the server-final message and checks the server's signature
    /// `v=` (in constant time); an `e=` message is an error. After success
    /// the client is done, though an older server may still want one empty
    /// `saslContinue` (auth spec, "Backwards Compatibility").
    pub fn handle_server_final(&mut self, payload: &[u8]) -> Result<(), ScramError> {
        let (server_key, auth_message) = match std::mem::replace(&mut self.step, Step::Failed) {
            Step::AwaitingServerFinal {
                server_key,
                auth_message,
            } => (server_key, auth_message),
            other => {
                let problem = match other {
                    Step::AwaitingServerFirst => "handle_server_final was called before handle_server_first",
                    Step::Complete => "the conversation is already complete",
                    _ => "the conversation already failed",
                };
                self.step = other;
                return Err(ScramError::OutOfOrder(problem));
            }
        };
        let signature = parse_server_final(payload)?;
        if !self
            .mechanism
            .hmac_matches(&server_key, auth_message.as_bytes(), &signature)
        {
            return Err(ScramError::ServerSignatureMismatch);
        }
        self.step = Step::Complete;
        Ok(())
    }

    /// The client-final message for a server-first payload, and the step
    /// that follows it (RFC 5802 section 3's computation).
    fn client_final(&self, payload: &[u8]) -> Result<(String, Step), ScramError> {
        let server_first = ServerFirst::parse(payload)?;
        self.check(&server_first)?;
        let keys = cached_keys(
            self.mechanism,
            &self.username,
            &self.password,
            &server_first.salt,
            server_first.iterations,
        );
        let without_proof = format!("c={},r={}", BASE64.encode(GS2_HEADER), server_first.nonce);
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, server_first.message
        );
        let stored_key = self.mechanism.hash(&keys.client_key);
        let client_signature = self.mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = keys
            .client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let client_final = format!("{without_proof},p={}", BASE64.encode(proof));
        Ok((
            client_final,
            Step::AwaitingServerFinal {
                server_key: keys.server_key,
                auth_message,
            },
        ))
    }

    /// The checks on the server-first message before any key work: the
    /// nonce (RFC 5802 section 5.1) and the minimum iteration count (auth
    /// spec).
    fn check(&self, server_first: &ServerFirst<'_>) -> Result<(), ScramError> {
        let extends_ours = server_first.nonce.len() > self.client_nonce.len()
            && server_first.nonce.starts_with(&self.client_nonce);
        if !extends_ours {
            return Err(ScramError::NonceMismatch);
        }
        let minimum = self.mechanism.min_iterations();
        if server_first.iterations < minimum {
            return Err(ScramError::IterationCountTooLow {
                iterations: server_first.iterations,
                minimum,
            });
        }
        let maximum = self.mechanism.max_iterations();
        if server_first.iterations > maximum {
            return Err(ScramError::IterationCountTooHigh {
                iterations: server_first.iterations,
                maximum,
            });
        }
        Ok(())
    }
}

/// Whether a byte is RFC 5802's `printable`: ASCII 0x21..=0x7E except `,`.
fn is_printable(byte: u8) -> bool {
    matches!(byte, 0x21..=0x7E) && byte != b','
}

/// A fresh client nonce: [`NONCE_BYTES`] bytes from the operating system's
/// random source, base64 (whose alphabet is all `printable`). The auth
/// specification insists on a cryptographically secure source.
fn random_nonce() -> Result<String, ScramError> {
    let mut bytes = [0u8; NONCE_BYTES];
    getrandom::fill(&mut bytes).map_err(|error| ScramError::RandomSource(error.to_string()))?;
    Ok(BASE64.encode(bytes))
}

/// RFC 5802's `saslname`: `=` as `=3D` and `,` as `=2C`, in one pass so
/// that the `=` of an escape is not escaped again.
fn escape_username(username: &str) -> String {
    let mut escaped = String::with_capacity(username.len());
    for c in username.chars() {
        match c {
            '=' => escaped.push_str("=3D"),
            ',' => escaped.push_str("=2C"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// The password the mechanism derives its keys from.
///
/// SCRAM-SHA-1 (auth spec): `HEX(MD5(UTF8(username + ':mongo:' +
/// password)))`, with neither the user name nor the password SASLprep'd.
/// SCRAM-SHA-256 (auth spec): the password SASLprep'd, not digested.
/// SASLprep's own error names the offending character, so it is dropped.
fn prepare_password(mechanism: Mechanism, username: &str, password: &str) -> Result<String, ScramError> {
    match mechanism {
        Mechanism::ScramSha1 => Ok(mongo_password_digest(username, password)),
        Mechanism::ScramSha256 => stringprep::saslprep(password)
            .map(|prepared| prepared.into_owned())
            .map_err(|_| ScramError::PasswordPreparation),
    }
}

/// MongoDB's SCRAM-SHA-1 password: the lowercase hex MD5 of
/// `"{username}:mongo:{password}"` (the user name unescaped).
fn mongo_password_digest(username: &str, password: &str) -> String {
    let digest = md5::Md5::digest(format!("{username}:mongo:{password}").as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The parts of a server-first message the client uses.
struct ServerFirst<'a> {
    /// The whole message, which enters the `AuthMessage`.
    message: &'a str,
    /// The combined nonce (`r=`).
    nonce: &'a str,
    /// The decoded salt (`s=`).
    salt: Vec<u8>,
    /// The iteration count (`i=`).
    iterations: u32,
}

impl<'a> ServerFirst<'a> {
    /// Parses `r=<nonce>,s=<salt>,i=<count>[,extensions]` (RFC 5802
    /// section 7). Attributes are looked up by name; unknown extensions are
    /// ignored, but a mandatory one (`m=`) fails as section 5.1 requires.
    fn parse(payload: &'a [u8]) -> Result<ServerFirst<'a>, ScramError> {
        const WHICH: &str = "server-first";
        let malformed = |problem| ScramError::Malformed {
            message: WHICH,
            problem,
        };
        let message = std::str::from_utf8(payload).map_err(|_| malformed("not valid UTF-8"))?;
        let attributes = parse_attributes(message, WHICH)?;
        if find(&attributes, 'm').is_some() {
            return Err(malformed(
                "a mandatory extension (m=) the client does not support",
            ));
        }
        let nonce = find(&attributes, 'r').ok_or_else(|| malformed("no nonce (r=)"))?;
        let salt = find(&attributes, 's').ok_or_else(|| malformed("no salt (s=)"))?;
        let iterations = find(&attributes, 'i').ok_or_else(|| malformed("no iteration count (i=)"))?;
        let salt = BASE64
            .decode(salt)
            .map_err(|_| malformed("the salt (s=) is not valid base64"))?;
        if salt.is_empty() {
            return Err(malformed("the salt (s=) is empty"));
        }
        let iterations = iterations
            .parse::<u32>()
            .map_err(|_| malformed("the iteration count (i=) is not a number"))?;
        Ok(ServerFirst {
            message,
            nonce,
            salt,
            iterations,
        })
    }
}

/// Parses a server-final message, `v=<signature>` or `e=<error>` (RFC 5802
/// section 7), into the decoded signature.
fn parse_server_final(payload: &[u8]) -> Result<Vec<u8>, ScramError> {
    const WHICH: &str = "server-final";
    let malformed = |problem| ScramError::Malformed {
        message: WHICH,
        problem,
    };
    let message = std::str::from_utf8(payload).map_err(|_| malformed("not valid UTF-8"))?;
    let attributes = parse_attributes(message, WHICH)?;
    match attributes.first() {
        Some(('e', error)) => Err(ScramError::Server((*error).to_owned())),
        Some(('v', signature)) => BASE64
            .decode(signature)
            .map_err(|_| malformed("the signature (v=) is not valid base64")),
        _ => Err(malformed("neither a verifier (v=) nor an error (e=)")),
    }
}

/// Splits a SCRAM message into its `<letter>=<value>` attributes.
fn parse_attributes<'a>(message: &'a str, which: &'static str) -> Result<Vec<(char, &'a str)>, ScramError> {
    message
        .split(',')
        .map(|attribute| {
            let (name, value) = attribute.split_once('=').ok_or(ScramError::Malformed {
                message: which,
                problem: "an attribute without '='",
            })?;
            let mut letters = name.chars();
            match (letters.next(), letters.next()) {
                (Some(letter), None) if letter.is_ascii_alphabetic() => Ok((letter, value)),
                _ => Err(ScramError::Malformed {
                    message: which,
                    problem: "an attribute name is not one letter",
                }),
            }
        })
        .collect()
}

/// The value of the first attribute named `name`.
fn find<'a>(attributes: &[(char, &'a str)], name: char) -> Option<&'a str> {
    attributes
        .iter()
        .find(|(letter, _)| *letter == name)
        .map(|(_, value)| *value)
}

/// The cache's value: `ClientKey` and `ServerKey`, one of the two forms
/// the auth specification allows ("Caching credentials in SCRAM").
#[derive(Clone)]
struct Keys {
    /// `HMAC(SaltedPassword, "Client Key")`.
    client_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    server_key: Vec<u8>,
}

/// The cache's key: the mechanism and a SHA-256 fingerprint of the user
/// name, the prepared password, the salt and the iteration count. The
/// specification identifies entries by password, salt, count and
/// mechanism; the fingerprint stands in for the password so the cache
/// holds no plain password.
type CacheKey = (Mechanism, [u8; 32]);

/// How many entries the cache holds before it starts over. A process talks
/// to few users; the bound only keeps a churn of credentials (or a server
/// sending fresh salts) from growing it without end.
const CACHE_CAPACITY: usize = 64;

/// The derived keys of recent conversations.
#[derive(Default)]
struct KeyCache {
    /// The entries.
    entries: HashMap<CacheKey, Keys>,
}

impl KeyCache {
    /// The keys cached under `key`.
    fn get(&self, key: &CacheKey) -> Option<Keys> {
        self.entries.get(key).cloned()
    }

    /// Caches `keys` under `key`, emptying the cache first when it is full.
    fn insert(&mut self, key: CacheKey, keys: Keys) {
        if self.entries.len() >= CACHE_CAPACITY && !self.entries.contains_key(&key) {
            self.entries.clear();
        }
        self.entries.insert(key, keys);
    }
}

/// The process-wide cache.
fn key_cache() -> &'static Mutex<KeyCache> {
    static CACHE: OnceLock<Mutex<KeyCache>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// The keys for these inputs, from the cache or derived (and then cached).
/// The lock is not held while PBKDF2 runs, so concurrent handshakes do not
/// queue behind one derivation; two racing on the same inputs both derive,
/// which is harmless. A poisoned lock is used anyway: the map is never left
/// half-updated.
fn cached_keys(mechanism: Mechanism, username: &str, password: &str, salt: &[u8], iterations: u32) -> Keys {
    let key = (
        mechanism,
        fingerprint(mechanism, username, password, salt, iterations),
    );
    let cached = key_cache()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key);
    if let Some(keys) = cached {
        return keys;
    }
    let keys = derive_keys(mechanism, password, salt, iterations);
    key_cache()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, keys.clone());
    keys
}

/// A SHA-256 over the cache key's parts, each length-prefixed so that no
/// two different inputs run together into the same bytes.
fn fingerprint(
    mechanism: Mechanism,
    username: &str,
    password: &str,
    salt: &[u8],
    iterations: u32,
) -> [u8; 32] {
    let mut hasher = sha2::Sha256::new();
    for part in [
        mechanism.name().as_bytes(),
        username.as_bytes(),
        password.as_bytes(),
        salt,
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hasher.update(iterations.to_be_bytes());
    hasher.finalize().into()
}

#[cfg(test)]
thread_local! {
    /// How many times this thread ran PBKDF2, for the cache's tests (each
    /// test runs on its own thread, so parallel tests do not interfere).
    static DERIVATIONS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// RFC 5802's `SaltedPassword`, `ClientKey` and `ServerKey`: the expensive
/// part, which the cache saves.
fn derive_keys(mechanism: Mechanism, password: &str, salt: &[u8], iterations: u32) -> Keys {
    #[cfg(test)]
    DERIVATIONS.with(|count| count.set(count.get() + 1));
    let salted_password = mechanism.hi(password.as_bytes(), salt, iterations);
    Keys {
        client_key: mechanism.hmac(&salted_password, b"Client Key"),
        server_key: mechanism.hmac(&salted_password, b"Server Key"),
    }
}

#[cfg(test)]
mod tests;
