//! The SCRAM client's tests: the auth specification's and RFC 7677's
//! conversations, SASLprep, the errors, the key cache.

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
fn iteration_count_over_a_million_is_refused_before_any_key_work() {
    for mechanism in [Mechanism::ScramSha1, Mechanism::ScramSha256] {
        let mut client = ScramClient::with_nonce(mechanism, "user", "pencil", SHA256_NONCE).unwrap();
        let error = client_final(&mut client, &sha256_server_first("salt", u32::MAX)).unwrap_err();
        assert_eq!(
            error,
            ScramError::IterationCountTooHigh {
                iterations: u32::MAX,
                maximum: 1_000_000
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
        // RFC 5802's attr-val: ALPHA "=" value; a digit or a non-ASCII
        // letter is no attribute name.
        (
            format!("{r},s=c2FsdA==,i=4096,1=x"),
            first("an attribute name is not one letter"),
        ),
        (
            format!("{r},s=c2FsdA==,i=4096,é=x"),
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
        let mut client = ScramClient::with_nonce(mechanism, "cache-user", "pencil", SHA256_NONCE).unwrap();
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
