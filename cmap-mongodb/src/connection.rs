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
