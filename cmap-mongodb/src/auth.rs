//! Authentication after the `hello` (the auth specification): SCRAM-SHA-256
//! or SCRAM-SHA-1 over `saslStart` / `saslContinue`, begun speculatively
//! inside the `hello` itself, so that a new connection usually
//! authenticates in one more round trip instead of two.

use bson::{doc, Bson, Document};

use crate::connection::Connection;
use crate::error::{CommandError, Error, Stage};
use crate::handshake::payload;
use crate::options::Credential;
use crate::scram::{Mechanism, ScramClient, ScramError};
use crate::transport::Transport;

/// The authentication of one new connection: the credential, and the
/// SCRAM conversation begun in the `hello`.
pub(crate) struct Authenticator<'a> {
    credential: &'a Credential,
    /// The mechanism of the speculative conversation: the one configured,
    /// or SCRAM-SHA-256 (the auth specification's choice when none is).
    speculative_mechanism: Mechanism,
    speculative: ScramClient,
}

impl<'a> Authenticator<'a> {
    pub(crate) fn new(credential: &'a Credential) -> Result<Authenticator<'a>, Error> {
        let mechanism = credential.mechanism.unwrap_or(Mechanism::ScramSha256);
        let speculative = ScramClient::new(mechanism, &credential.username, &credential.password)
            .map_err(|e| failed(credential, mechanism, e.into()))?;
        Ok(Authenticator {
            credential,
            speculative_mechanism: mechanism,
            speculative,
        })
    }

    /// `saslSupportedMechs`' value (`<db>.<user>`, the user name as given)
    /// when the mechanism is to be negotiated.
    pub(crate) fn negotiation_name(&self) -> Option<String> {
        self.credential
            .mechanism
            .is_none()
            .then(|| format!("{}.{}", self.credential.source, self.credential.username))
    }

    /// The `speculativeAuthenticate` document: the conversation's
    /// `saslStart`, with the database it is for.
    pub(crate) fn speculative_start(&self) -> Document {
        let mut start = sasl_start(self.speculative_mechanism, self.speculative.client_first());
        start.insert("db", self.credential.source.clone());
        start
    }

    /// Authenticates `conn`, whose `hello` answered `hello_reply`: goes on
    /// with the speculative conversation if the server took it up, or
    /// starts one with the negotiated mechanism. Any failure, a network
    /// error included, is [`Error::Authentication`].
    pub(crate) async fn authenticate<T: Transport>(
        self,
        conn: &mut Connection<T>,
        hello_reply: &Document,
    ) -> Result<(), Error> {
        let credential = self.credential;
        let (mechanism, result) = match hello_reply.get_document("speculativeAuthenticate") {
            Ok(first) => {
                let mechanism = self.speculative_mechanism;
                (
                    mechanism,
                    converse(conn, credential, self.speculative, first.clone()).await,
                )
            }
            Err(_) => {
                let mechanism = credential.mechanism.unwrap_or_else(|| negotiated(hello_reply));
                let result = async {
                    let client = ScramClient::new(mechanism, &credential.username, &credential.password)?;
                    let start = sasl_start(mechanism, client.client_first());
                    let first = command(conn, &credential.source, &start).await?;
                    converse(conn, credential, client, first).await
                }
                .await;
                (mechanism, result)
            }
        };
        result.map_err(|e| failed(credential, mechanism, e))
    }
}

/// SCRAM-SHA-256 where the server lists it for the user, else
/// SCRAM-SHA-1 (the auth specification's default mechanism); unknown
/// names in the list are ignored.
fn negotiated(hello_reply: &Document) -> Mechanism {
    let offers_sha256 = hello_reply.get_array("saslSupportedMechs").is_ok_and(|mechs| {
        mechs
            .iter()
            .any(|m| m.as_str() == Some(Mechanism::ScramSha256.name()))
    });
    if offers_sha256 {
        Mechanism::ScramSha256
    } else {
        Mechanism::ScramSha1
    }
}

fn sasl_start(mechanism: Mechanism, client_first: Vec<u8>) -> Document {
    doc! {
        "saslStart": 1,
        "mechanism": mechanism.name(),
        "payload": payload(client_first),
        "autoAuthorize": 1,
        // The server ends the conversation with its final message, saving
        // the empty round trip (MongoDB 4.4 and later).
        "options": { "skipEmptyExchange": true },
    }
}

/// The conversation after the server's first answer (`saslStart`'s reply,
/// or the `hello`'s `speculativeAuthenticate`): our proof, the server's
/// signature checked, and empty exchanges until the server says `done`.
async fn converse<T: Transport>(
    conn: &mut Connection<T>,
    credential: &Credential,
    mut client: ScramClient,
    first: Document,
) -> Result<(), Error> {
    let db = credential.source.as_str();
    let conversation_id = first.get("conversationId").cloned().unwrap_or(Bson::Int32(1));
    let client_final = client.handle_server_first(sasl_payload(&first)?)?;
    let continued = |payload_bytes: Vec<u8>| {
        doc! {
            "saslContinue": 1,
            "conversationId": conversation_id.clone(),
            "payload": payload(payload_bytes),
        }
    };
    let mut reply = command(conn, db, &continued(client_final)).await?;
    client.handle_server_final(sasl_payload(&reply)?)?;
    // Servers before 4.4 ignore skipEmptyExchange and want one more
    // (empty) exchange; a few more are allowed, not endless ones.
    for _ in 0..2 {
        if reply.get_bool("done").unwrap_or(false) {
            return Ok(());
        }
        reply = command(conn, db, &continued(Vec::new())).await?;
    }
    if reply.get_bool("done").unwrap_or(false) {
        Ok(())
    } else {
        Err(ScramError::Malformed {
            message: "server-final",
            problem: "the server never ended the conversation",
        }
        .into())
    }
}

/// One command of the conversation; the server's error is an error.
async fn command<T: Transport>(
    conn: &mut Connection<T>,
    db: &str,
    command: &Document,
) -> Result<Document, Error> {
    let reply = conn.round_trip(db, command, Stage::Authentication).await?;
    match CommandError::from_reply(&reply) {
        Some(error) => Err(error.into()),
        None => Ok(reply),
    }
}

fn sasl_payload(reply: &Document) -> Result<&[u8], Error> {
    match reply.get("payload") {
        Some(Bson::Binary(binary)) => Ok(&binary.bytes),
        _ => Err(ScramError::Malformed {
            message: "server-first",
            problem: "the reply has no binary payload",
        }
        .into()),
    }
}

fn failed(credential: &Credential, mechanism: Mechanism, cause: Error) -> Error {
    Error::Authentication {
        user: credential.username.clone(),
        source_db: credential.source.clone(),
        mechanism: mechanism.name(),
        cause: Box::new(cause),
    }
}

#[cfg(test)]
mod tests {
    use cmap_core::{Address, EstablishErrorKind};

    use super::*;
    use crate::test_server::{block_on, hello_reply, FakeServer, ScramServer};

    /// Authenticates `credential` against `scram` after a hello that
    /// answered the speculative first step (`speculative`) or not, and
    /// returns the outcome and the commands the server received.
    fn authenticate(
        credential: &Credential,
        mut scram: ScramServer,
        speculative: bool,
        hello: Document,
    ) -> (Result<(), Error>, Vec<Document>) {
        let auth = Authenticator::new(credential).unwrap();
        let mut hello = hello;
        if speculative {
            hello.insert("speculativeAuthenticate", scram.start(&auth.speculative_start()));
        }
        let mut conn = Connection::new(
            FakeServer::new(move |command| scram.handle(command)),
            Address::new("db", 27017),
        );
        let result = block_on(auth.authenticate(&mut conn, &hello));
        let received = std::mem::take(&mut conn.transport_mut().received);
        (result, received)
    }

    #[test]
    fn a_speculative_conversation_ends_with_one_sasl_continue() {
        let credential = Credential::new("app", "secret", "shop");
        let scram = ScramServer::new("SCRAM-SHA-256", "app", "secret");
        let (result, received) = authenticate(&credential, scram, true, hello_reply());
        result.unwrap();
        // The client's proof goes to the credential's database, in the
        // conversation the hello began; the server's final message ends it.
        assert_eq!(received.len(), 1, "{received:?}");
        assert_eq!(received[0].get_i32("saslContinue").ok(), Some(1));
        assert_eq!(received[0].get_i32("conversationId").ok(), Some(1));
        assert_eq!(received[0].get_str("$db").ok(), Some("shop"));
    }

    #[test]
    fn without_a_speculative_answer_the_negotiated_mechanism_starts_a_conversation() {
        for (offered, mechanism) in [
            (vec!["SCRAM-SHA-1"], "SCRAM-SHA-1"),
            (vec!["SCRAM-SHA-1", "SCRAM-SHA-256"], "SCRAM-SHA-256"),
        ] {
            let credential = Credential::new("app", "secret", "shop");
            let scram = ScramServer::new(mechanism, "app", "secret");
            let mut hello = hello_reply();
            hello.insert("saslSupportedMechs", offered);
            let (result, received) = authenticate(&credential, scram, false, hello);
            result.unwrap();
            let names: Vec<_> = received
                .iter()
                .map(|c| c.keys().next().unwrap().as_str())
                .collect();
            assert_eq!(names, ["saslStart", "saslContinue"]);
            let start = &received[0];
            assert_eq!(start.get_str("mechanism").ok(), Some(mechanism));
            assert_eq!(start.get_str("$db").ok(), Some("shop"));
            assert_eq!(start.get_i32("autoAuthorize").ok(), Some(1));
            assert_eq!(
                start.get_document("options").unwrap(),
                &doc! { "skipEmptyExchange": true }
            );
        }
    }

    #[test]
    fn a_wrong_password_fails_with_the_servers_error() {
        let credential = Credential::new("app", "wrong", "shop");
        for speculative in [true, false] {
            let scram = ScramServer::new("SCRAM-SHA-256", "app", "secret");
            let mut hello = hello_reply();
            hello.insert("saslSupportedMechs", ["SCRAM-SHA-256"]);
            let (result, _) = authenticate(&credential, scram, speculative, hello);
            let err = result.unwrap_err();
            assert_eq!(err.command_error().map(|e| e.code), Some(18), "{err}");
            assert_eq!(err.establish_kind(), EstablishErrorKind::Authentication);
            assert!(matches!(
                err,
                Error::Authentication {
                    mechanism: "SCRAM-SHA-256",
                    ..
                }
            ));
        }
    }

    #[test]
    fn a_server_that_does_not_prove_it_knows_the_password_is_refused() {
        let credential = Credential::new("app", "secret", "shop");
        let mut scram = ScramServer::new("SCRAM-SHA-256", "app", "secret");
        scram.forged_signature = Some(vec![7; 32]);
        let (result, _) = authenticate(&credential, scram, true, hello_reply());
        let err = result.unwrap_err();
        assert!(
            matches!(&err, Error::Authentication { cause, .. } if matches!(**cause, Error::Scram(_))),
            "{err:?}"
        );
    }

    #[test]
    fn a_server_before_4_4_gets_its_empty_exchange_and_an_endless_one_is_cut() {
        let credential = Credential::new("app", "secret", "shop");
        let mut scram = ScramServer::new("SCRAM-SHA-256", "app", "secret");
        scram.empty_exchanges = 1;
        let (result, received) = authenticate(&credential, scram, true, hello_reply());
        result.unwrap();
        assert_eq!(received.len(), 2);
        assert_eq!(
            received[1].get_binary_generic("payload").unwrap(),
            &Vec::<u8>::new()
        );

        let mut scram = ScramServer::new("SCRAM-SHA-256", "app", "secret");
        scram.empty_exchanges = 100;
        let (result, received) = authenticate(&credential, scram, true, hello_reply());
        assert!(result.unwrap_err().to_string().contains("never ended"));
        assert_eq!(received.len(), 3);
    }

    #[test]
    fn sha256_is_chosen_when_the_server_offers_it() {
        assert_eq!(
            negotiated(&doc! { "saslSupportedMechs": ["SCRAM-SHA-1", "SCRAM-SHA-256", "MADE-UP"] }),
            Mechanism::ScramSha256
        );
        assert_eq!(
            negotiated(&doc! { "saslSupportedMechs": ["SCRAM-SHA-1"] }),
            Mechanism::ScramSha1
        );
        assert_eq!(negotiated(&doc! {}), Mechanism::ScramSha1);
    }

    #[test]
    fn the_speculative_start_names_its_database_and_negotiates_when_no_mechanism_is_set() {
        let credential = Credential::new("app", "secret", "shop");
        let auth = Authenticator::new(&credential).unwrap();
        assert_eq!(auth.negotiation_name().as_deref(), Some("shop.app"));
        let start = auth.speculative_start();
        assert_eq!(start.get_str("mechanism").ok(), Some("SCRAM-SHA-256"));
        assert_eq!(start.get_str("db").ok(), Some("shop"));
        assert_eq!(start.get_i32("saslStart").ok(), Some(1));
        let fixed = credential.with_mechanism(Mechanism::ScramSha1);
        let auth = Authenticator::new(&fixed).unwrap();
        assert_eq!(auth.negotiation_name(), None);
        assert_eq!(
            auth.speculative_start().get_str("mechanism").ok(),
            Some("SCRAM-SHA-1")
        );
    }
}
