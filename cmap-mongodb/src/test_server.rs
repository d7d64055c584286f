//! A MongoDB server in memory, for the unit tests of the protocol code
//! (a connection's round trip, the handshake, authentication): a
//! [`Transport`] that reads each OP_MSG request written to it, asks a
//! handler for the reply document, and hands back that reply as an OP_MSG
//! to the next reads. Its futures are always ready, so [`block_on`] polls
//! them once. [`ScramServer`] is the server side of SCRAM (RFC 5802, with
//! the auth specification's SCRAM-SHA-1 password digest), written apart
//! from the client so that each checks the other.

use std::collections::VecDeque;
use std::future::Future;
use std::io;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bson::{doc, Bson, Document};
use hmac::{EagerHash, Hmac, KeyInit, Mac};
use sha2::Digest;

use crate::transport::{sealed, Transport};
use crate::wire::{decode_reply, HEADER_LEN, OP_MSG};

/// Runs a future of the protocol code over a [`FakeServer`] to its end.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    crate::transport::poll_once(future).expect("a future over the in-memory server waited")
}

type Handler = Box<dyn FnMut(&Document) -> Document + Send>;

/// The in-memory server: every command it was sent, and the bytes of the
/// replies not read yet.
pub(crate) struct FakeServer {
    handler: Handler,
    /// The commands received, in order, as sent (`$db` included).
    pub(crate) received: Vec<Document>,
    replies: VecDeque<u8>,
    /// Added to the `responseTo` of each reply: non-zero, the reply names
    /// another request.
    pub(crate) response_to_shift: i32,
    /// What `is_closed` says: the server has hung up.
    pub(crate) closed: bool,
    /// Writes fail with this kind of error (a connection reset).
    pub(crate) fail_writes: Option<io::ErrorKind>,
    /// Sent instead of the reply, with the request's id as `responseTo`.
    pub(crate) raw_reply: Option<Vec<u8>>,
}

impl FakeServer {
    /// A server that answers each command with `handler`'s document.
    pub(crate) fn new(handler: impl FnMut(&Document) -> Document + Send + 'static) -> FakeServer {
        FakeServer {
            handler: Box::new(handler),
            received: Vec::new(),
            replies: VecDeque::new(),
            response_to_shift: 0,
            closed: false,
            fail_writes: None,
            raw_reply: None,
        }
    }

    fn receive(&mut self, message: &[u8]) -> io::Result<()> {
        if let Some(kind) = self.fail_writes {
            return Err(io::Error::from(kind));
        }
        let word = |i: usize| i32::from_le_bytes(message[i..i + 4].try_into().unwrap());
        assert_eq!(
            usize::try_from(word(0)).ok(),
            Some(message.len()),
            "one whole message per write"
        );
        assert_eq!(word(12), OP_MSG, "a request is an OP_MSG");
        assert_eq!(word(8), 0, "a request answers nothing");
        let command = decode_reply(&message[HEADER_LEN..]).expect("a well-formed OP_MSG request");
        let reply = (self.handler)(&command);
        self.received.push(command);
        match &self.raw_reply {
            Some(raw) => {
                self.replies.extend(&raw[..8]);
                self.replies.extend(word(4).to_le_bytes());
                self.replies.extend(&raw[12..]);
            }
            None => self
                .replies
                .extend(op_msg_reply(word(4).wrapping_add(self.response_to_shift), &reply)),
        }
        Ok(())
    }
}

/// An OP_MSG reply to request `response_to`: header, no flags, `body` as
/// its one body section.
pub(crate) fn op_msg_reply(response_to: i32, body: &Document) -> Vec<u8> {
    let body = body.to_vec().unwrap();
    let length = i32::try_from(HEADER_LEN + 4 + 1 + body.len()).unwrap();
    let mut message = Vec::new();
    for word in [length, 1_000_000, response_to, OP_MSG] {
        message.extend_from_slice(&word.to_le_bytes());
    }
    message.extend_from_slice(&0u32.to_le_bytes());
    message.push(0);
    message.extend_from_slice(&body);
    message
}

impl sealed::Sealed for FakeServer {}

impl Transport for FakeServer {
    fn write_all<'a>(
        &'a mut self,
        bytes: &'a [u8],
        _deadline: Option<std::time::Instant>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a {
        std::future::ready(self.receive(bytes))
    }

    fn read_exact<'a>(
        &'a mut self,
        buf: &'a mut [u8],
        _deadline: Option<std::time::Instant>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a {
        std::future::ready(if self.replies.len() < buf.len() {
            Err(io::Error::from(io::ErrorKind::UnexpectedEof))
        } else {
            let n = buf.len();
            for (byte, reply) in buf.iter_mut().zip(self.replies.drain(..n)) {
                *byte = reply;
            }
            Ok(())
        })
    }

    fn is_closed(&mut self) -> bool {
        self.closed
    }
}

/// A hello reply of a MongoDB 8.0 primary.
pub(crate) fn hello_reply() -> Document {
    doc! {
        "ok": 1.0, "isWritablePrimary": true, "helloOk": true,
        "minWireVersion": 0, "maxWireVersion": 25, "maxMessageSizeBytes": 48_000_000,
        "connectionId": 7,
    }
}

/// The `AuthenticationFailed` reply.
pub(crate) fn auth_failed() -> Document {
    doc! {
        "ok": 0.0, "code": 18, "codeName": "AuthenticationFailed", "errmsg": "Authentication failed.",
    }
}

/// The server side of one SCRAM conversation for one user.
pub(crate) struct ScramServer {
    mechanism: &'static str,
    username: String,
    salted_password: Vec<u8>,
    salt: Vec<u8>,
    iterations: u32,
    /// The messages of the conversation so far, for `AuthMessage`.
    client_first_bare: String,
    server_first: String,
    /// Empty exchanges the server wants after its final message before it
    /// says `done` (servers before 4.4 want one).
    pub(crate) empty_exchanges: usize,
    /// Sends this signature instead of the true one (a server that does
    /// not know the password).
    pub(crate) forged_signature: Option<Vec<u8>>,
}

impl ScramServer {
    /// `mechanism` is "SCRAM-SHA-1" or "SCRAM-SHA-256"; `password` the
    /// user's password, prepared as the auth specification says (the MD5
    /// digest for SCRAM-SHA-1, ASCII passwords only for SCRAM-SHA-256).
    pub(crate) fn new(mechanism: &'static str, username: &str, password: &str) -> ScramServer {
        let salt = b"in-memory salt".to_vec();
        let iterations = 4096;
        let salted_password = match mechanism {
            "SCRAM-SHA-1" => {
                let digest = md5::Md5::digest(format!("{username}:mongo:{password}").as_bytes());
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                hi::<sha1::Sha1>(hex.as_bytes(), &salt, iterations)
            }
            "SCRAM-SHA-256" => hi::<sha2::Sha256>(password.as_bytes(), &salt, iterations),
            other => panic!("no mechanism {other}"),
        };
        ScramServer {
            mechanism,
            username: username.to_owned(),
            salted_password,
            salt,
            iterations,
            client_first_bare: String::new(),
            server_first: String::new(),
            empty_exchanges: 0,
            forged_signature: None,
        }
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self.mechanism {
            "SCRAM-SHA-1" => hmac::<sha1::Sha1>(key, data),
            _ => hmac::<sha2::Sha256>(key, data),
        }
    }

    fn hash(&self, data: &[u8]) -> Vec<u8> {
        match self.mechanism {
            "SCRAM-SHA-1" => sha1::Sha1::digest(data).to_vec(),
            _ => sha2::Sha256::digest(data).to_vec(),
        }
    }

    /// The reply to `saslStart`'s document (a `saslStart` command, or the
    /// hello's `speculativeAuthenticate`), without `ok`.
    pub(crate) fn start(&mut self, start: &Document) -> Document {
        if start.get_str("mechanism").ok() != Some(self.mechanism) {
            return doc! { "ok": 0.0, "code": 334, "codeName": "MechanismUnavailable" };
        }
        let client_first = String::from_utf8(payload(start)).unwrap();
        let bare = client_first
            .strip_prefix("n,,")
            .expect("no channel binding, no authzid");
        assert_eq!(
            attribute(bare, "n="),
            Some(self.username.as_str()),
            "the user name"
        );
        let nonce = attribute(bare, "r=").expect("a client nonce").to_owned() + "server-part";
        self.client_first_bare = bare.to_owned();
        self.server_first = format!("r={nonce},s={},i={}", BASE64.encode(&self.salt), self.iterations);
        doc! {
            "conversationId": 1,
            "done": false,
            "payload": crate::handshake::payload(self.server_first.clone().into_bytes()),
        }
    }

    /// The reply to a `saslContinue`: the server's final message (with
    /// `done` unless empty exchanges are wanted), then `done` after them.
    pub(crate) fn next(&mut self, command: &Document) -> Document {
        assert_eq!(command.get_i32("conversationId").ok(), Some(1));
        let client_final = String::from_utf8(payload(command)).unwrap();
        if client_final.is_empty() {
            self.empty_exchanges = self.empty_exchanges.saturating_sub(1);
            return doc! {
                "ok": 1.0, "conversationId": 1, "done": self.empty_exchanges == 0,
                "payload": crate::handshake::payload(Vec::new()),
            };
        }
        let (without_proof, proof) = client_final.rsplit_once(",p=").expect("a proof");
        let nonce = attribute(&self.server_first, "r=").unwrap();
        if attribute(without_proof, "c=") != Some("biws") || attribute(without_proof, "r=") != Some(nonce) {
            return auth_failed();
        }
        let auth_message = format!("{},{},{without_proof}", self.client_first_bare, self.server_first);
        let client_key = self.hmac(&self.salted_password, b"Client Key");
        let client_signature = self.hmac(&self.hash(&client_key), auth_message.as_bytes());
        let expected: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        if BASE64.decode(proof).ok() != Some(expected) {
            return auth_failed();
        }
        let server_key = self.hmac(&self.salted_password, b"Server Key");
        let signature = self
            .forged_signature
            .clone()
            .unwrap_or_else(|| self.hmac(&server_key, auth_message.as_bytes()));
        let server_final = format!("v={}", BASE64.encode(signature));
        doc! {
            "ok": 1.0, "conversationId": 1, "done": self.empty_exchanges == 0,
            "payload": crate::handshake::payload(server_final.into_bytes()),
        }
    }

    /// Answers `saslStart` and `saslContinue`.
    pub(crate) fn handle(&mut self, command: &Document) -> Document {
        if command.contains_key("saslStart") {
            let mut reply = self.start(command);
            reply.entry("ok".to_owned()).or_insert(Bson::Double(1.0));
            reply
        } else if command.contains_key("saslContinue") {
            self.next(command)
        } else {
            panic!("not a SASL command: {command}")
        }
    }
}

fn payload(document: &Document) -> Vec<u8> {
    match document.get("payload") {
        Some(Bson::Binary(binary)) => binary.bytes.clone(),
        other => panic!("a SASL payload, not {other:?}"),
    }
}

/// The value of a SCRAM attribute (`name` with its `=`).
fn attribute<'a>(message: &'a str, name: &str) -> Option<&'a str> {
    message.split(',').find_map(|part| part.strip_prefix(name))
}

fn hmac<D: EagerHash>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<D> as KeyInit>::new_from_slice(key).unwrap();
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hi<D: EagerHash + Digest>(password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut salted = vec![0; <D as Digest>::output_size()];
    pbkdf2::pbkdf2_hmac::<D>(password, salt, iterations, &mut salted);
    salted
}

/// A MongoDB server on a loopback port, for the managers' tests: each
/// connection is served on a thread of its own by a handler `handlers`
/// makes for it; a handler that answers `None` hangs up.
pub(crate) fn serve<H>(mut handlers: impl FnMut() -> H + Send + 'static) -> std::net::SocketAddr
where
    H: FnMut(&Document) -> Option<Document> + Send + 'static,
{
    serve_raw(None, move || {
        let mut handler = handlers();
        move |request_id: i32, command: &Document| {
            handler(command).map(|reply| op_msg_reply(request_id, &reply))
        }
    })
}

/// [`serve`] for a hostile server: the handler gets each request's id and
/// command and answers the bytes to send, whatever they are (`None`
/// hangs up); with a `pace`, every reply after the first (the hello's)
/// goes one byte per `pace`.
pub(crate) fn serve_raw<H>(
    pace: Option<std::time::Duration>,
    mut handlers: impl FnMut() -> H + Send + 'static,
) -> std::net::SocketAddr
where
    H: FnMut(i32, &Document) -> Option<Vec<u8>> + Send + 'static,
{
    use std::io::{Read, Write};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut handler = handlers();
            let mut replies = 0;
            std::thread::spawn(move || loop {
                let mut header = [0u8; HEADER_LEN];
                if stream.read_exact(&mut header).is_err() {
                    return;
                }
                let word = |i: usize| i32::from_le_bytes(header[i..i + 4].try_into().unwrap());
                let mut body = vec![0; usize::try_from(word(0)).unwrap() - HEADER_LEN];
                if stream.read_exact(&mut body).is_err() {
                    return;
                }
                let command = decode_reply(&body).expect("a well-formed OP_MSG request");
                let Some(reply) = handler(word(4), &command) else {
                    return;
                };
                replies += 1;
                let pace = pace.filter(|_| replies > 1);
                let pieces: Vec<&[u8]> = match pace {
                    None => vec![&reply],
                    Some(_) => reply.chunks(1).collect(),
                };
                for piece in pieces {
                    if stream.write_all(piece).is_err() {
                        return;
                    }
                    if let Some(pace) = pace {
                        std::thread::sleep(pace);
                    }
                }
            });
        }
    });
    address
}

/// A mongod with one user, `app` with password `secret`
/// (SCRAM-SHA-256): the hello (taking up a speculative first step), the
/// SASL commands, `hangUp` (it closes the connection), and `{ok: 1}`
/// for anything else.
pub(crate) fn mongod() -> impl FnMut(&Document) -> Option<Document> + Send + 'static {
    let mut scram = ScramServer::new("SCRAM-SHA-256", "app", "secret");
    move |command| {
        Some(
            if command.contains_key("isMaster") || command.contains_key("hello") {
                let mut reply = hello_reply();
                if let Ok(start) = command.get_document("speculativeAuthenticate") {
                    reply.insert("speculativeAuthenticate", scram.start(start));
                }
                reply
            } else if command.contains_key("saslStart") || command.contains_key("saslContinue") {
                scram.handle(command)
            } else if command.contains_key("hangUp") {
                return None;
            } else {
                doc! { "ok": 1.0 }
            },
        )
    }
}

/// A load balancer's mongod: its hello reply carries `service_id`, the
/// rest is [`mongod`]'s; no user.
pub(crate) fn load_balancer(service_id: bson::oid::ObjectId) -> std::net::SocketAddr {
    serve(move || {
        move |command: &Document| {
            let mut reply = hello_reply();
            if command.contains_key("hello") {
                reply.insert("serviceId", service_id);
            }
            Some(reply)
        }
    })
}

/// A server that reads each command and answers none for 3 s, then hangs
/// up: for a `connectTimeoutMS` shorter than that.
pub(crate) fn silent() -> std::net::SocketAddr {
    serve(|| {
        |_: &Document| {
            std::thread::sleep(std::time::Duration::from_secs(3));
            None
        }
    })
}

/// A port nothing listens on.
pub(crate) fn closed_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// A [`mongod`] that answers each command `delay` late, and every command
/// it was sent, on any connection.
pub(crate) fn mongod_recorded(
    delay: std::time::Duration,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<Document>>>,
) {
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = sent.clone();
    let address = serve(move || {
        let (mut inner, record) = (mongod(), record.clone());
        move |command: &Document| {
            record.lock().unwrap().push(command.clone());
            std::thread::sleep(delay);
            inner(command)
        }
    });
    (address, sent)
}
