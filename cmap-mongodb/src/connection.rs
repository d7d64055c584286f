//! An established connection: commands in, replies out, one at a time.

use std::fmt;
use std::time::Instant;

use bson::Document;
use cmap_core::{Address, ServiceId};

use crate::error::{CommandError, Error, ProtocolError, Stage};
use crate::transport::Transport;
use crate::wire::{self, Header, HEADER_LEN};

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

    /// Sends `command` and reads the reply, whatever its `ok`. The
    /// connection counts as broken from the first byte sent until the
    /// reply is read, so that a future dropped in between leaves it so.
    pub(crate) async fn round_trip(
        &mut self,
        db: &str,
        command: &Document,
        stage: Stage,
    ) -> Result<Document, Error> {
        if self.broken {
            return Err(Error::Broken);
        }
        let request_id = wire::encode_command(command, db, self.server.max_message_size, &mut self.buf)?;
        self.broken = true;
        let network = |source| Error::Network {
            during: stage,
            source,
        };
        self.transport.write_all(&self.buf).await.map_err(network)?;
        let mut header = [0u8; HEADER_LEN];
        self.transport.read_exact(&mut header).await.map_err(network)?;
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
        self.buf.resize(header.length - HEADER_LEN, 0);
        self.transport.read_exact(&mut self.buf).await.map_err(network)?;
        let reply = wire::decode_reply(&self.buf)?;
        self.broken = false;
        self.last_used = Instant::now();
        Ok(reply)
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
    use crate::test_server::{block_on, hello_reply, FakeServer};

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
}
