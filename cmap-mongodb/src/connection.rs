//! An established connection: commands in, replies out, one at a time.

use std::fmt;
use std::time::{Duration, Instant};

use bson::Document;
use cmap_core::{Address, ServiceId};

use crate::error::{CommandError, Error, ProtocolError, Stage};
use crate::handshake::HandshakeTimeout;
use crate::transport::Transport;
use crate::wire::{self, Header, HEADER_LEN};

/// The server's `MaxTimeMSExpired` (code 50) in a reply: at the top
/// level, in `writeErrors`, or in `writeConcernError` (the specification:
/// the code alone decides).
fn max_time_expired(reply: &Document) -> Option<CommandError> {
    const MAX_TIME_MS_EXPIRED: i32 = 50;
    let top = CommandError::from_reply(reply);
    let concern = reply
        .get_document("writeConcernError")
        .ok()
        .and_then(CommandError::from_reply);
    let writes = reply.get_array("writeErrors").ok().into_iter().flatten();
    top.into_iter()
        .chain(concern)
        .chain(writes.filter_map(|e| e.as_document().and_then(CommandError::from_reply)))
        .find(|e| e.code == MAX_TIME_MS_EXPIRED)
}

/// The first read of a reply's body: the buffer then doubles while more
/// is announced.
const READ_CHUNK: usize = 32 * 1024;

/// What the server said of itself in the handshake's reply.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerInfo {
    /// `minWireVersion`.
    pub min_wire_version: i32,
    /// `maxWireVersion`.
    pub max_wire_version: i32,
    /// `maxMessageSizeBytes`: no message sent on this connection is larger.
    pub max_message_size: usize,
    /// `maxBsonObjectSize`.
    pub max_bson_object_size: usize,
    /// `maxWriteBatchSize`.
    pub max_write_batch_size: usize,
    /// `isWritablePrimary` (or the legacy `ismaster`).
    pub is_writable_primary: bool,
    /// `helloOk`: the server takes `hello` after the handshake.
    pub hello_ok: bool,
    /// `connectionId`: the server's number for this connection.
    pub connection_id: Option<i64>,
    /// `serviceId`, in load-balanced mode.
    pub service_id: Option<bson::oid::ObjectId>,
}

impl ServerInfo {
    /// Reads the fields of a handshake reply, with the handshake
    /// specification's defaults for the ones a server leaves out.
    pub(crate) fn from_hello(reply: &Document) -> ServerInfo {
        let int = |key: &str| match reply.get(key) {
            Some(bson::Bson::Int32(n)) => Some(i64::from(*n)),
            Some(bson::Bson::Int64(n)) => Some(*n),
            Some(bson::Bson::Double(n)) => Some(*n as i64),
            _ => None,
        };
        let size = |key: &str, default: usize| {
            int(key)
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n > 0)
                .unwrap_or(default)
        };
        ServerInfo {
            min_wire_version: int("minWireVersion").map_or(0, |n| n as i32),
            max_wire_version: int("maxWireVersion").map_or(0, |n| n as i32),
            max_message_size: size("maxMessageSizeBytes", wire::DEFAULT_MAX_MESSAGE_SIZE),
            max_bson_object_size: size("maxBsonObjectSize", 16 * 1024 * 1024),
            max_write_batch_size: size("maxWriteBatchSize", 100_000),
            is_writable_primary: reply
                .get_bool("isWritablePrimary")
                .or_else(|_| reply.get_bool("ismaster"))
                .unwrap_or(false),
            hello_ok: reply.get_bool("helloOk").unwrap_or(false),
            connection_id: int("connectionId"),
            service_id: reply.get_object_id("serviceId").ok(),
        }
    }
}

/// A connection to a MongoDB server, established (TCP, TLS, `hello`,
/// authentication) and ready for commands.
///
/// [`run_command`](Connection::run_command) sends one command and reads
/// its reply. A network error, a broken reply, or a command future dropped
/// before its reply was read leaves the connection
/// [broken](Connection::is_broken): the pool closes it when it comes back.
pub struct Connection<T> {
    transport: T,
    address: Address,
    server: ServerInfo,
    /// The bytes of the last message sent or received.
    buf: Vec<u8>,
    broken: bool,
    last_used: Instant,
    /// The shortest round trip so far.
    min_rtt: Option<Duration>,
    /// The bound of each handshake command (`round_trip`), set while the
    /// connection is being opened.
    pub(crate) handshake_timeout: HandshakeTimeout,
}

impl<T> fmt::Debug for Connection<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("address", &self.address)
            .field("server_connection_id", &self.server.connection_id)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> Connection<T> {
    /// A connection over `transport`, before its handshake: commands may
    /// be at most the default message size until the `hello` says more.
    pub(crate) fn new(transport: T, address: Address) -> Connection<T> {
        Connection {
            transport,
            address,
            server: ServerInfo::from_hello(&Document::new()),
            buf: Vec::new(),
            broken: false,
            last_used: Instant::now(),
            min_rtt: None,
            handshake_timeout: HandshakeTimeout::None,
        }
    }

    /// The socket, for the blocking manager's socket timeouts.
    #[cfg(feature = "blocking")]
    pub(crate) fn transport(&self) -> &T {
        &self.transport
    }

    /// The in-memory server under a test's connection.
    #[cfg(test)]
    pub(crate) fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    pub(crate) fn set_server(&mut self, server: ServerInfo) {
        self.server = server;
    }

    /// Runs `command` on database `db` and returns the server's reply, or
    /// its error reply as [`Error::Command`]. `$db` is added to what is
    /// sent; `command` itself is not changed.
    ///
    /// # Errors
    ///
    /// A network error ([`Error::Network`]: the connection is broken from
    /// then on), the server's error ([`Error::Command`]: the connection
    /// stays usable), a message over the server's `maxMessageSizeBytes`
    /// (refused before anything is sent), a reply that breaks the
    /// protocol, or [`Error::Broken`] for a connection an earlier error
    /// broke.
    pub async fn run_command(&mut self, db: &str, command: &Document) -> Result<Document, Error> {
        let reply = self.round_trip(db, command, Stage::Command).await?;
        match CommandError::from_reply(&reply) {
            Some(error) => Err(error.into()),
            None => Ok(reply),
        }
    }

    /// [`run_command`](Connection::run_command) bounded by `deadline`, as
    /// the client-side operations timeout specification's "Command
    /// Execution" says: the command carries `maxTimeMS`, what is left less
    /// the connection's [minimum round-trip time](Connection::min_round_trip_time);
    /// when that is under 1 ms nothing is sent and the connection stays
    /// usable; the write, then all the reads of the reply together, are
    /// bounded by what is left, and a deadline passed then breaks the
    /// connection (the pool closes it). A command with a `maxTimeMS` of its
    /// own is sent with both (the specification leaves that undefined).
    ///
    /// # Errors
    ///
    /// As [`run_command`](Connection::run_command), and
    /// [`Error::TimedOut`] with its [`Stage`]: `BeforeSend`, `Send`,
    /// `Reply`, or `Server` for the server's `MaxTimeMSExpired` (code 50,
    /// at the top level, in `writeErrors` or in `writeConcernError`).
    pub async fn run_command_until(
        &mut self,
        db: &str,
        command: &Document,
        deadline: Instant,
    ) -> Result<Document, Error> {
        let reply = self.exchange(db, command, Stage::Command, Some(deadline)).await?;
        if let Some(expired) = max_time_expired(&reply) {
            return Err(Error::TimedOut {
                during: Stage::Server,
                cause: Some(Box::new(expired.into())),
            });
        }
        match CommandError::from_reply(&reply) {
            Some(error) => Err(error.into()),
            None => Ok(reply),
        }
    }

    /// Sends a handshake command (`hello`, SCRAM) and reads the reply,
    /// whatever its `ok`. The connection counts as broken from the first
    /// byte sent until the reply is read, so that a future dropped in
    /// between leaves it so. Under `timeoutMS` ([`HandshakeTimeout`]) the
    /// command carries `maxTimeMS` and its I/O is bounded, as a command's
    /// (client-side operations timeout, "Command Execution"); running out
    /// is [`Error::Timeout`] of `stage`, which the pool reads as the
    /// establishment's, not an operation's, timeout.
    pub(crate) async fn round_trip(
        &mut self,
        db: &str,
        command: &Document,
        stage: Stage,
    ) -> Result<Document, Error> {
        let started = Instant::now();
        let Some(deadline) = self.handshake_timeout.deadline(started) else {
            return self.exchange(db, command, stage, None).await;
        };
        let timed_out = Error::Timeout {
            during: stage,
            after: deadline.saturating_duration_since(started),
        };
        match self.exchange(db, command, stage, Some(deadline)).await {
            Err(Error::TimedOut { .. }) => Err(timed_out),
            Ok(reply) if max_time_expired(&reply).is_some() => Err(timed_out),
            done => done,
        }
    }

    /// [`round_trip`](Connection::round_trip), bounded by `deadline` if
    /// there is one.
    async fn exchange(
        &mut self,
        db: &str,
        command: &Document,
        stage: Stage,
        deadline: Option<Instant>,
    ) -> Result<Document, Error> {
        if self.broken {
            return Err(Error::Broken);
        }
        let max_time_ms = deadline.map(|d| self.max_time_ms(d)).transpose()?;
        let max_size = self.server.max_message_size;
        let request_id = wire::encode_command_with(command, db, max_time_ms, max_size, &mut self.buf)?;
        // Checked again once the message is built, before a byte is sent.
        if let Some(deadline) = deadline {
            self.max_time_ms(deadline)?;
        }
        let sent_at = Instant::now();
        self.broken = true;
        let failed = |during: Stage| {
            move |source: std::io::Error| match deadline {
                Some(_) if source.kind() == std::io::ErrorKind::TimedOut => {
                    Error::TimedOut { during, cause: None }
                }
                _ => Error::Network {
                    during: stage,
                    source,
                },
            }
        };
        self.transport
            .write_all(&self.buf, deadline)
            .await
            .map_err(failed(Stage::Send))?;
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return Err(Error::TimedOut {
                during: Stage::Reply,
                cause: None,
            });
        }
        let mut header = [0u8; HEADER_LEN];
        self.transport
            .read_exact(&mut header, deadline)
            .await
            .map_err(failed(Stage::Reply))?;
        let header = Header::parse(
            &header,
            self.server.max_message_size.max(wire::DEFAULT_MAX_MESSAGE_SIZE),
        )?;
        if header.response_to != request_id {
            return Err(ProtocolError::ResponseTo {
                expected: request_id,
                got: header.response_to,
            }
            .into());
        }
        // The body grows as its bytes arrive, so that a length announced
        // and never sent costs no memory.
        self.buf.clear();
        while self.buf.len() < header.length - HEADER_LEN {
            let start = self.buf.len();
            let end = (header.length - HEADER_LEN).min(start.max(READ_CHUNK) * 2);
            self.buf.resize(end, 0);
            self.transport
                .read_exact(&mut self.buf[start..], deadline)
                .await
                .map_err(failed(Stage::Reply))?;
        }
        let reply = wire::decode_reply(&self.buf)?;
        self.broken = false;
        self.last_used = Instant::now();
        // Commands only: a handshake that crossed a stall (the server
        // silent for seconds, then back) would leave a minimum no later
        // command could beat, and fail every command with less time left
        // before it is sent.
        if stage == Stage::Command {
            let rtt = self.last_used.saturating_duration_since(sent_at);
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |min| min.min(rtt)));
        }
        Ok(reply)
    }

    /// `maxTimeMS` for a command due by `deadline`: what is left less the
    /// minimum round-trip time, in whole milliseconds; under one, the
    /// timeout error of a command not sent.
    fn max_time_ms(&self, deadline: Instant) -> Result<i64, Error> {
        let left = deadline.saturating_duration_since(Instant::now());
        match left.saturating_sub(self.min_rtt.unwrap_or_default()).as_millis() {
            0 => Err(Error::TimedOut {
                during: Stage::BeforeSend,
                cause: None,
            }),
            ms => Ok(i64::try_from(ms).unwrap_or(i64::MAX)),
        }
    }

    /// The shortest round trip (command sent to reply read) of the
    /// commands run on this connection (not its handshake); `None` before
    /// the first. What `maxTimeMS` leaves for the network.
    pub fn min_round_trip_time(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// Whether the connection can no longer be used: an error broke it,
    /// or the server has closed it (seen without a round trip).
    pub fn is_broken(&mut self) -> bool {
        if !self.broken && self.transport.is_closed() {
            self.broken = true;
        }
        self.broken
    }

    /// What the server said of itself in the handshake.
    pub fn server(&self) -> &ServerInfo {
        &self.server
    }

    /// The server's address.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// When a command last completed on it (or when it was made).
    pub fn last_used(&self) -> Instant {
        self.last_used
    }

    /// The load balancer's service behind this connection, in
    /// load-balanced mode.
    pub fn service_id(&self) -> Option<ServiceId> {
        self.server.service_id.map(|oid| ServiceId(oid.bytes()))
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use bson::doc;

    use super::*;
    use crate::test_server::{block_on, hello_reply, op_msg_reply, FakeServer};

    fn connection(handler: impl FnMut(&Document) -> Document + Send + 'static) -> Connection<FakeServer> {
        Connection::new(FakeServer::new(handler), Address::new("db", 27017))
    }

    #[test]
    fn a_command_gets_its_reply_and_a_servers_error_is_an_error_that_keeps_the_connection() {
        let mut conn = connection(|command| match command.get_str("fail") {
            Ok(message) => doc! { "ok": 0.0, "code": 2, "codeName": "BadValue", "errmsg": message },
            Err(_) => doc! { "ok": 1.0, "echo": command.clone() },
        });
        assert!(!conn.is_broken());
        let reply = block_on(conn.run_command("shop", &doc! { "find": "orders" })).unwrap();
        assert_eq!(
            reply,
            doc! { "ok": 1.0, "echo": { "find": "orders", "$db": "shop" } }
        );
        let err = block_on(conn.run_command("shop", &doc! { "ping": 1, "fail": "no" })).unwrap_err();
        assert_eq!(err.command_error().map(|e| e.code), Some(2), "{err}");
        assert!(!err.is_network());
        assert!(
            !conn.is_broken(),
            "a server's answer leaves the connection usable"
        );
        assert!(block_on(conn.run_command("shop", &doc! { "ping": 1 })).is_ok());
        assert_eq!(conn.transport_mut().received.len(), 3);
    }

    #[test]
    fn a_reply_to_another_request_breaks_the_connection() {
        let mut conn = connection(|_| doc! { "ok": 1.0 });
        conn.transport_mut().response_to_shift = 1;
        let err = block_on(conn.run_command("admin", &doc! { "ping": 1 })).unwrap_err();
        assert!(
            matches!(err, Error::Protocol(ProtocolError::ResponseTo { expected, got }) if got == expected + 1),
            "{err:?}"
        );
        assert!(conn.is_broken());
        conn.transport_mut().response_to_shift = 0;
        let err = block_on(conn.run_command("admin", &doc! { "ping": 1 })).unwrap_err();
        assert!(matches!(err, Error::Broken), "{err:?}");
        assert_eq!(conn.transport_mut().received.len(), 1, "nothing more is sent");
    }

    #[test]
    fn a_reply_announced_long_and_cut_short_costs_what_arrived_not_what_was_announced() {
        let mut conn = connection(|_| doc! { "ok": 1.0 });
        let mut raw = op_msg_reply(0, &doc! { "ok": 1.0 });
        raw[..4].copy_from_slice(&40_000_000i32.to_le_bytes());
        conn.transport_mut().raw_reply = Some(raw);
        let err = block_on(conn.run_command("admin", &doc! { "ping": 1 })).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Network {
                    during: Stage::Command,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(conn.buf.capacity() <= 2 * READ_CHUNK, "{}", conn.buf.capacity());
        assert!(conn.is_broken());
    }

    #[test]
    fn a_network_error_breaks_the_connection_and_names_the_stage() {
        let mut conn = connection(|_| doc! { "ok": 1.0 });
        conn.transport_mut().fail_writes = Some(io::ErrorKind::ConnectionReset);
        let err = block_on(conn.round_trip("admin", &doc! { "hello": 1 }, Stage::Hello)).unwrap_err();
        assert!(
            matches!(err, Error::Network { during: Stage::Hello, ref source } if source.kind() == io::ErrorKind::ConnectionReset),
            "{err:?}"
        );
        assert!(conn.is_broken());
    }

    #[test]
    fn a_connection_the_server_closed_is_broken() {
        let mut conn = connection(|_| doc! { "ok": 1.0 });
        assert!(!conn.is_broken());
        conn.transport_mut().closed = true;
        assert!(conn.is_broken());
        // It stays broken.
        conn.transport_mut().closed = false;
        assert!(conn.is_broken());
    }

    #[test]
    fn the_handshake_fields_are_kept_and_debug_names_the_server() {
        let mut conn = connection(|_| doc! { "ok": 1.0 });
        assert_eq!(conn.service_id(), None);
        let oid = bson::oid::ObjectId::new();
        let mut hello = hello_reply();
        hello.insert("serviceId", oid);
        conn.set_server(ServerInfo::from_hello(&hello));
        assert_eq!(conn.service_id(), Some(ServiceId(oid.bytes())));
        assert_eq!(conn.server().connection_id, Some(7));
        let debug = format!("{conn:?}");
        assert!(
            debug.contains(r#"host: "db""#) && debug.contains("server_connection_id: Some(7)"),
            "{debug}"
        );
    }

    #[test]
    fn numbers_of_any_bson_type_are_read_and_sizes_that_are_not_positive_are_the_defaults() {
        let server = ServerInfo::from_hello(&doc! {
            "maxWireVersion": 21.0, "minWireVersion": 6i64, "maxMessageSizeBytes": 0,
            "maxBsonObjectSize": -1, "maxWriteBatchSize": 1000.0,
        });
        assert_eq!((server.min_wire_version, server.max_wire_version), (6, 21));
        assert_eq!(server.max_message_size, wire::DEFAULT_MAX_MESSAGE_SIZE);
        assert_eq!(server.max_bson_object_size, 16 * 1024 * 1024);
        assert_eq!(server.max_write_batch_size, 1000);
    }

    fn sent_max_time_ms(conn: &mut Connection<FakeServer>) -> Option<i64> {
        let sent = conn.transport_mut().received.last().cloned().unwrap();
        sent.get_i64("maxTimeMS").ok()
    }

    #[test]
    fn with_a_deadline_max_time_ms_is_what_is_left_less_the_minimum_round_trip_time() {
        let mut conn = connection(|_| doc! { "ok": 1.0 });
        block_on(conn.round_trip("admin", &doc! { "hello": 1 }, Stage::Hello)).unwrap();
        assert_eq!(conn.min_round_trip_time(), None, "the handshake is not a sample");
        block_on(conn.run_command("db", &doc! { "ping": 1 })).unwrap();
        assert_eq!(sent_max_time_ms(&mut conn), None, "no deadline, no maxTimeMS");
        assert!(conn.min_round_trip_time().is_some(), "a round trip is measured");
        conn.min_rtt = Some(Duration::from_millis(100));
        let deadline = Instant::now() + Duration::from_millis(1000);
        block_on(conn.run_command_until("db", &doc! { "ping": 1 }, deadline)).unwrap();
        let sent = sent_max_time_ms(&mut conn).expect("maxTimeMS");
        assert!((890..=900).contains(&sent), "{sent}");
        assert_eq!(
            conn.transport_mut().received.last().unwrap().get_str("$db").ok(),
            Some("db")
        );
        // The round trip in memory is faster than 100 ms: the minimum falls.
        assert!(conn.min_round_trip_time() < Some(Duration::from_millis(100)));
    }

    #[test]
    fn what_is_left_not_covering_the_round_trip_time_fails_before_sending_and_keeps_the_connection() {
        let mut conn = connection(|_| doc! { "ok": 1.0 });
        conn.min_rtt = Some(Duration::from_millis(200));
        for deadline in [Instant::now() + Duration::from_millis(150), Instant::now()] {
            let err = block_on(conn.run_command_until("db", &doc! { "ping": 1 }, deadline)).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::TimedOut {
                        during: Stage::BeforeSend,
                        cause: None
                    }
                ),
                "{err:?}"
            );
            assert!(err.is_timeout() && !err.is_network());
            assert!(err.to_string().contains("minimum round-trip time"), "{err}");
        }
        assert!(conn.transport_mut().received.is_empty(), "nothing was sent");
        assert!(!conn.is_broken(), "the connection goes back to the pool usable");
    }

    #[test]
    fn max_time_ms_expired_is_a_timeout_wherever_the_server_puts_it() {
        let expired = doc! { "code": 50, "codeName": "MaxTimeMSExpired", "errmsg": "time limit" };
        for reply in [
            doc! { "ok": 0.0, "code": 50, "errmsg": "operation exceeded time limit" },
            doc! { "ok": 1.0, "writeErrors": [{ "index": 0, "code": 50 }] },
            doc! { "ok": 1.0, "writeConcernError": expired.clone() },
        ] {
            let answer = reply.clone();
            let mut conn = connection(move |_| answer.clone());
            let deadline = Instant::now() + Duration::from_secs(5);
            let err = block_on(conn.run_command_until("db", &doc! { "insert": "c" }, deadline)).unwrap_err();
            let Error::TimedOut {
                during: Stage::Server,
                cause: Some(cause),
            } = &err
            else {
                panic!("{err:?} for {reply}");
            };
            assert_eq!(cause.command_error().map(|e| e.code), Some(50));
            assert!(err.to_string().contains(&cause.to_string()), "{err}");
            assert!(!conn.is_broken(), "the server answered: the connection is fine");
        }
        // Another code is the server's error, as without a deadline.
        let mut conn = connection(|_| doc! { "ok": 0.0, "code": 2 });
        let deadline = Instant::now() + Duration::from_secs(5);
        let err = block_on(conn.run_command_until("db", &doc! { "ping": 1 }, deadline)).unwrap_err();
        assert!(matches!(err, Error::Command(ref e) if e.code == 2), "{err:?}");
    }
}
