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
mod tests {
    use super::*;

    /// The SCRAM-SHA-1 example of the auth specification ("SCRAM-SHA-1",
    /// "Conversation"): user "user", password "pencil".
    const SHA1_NONCE: &str = "fyko+d2lbbFgONRv9qkxdawL";
    const SHA1_SERVER_FIRST: &str =
        "r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000";
    const SHA1_CLIENT_FINAL: &str =
        "c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,p=MC2T8BvbmWRckDw8oWl5IVghwCY=";
    const SHA1_SERVER_FINAL: &str = "v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=";

    /// RFC 7677's SCRAM-SHA-256 example, which is also the auth
    /// specification's ("SCRAM-SHA-256", "Conversation").
    const SHA256_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SHA256_SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const SHA256_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                       p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SHA256_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn sha1_client(password: &str) -> ScramClient {
        ScramClient::with_nonce(Mechanism::ScramSha1, "user", password, SHA1_NONCE).unwrap()
    }

    fn sha256_client(password: &str) -> ScramClient {
        ScramClient::with_nonce(Mechanism::ScramSha256, "user", password, SHA256_NONCE).unwrap()
    }

    /// The client-final message for a server-first message, as a string.
    fn client_final(client: &mut ScramClient, server_first: &str) -> Result<String, ScramError> {
        client
            .handle_server_first(server_first.as_bytes())
            .map(|bytes| String::from_utf8(bytes).unwrap())
    }

    /// A server-first message with the SCRAM-SHA-256 example's nonce.
    fn sha256_server_first(salt: &str, iterations: u32) -> String {
        format!("r={SHA256_NONCE}server,s={},i={iterations}", BASE64.encode(salt))
    }

    fn malformed(message: &'static str, problem: &'static str) -> ScramError {
        ScramError::Malformed { message, problem }
    }

    fn derivations() -> u32 {
        DERIVATIONS.with(|count| count.get())
    }

    #[test]
    fn mechanism_names_round_trip() {
        assert_eq!(Mechanism::ScramSha1.name(), "SCRAM-SHA-1");
        assert_eq!(Mechanism::ScramSha256.name(), "SCRAM-SHA-256");
        for mechanism in [Mechanism::ScramSha1, Mechanism::ScramSha256] {
            assert_eq!(Mechanism::from_name(mechanism.name()), Some(mechanism));
        }
        assert_eq!(Mechanism::from_name("PLAIN"), None);
        assert_eq!(Mechanism::from_name("scram-sha-256"), None);
    }

    #[test]
    fn client_first_is_the_auth_spec_message() {
        assert_eq!(
            sha1_client("pencil").client_first(),
            b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
        );
        assert_eq!(
            sha256_client("pencil").client_first(),
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
        );
    }

    #[test]
    fn sha1_password_is_mongodb_digest() {
        assert_eq!(
            mongo_password_digest("user", "pencil"),
            "1c33006ec1ffd90f9cadcbcc0e118200"
        );
        // The raw user name goes into the digest, not the escaped one.
        // (md5 of "a,b=c:mongo:pw", not of "a=2Cb=3Dc:mongo:pw".)
        assert_eq!(
            mongo_password_digest("a,b=c", "pw"),
            "a65bbeaa1c29e03a723a9c53501e95a7"
        );
    }

    #[test]
    fn sha1_auth_spec_conversation() {
        let mut client = sha1_client("pencil");
        assert_eq!(
            client_final(&mut client, SHA1_SERVER_FIRST).unwrap(),
            SHA1_CLIENT_FINAL
        );
        assert_eq!(client.handle_server_final(SHA1_SERVER_FINAL.as_bytes()), Ok(()));
    }

    #[test]
    fn sha256_rfc7677_conversation() {
        let mut client = sha256_client("pencil");
        assert_eq!(
            client_final(&mut client, SHA256_SERVER_FIRST).unwrap(),
            SHA256_CLIENT_FINAL
        );
        assert_eq!(client.handle_server_final(SHA256_SERVER_FINAL.as_bytes()), Ok(()));
    }

    #[test]
    fn username_is_escaped_in_one_pass() {
        let client = ScramClient::with_nonce(Mechanism::ScramSha256, "a=b,c", "pw", "nonce").unwrap();
        assert_eq!(client.client_first(), b"n,,n=a=3Db=2Cc,r=nonce");
        assert_eq!(escape_username(",="), "=2C=3D");
        assert_eq!(escape_username("=2C"), "=3D2C");
    }

    #[test]
    fn username_is_not_saslprepped() {
        let client = ScramClient::with_nonce(Mechanism::ScramSha256, "\u{2168}", "pw", "nonce").unwrap();
        assert_eq!(client.client_first(), "n,,n=\u{2168},r=nonce".as_bytes());
    }

    #[test]
    fn sha256_saslprep_maps_to_nothing() {
        // U+00AD (soft hyphen) maps to nothing: the RFC 7677 example holds.
        let mut client = sha256_client("pen\u{ad}cil");
        assert_eq!(
            client_final(&mut client, SHA256_SERVER_FIRST).unwrap(),
            SHA256_CLIENT_FINAL
        );
    }

    #[test]
    fn sha256_saslprep_maps_non_ascii_space() {
        let with_nbsp = client_final(&mut sha256_client("pen\u{a0}cil"), SHA256_SERVER_FIRST).unwrap();
        let with_space = client_final(&mut sha256_client("pen cil"), SHA256_SERVER_FIRST).unwrap();
        assert_eq!(with_nbsp, with_space);
        assert_ne!(with_space, SHA256_CLIENT_FINAL);
    }

    #[test]
    fn sha256_saslprep_refuses_prohibited_without_echoing() {
        let error = ScramClient::new(Mechanism::ScramSha256, "user", "pass\u{7}word").unwrap_err();
        assert_eq!(error, ScramError::PasswordPreparation);
        assert!(!error.to_string().contains('\u{7}'));
        assert!(
            ScramClient::new(Mechanism::ScramSha256, "user", "\u{e000}").is_err(),
            "private use"
        );
    }

    #[test]
    fn sha1_does_not_saslprep() {
        // SASLprep would drop the soft hyphen and give the example's proof.
        let mut client = sha1_client("pen\u{ad}cil");
        assert_ne!(
            client_final(&mut client, SHA1_SERVER_FIRST).unwrap(),
            SHA1_CLIENT_FINAL
        );
        assert!(ScramClient::new(Mechanism::ScramSha1, "user", "pass\u{7}word").is_ok());
    }

    #[test]
    fn random_nonces_are_fresh_and_printable() {
        let first = ScramClient::new(Mechanism::ScramSha256, "user", "pencil").unwrap();
        let second = ScramClient::new(Mechanism::ScramSha256, "user", "pencil").unwrap();
        assert_eq!(first.client_nonce.len(), 32);
        assert!(first.client_nonce.bytes().all(is_printable));
        assert_ne!(first.client_nonce, second.client_nonce);
    }

    #[test]
    fn given_nonce_must_be_printable() {
        for nonce in ["", "a,b", "a b", "caf\u{e9}"] {
            let result = ScramClient::with_nonce(Mechanism::ScramSha1, "user", "pencil", nonce);
            assert_eq!(result.unwrap_err(), ScramError::InvalidNonce, "{nonce:?}");
        }
    }

    #[test]
    fn server_nonce_must_extend_ours() {
        for nonce in ["someone-elses-nonce", SHA256_NONCE, "rOprNGfwEbeRWgbNEkq"] {
            let mut client = sha256_client("pencil");
            let server_first = format!("r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
            assert_eq!(
                client_final(&mut client, &server_first),
                Err(ScramError::NonceMismatch),
                "{nonce}"
            );
        }
    }

    #[test]
    fn iteration_count_below_4096_is_refused() {
        for mechanism in [Mechanism::ScramSha1, Mechanism::ScramSha256] {
            let mut client = ScramClient::with_nonce(mechanism, "user", "pencil", SHA256_NONCE).unwrap();
            let error = client_final(&mut client, &sha256_server_first("salt", 4095)).unwrap_err();
            assert_eq!(
                error,
                ScramError::IterationCountTooLow {
                    iterations: 4095,
                    minimum: 4096
                }
            );
        }
    }

    #[test]
    fn wrong_server_signature_is_refused() {
        let mut client = sha256_client("pencil");
        client_final(&mut client, SHA256_SERVER_FIRST).unwrap();
        let forged = format!("v={}", BASE64.encode([0u8; 32]));
        assert_eq!(
            client.handle_server_final(forged.as_bytes()),
            Err(ScramError::ServerSignatureMismatch)
        );
        // The right signature for another password is wrong as well.
        let mut client = sha256_client("pencil2");
        client_final(&mut client, SHA256_SERVER_FIRST).unwrap();
        let result = client.handle_server_final(SHA256_SERVER_FINAL.as_bytes());
        assert_eq!(result, Err(ScramError::ServerSignatureMismatch));
    }

    #[test]
    fn server_error_is_reported() {
        let mut client = sha1_client("pencil");
        client_final(&mut client, SHA1_SERVER_FIRST).unwrap();
        let result = client.handle_server_final(b"e=invalid-proof");
        assert_eq!(result, Err(ScramError::Server("invalid-proof".to_owned())));
    }

    #[test]
    fn malformed_server_first_is_refused() {
        let first = |problem| malformed("server-first", problem);
        let r = format!("r={SHA256_NONCE}server");
        let cases: Vec<(String, ScramError)> = vec![
            ("s=c2FsdA==,i=4096".into(), first("no nonce (r=)")),
            (format!("{r},i=4096"), first("no salt (s=)")),
            (format!("{r},s=c2FsdA=="), first("no iteration count (i=)")),
            (
                format!("{r},s=not*base64,i=4096"),
                first("the salt (s=) is not valid base64"),
            ),
            (format!("{r},s=,i=4096"), first("the salt (s=) is empty")),
            (
                format!("{r},s=c2FsdA==,i=many"),
                first("the iteration count (i=) is not a number"),
            ),
            (
                format!("{r},s=c2FsdA==,i=-4096"),
                first("the iteration count (i=) is not a number"),
            ),
            (
                format!("m=ext,{r},s=c2FsdA==,i=4096"),
                first("a mandatory extension (m=) the client does not support"),
            ),
            (format!("{r},s=c2FsdA==,i"), first("an attribute without '='")),
            (
                format!("{r},salt=c2FsdA==,i=4096"),
                first("an attribute name is not one letter"),
            ),
            (String::new(), first("an attribute without '='")),
        ];
        for (server_first, expected) in cases {
            let mut client = sha256_client("pencil");
            assert_eq!(
                client_final(&mut client, &server_first),
                Err(expected),
                "{server_first:?}"
            );
        }
        let mut client = sha256_client("pencil");
        assert_eq!(
            client.handle_server_first(b"r=\xff"),
            Err(first("not valid UTF-8"))
        );
    }

    #[test]
    fn malformed_server_final_is_refused() {
        let last = |problem| malformed("server-final", problem);
        let cases: [(&[u8], ScramError); 4] = [
            (b"v=not*base64", last("the signature (v=) is not valid base64")),
            (b"x=abc", last("neither a verifier (v=) nor an error (e=)")),
            (b"", last("an attribute without '='")),
            (b"v=\xff", last("not valid UTF-8")),
        ];
        for (server_final, expected) in cases {
            let mut client = sha256_client("pencil");
            client_final(&mut client, SHA256_SERVER_FIRST).unwrap();
            assert_eq!(
                client.handle_server_final(server_final),
                Err(expected),
                "{server_final:?}"
            );
        }
    }

    #[test]
    fn steps_out_of_order_are_refused() {
        let mut client = sha256_client("pencil");
        let result = client.handle_server_final(SHA256_SERVER_FINAL.as_bytes());
        assert_eq!(
            result,
            Err(ScramError::OutOfOrder(
                "handle_server_final was called before handle_server_first"
            ))
        );
        // The misuse did not spoil the conversation.
        client_final(&mut client, SHA256_SERVER_FIRST).unwrap();
        let again = client_final(&mut client, SHA256_SERVER_FIRST);
        assert_eq!(
            again,
            Err(ScramError::OutOfOrder("handle_server_first was already called"))
        );
        client
            .handle_server_final(SHA256_SERVER_FINAL.as_bytes())
            .unwrap();
        let after = client.handle_server_final(SHA256_SERVER_FINAL.as_bytes());
        assert_eq!(
            after,
            Err(ScramError::OutOfOrder("the conversation is already complete"))
        );
    }

    #[test]
    fn a_failed_conversation_stays_failed() {
        let mut client = sha256_client("pencil");
        assert!(client_final(&mut client, "garbage").is_err());
        let failed = Err(ScramError::OutOfOrder("the conversation already failed"));
        assert_eq!(client_final(&mut client, SHA256_SERVER_FIRST), failed);
        assert_eq!(
            client.handle_server_final(SHA256_SERVER_FINAL.as_bytes()),
            Err(ScramError::OutOfOrder("the conversation already failed"))
        );
    }

    #[test]
    fn cache_skips_pbkdf2_for_known_inputs() {
        let conversation = |mechanism, salt: &str, iterations| {
            let mut client =
                ScramClient::with_nonce(mechanism, "cache-user", "pencil", SHA256_NONCE).unwrap();
            client_final(&mut client, &sha256_server_first(salt, iterations)).unwrap()
        };
        let salt = "cache-test-salt";
        let before = derivations();
        let first = conversation(Mechanism::ScramSha256, salt, 4096);
        assert_eq!(derivations(), before + 1);
        let second = conversation(Mechanism::ScramSha256, salt, 4096);
        assert_eq!(derivations(), before + 1, "the same inputs must hit the cache");
        assert_eq!(first, second, "a cached conversation computes the same proof");
        conversation(Mechanism::ScramSha256, "cache-test-salt-2", 4096);
        assert_eq!(derivations(), before + 2, "another salt derives again");
        conversation(Mechanism::ScramSha256, salt, 4097);
        assert_eq!(derivations(), before + 3, "another iteration count derives again");
        conversation(Mechanism::ScramSha1, salt, 4096);
        assert_eq!(derivations(), before + 4, "another mechanism derives again");
    }

    #[test]
    fn cached_keys_verify_the_server() {
        // Twice through the auth spec's example: the second run uses the
        // cached ServerKey to check the server's signature.
        for _ in 0..2 {
            let mut client = sha1_client("pencil");
            assert_eq!(
                client_final(&mut client, SHA1_SERVER_FIRST).unwrap(),
                SHA1_CLIENT_FINAL
            );
            assert_eq!(client.handle_server_final(SHA1_SERVER_FINAL.as_bytes()), Ok(()));
        }
    }

    #[test]
    fn cache_is_bounded() {
        let keys = Keys {
            client_key: vec![1],
            server_key: vec![2],
        };
        let mut cache = KeyCache::default();
        for n in 0..CACHE_CAPACITY {
            cache.insert((Mechanism::ScramSha256, [n as u8; 32]), keys.clone());
        }
        assert_eq!(cache.entries.len(), CACHE_CAPACITY);
        // Re-inserting a present key does not empty it.
        cache.insert((Mechanism::ScramSha256, [0; 32]), keys.clone());
        assert_eq!(cache.entries.len(), CACHE_CAPACITY);
        cache.insert((Mechanism::ScramSha1, [0; 32]), keys.clone());
        assert_eq!(cache.entries.len(), 1);
        assert!(cache.get(&(Mechanism::ScramSha1, [0; 32])).is_some());
    }

    #[test]
    fn fingerprint_separates_its_parts() {
        let base = fingerprint(Mechanism::ScramSha256, "ab", "c", b"salt", 4096);
        assert_ne!(
            base,
            fingerprint(Mechanism::ScramSha256, "a", "bc", b"salt", 4096)
        );
        assert_ne!(base, fingerprint(Mechanism::ScramSha1, "ab", "c", b"salt", 4096));
    }

    #[test]
    fn debug_hides_the_password_and_keys() {
        let password = "correct-horse-battery";
        for mechanism in [Mechanism::ScramSha1, Mechanism::ScramSha256] {
            let mut client = ScramClient::with_nonce(mechanism, "user", password, SHA256_NONCE).unwrap();
            client_final(&mut client, &sha256_server_first("debug-salt", 4096)).unwrap();
            let debug = format!("{client:?}");
            assert!(
                debug.contains("ScramClient") && debug.contains("AwaitingServerFinal"),
                "{debug}"
            );
            assert!(!debug.contains(password), "{debug}");
            assert!(
                !debug.contains(&mongo_password_digest("user", password)),
                "{debug}"
            );
            assert!(!debug.contains("server_key"), "{debug}");
        }
    }
}
