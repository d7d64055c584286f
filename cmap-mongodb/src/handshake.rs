//! The MongoDB handshake (the handshake specification): the first
//! command on every new connection, and what its reply must say.

use std::time::{Duration, Instant};

use bson::{doc, Binary, Document};

use crate::auth::Authenticator;
use crate::connection::{Connection, ServerInfo};
use crate::error::{CommandError, Error, Stage};
use crate::options::MongoOptions;
use crate::transport::Transport;

/// The wire versions this client speaks: from MongoDB 3.6 (OP_MSG) to
/// 8.0. A server whose range does not meet this one is refused.
pub(crate) const MIN_WIRE_VERSION: i32 = 6;
pub(crate) const MAX_WIRE_VERSION: i32 = 25;

/// How long each handshake command (the `hello`, each SCRAM step) may
/// take, by the client-side operations timeout specification: under
/// `timeoutMS`, what is left of the checkout that needs the connection
/// ("Server Selection"), or, for a connection made for no checkout
/// (`minPoolSize`), `timeoutMS` from each command's start ("Background
/// Connection Pooling": "refreshed after each command"). Without
/// `timeoutMS`, no bound of its own: `connectTimeoutMS` bounds the
/// establishment, as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandshakeTimeout {
    None,
    Until(Instant),
    Each(Duration),
}

impl HandshakeTimeout {
    /// The policy for a connection of a manager with `timeout_ms`
    /// (`timeoutMS`), for a checkout due by `checkout` (`None`: for none).
    pub(crate) fn new(timeout_ms: Option<Duration>, checkout: Option<Instant>) -> HandshakeTimeout {
        match (timeout_ms, checkout) {
            (None, _) => HandshakeTimeout::None,
            (Some(_), Some(deadline)) => HandshakeTimeout::Until(deadline),
            (Some(each), None) => HandshakeTimeout::Each(each),
        }
    }

    /// The deadline of a command that starts at `now`.
    pub(crate) fn deadline(self, now: Instant) -> Option<Instant> {
        match self {
            HandshakeTimeout::None => None,
            HandshakeTimeout::Until(deadline) => Some(deadline),
            HandshakeTimeout::Each(each) => Some(now + each),
        }
    }
}

/// The handshake command: the legacy `isMaster` with `helloOk` (or `hello`
/// in load-balanced mode), the client metadata, `backpressure: "2"`,
/// `loadBalanced`, and the credential's mechanism negotiation and
/// speculative first step.
pub(crate) fn hello_command(
    options: &MongoOptions,
    metadata: &Document,
    auth: Option<&Authenticator<'_>>,
) -> Document {
    let mut command = if options.load_balanced {
        doc! { "hello": 1 }
    } else {
        doc! { "isMaster": 1, "helloOk": true }
    };
    // The client backpressure specification's version (handshake
    // specification, "Connection handshake"): a string, not a number.
    command.insert("backpressure", "2");
    command.insert("client", metadata.clone());
    if options.load_balanced {
        command.insert("loadBalanced", true);
    }
    if let Some(auth) = auth {
        if let Some(user) = auth.negotiation_name() {
            command.insert("saslSupportedMechs", user);
        }
        command.insert("speculativeAuthenticate", auth.speculative_start());
    }
    command
}

/// Sends the handshake on a new connection and checks the reply; returns
/// it for authentication.
pub(crate) async fn hello<T: Transport>(
    conn: &mut Connection<T>,
    options: &MongoOptions,
    metadata: &Document,
    auth: Option<&Authenticator<'_>>,
) -> Result<Document, Error> {
    let command = hello_command(options, metadata, auth);
    let reply = conn.round_trip("admin", &command, Stage::Hello).await?;
    if let Some(error) = CommandError::from_reply(&reply) {
        return Err(error.into());
    }
    let server = ServerInfo::from_hello(&reply);
    check(&server, options, conn.address().to_string())?;
    conn.set_server(server);
    Ok(reply)
}

/// Refuses a server whose wire versions do not meet ours, and a
/// load-balanced handshake answered without a `serviceId`.
fn check(server: &ServerInfo, options: &MongoOptions, address: String) -> Result<(), Error> {
    let refuse = |reason: String| {
        Err(Error::Handshake {
            address: address.clone(),
            reason,
        })
    };
    if server.min_wire_version > MAX_WIRE_VERSION {
        return refuse(format!(
            "it requires wire version {} or later, and this client speaks up to {MAX_WIRE_VERSION}",
            server.min_wire_version
        ));
    }
    if server.max_wire_version < MIN_WIRE_VERSION {
        return refuse(format!(
            "it speaks wire versions up to {}, and this client needs {MIN_WIRE_VERSION} (MongoDB 3.6) or later",
            server.max_wire_version
        ));
    }
    if options.load_balanced && server.service_id.is_none() {
        return refuse(
            "loadBalanced=true, but the server's hello reply has no serviceId: it is not behind a load balancer \
             that supports load-balanced mode"
                .to_owned(),
        );
    }
    Ok(())
}

/// A SASL payload as BSON binary (generic subtype).
pub(crate) fn payload(bytes: Vec<u8>) -> Binary {
    Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes,
    }
}

#[cfg(test)]
mod tests {
    use cmap_core::Address;

    use super::*;
    use crate::test_server::{block_on, hello_reply, FakeServer};

    fn info(reply: Document) -> ServerInfo {
        ServerInfo::from_hello(&reply)
    }

    #[test]
    fn the_command_is_legacy_hello_with_hellook_unless_load_balanced() {
        let mut options = MongoOptions::new(Address::new("db", 27017));
        let metadata = doc! { "driver": { "name": "x", "version": "1" } };
        let command = hello_command(&options, &metadata, None);
        assert_eq!(command.keys().next().map(String::as_str), Some("isMaster"));
        assert_eq!(command.get_bool("helloOk").ok(), Some(true));
        assert_eq!(command.get_str("backpressure").ok(), Some("2"));
        assert_eq!(command.get_document("client").ok(), Some(&metadata));
        assert!(!command.contains_key("loadBalanced"));
        assert!(!command.contains_key("speculativeAuthenticate"));

        options.load_balanced = true;
        let command = hello_command(&options, &metadata, None);
        assert_eq!(command.keys().next().map(String::as_str), Some("hello"));
        assert!(!command.contains_key("helloOk"));
        assert_eq!(command.get_bool("loadBalanced").ok(), Some(true));
    }

    #[test]
    fn the_reply_is_read_with_the_specifications_defaults() {
        let server = info(doc! {
            "isWritablePrimary": true, "maxWireVersion": 21, "minWireVersion": 0,
            "maxMessageSizeBytes": 1000, "connectionId": 42i64, "helloOk": true,
        });
        assert!(server.is_writable_primary && server.hello_ok);
        assert_eq!((server.min_wire_version, server.max_wire_version), (0, 21));
        assert_eq!((server.max_message_size, server.connection_id), (1000, Some(42)));
        assert_eq!(server.max_bson_object_size, 16 * 1024 * 1024);
        let legacy = info(doc! { "ismaster": true, "maxWireVersion": 8 });
        assert!(legacy.is_writable_primary && !legacy.hello_ok);
        assert_eq!(legacy.max_message_size, 48_000_000);
    }

    #[test]
    fn servers_out_of_our_wire_range_and_lb_replies_without_service_id_are_refused() {
        let mut options = MongoOptions::new(Address::new("db", 27017));
        let ok = |reply: Document, options: &MongoOptions| check(&info(reply), options, "db:27017".into());
        assert!(ok(doc! { "maxWireVersion": 21, "minWireVersion": 0 }, &options).is_ok());
        let old = ok(doc! { "maxWireVersion": 5 }, &options).unwrap_err();
        assert!(old.to_string().contains("up to 5"), "{old}");
        let new = ok(doc! { "maxWireVersion": 40, "minWireVersion": 30 }, &options).unwrap_err();
        assert!(new.to_string().contains("wire version 30 or later"), "{new}");
        options.load_balanced = true;
        let lb = ok(doc! { "maxWireVersion": 21 }, &options).unwrap_err();
        assert!(lb.to_string().contains("serviceId"), "{lb}");
        let oid = bson::oid::ObjectId::new();
        assert!(ok(doc! { "maxWireVersion": 21, "serviceId": oid }, &options).is_ok());
        assert_eq!(info(doc! { "serviceId": oid }).service_id, Some(oid));
    }

    #[test]
    fn a_server_whose_range_meets_ours_at_one_end_is_taken() {
        let options = MongoOptions::new(Address::new("db", 27017));
        let ok = |reply: Document| check(&info(reply), &options, "db:27017".into());
        assert!(ok(doc! { "minWireVersion": MAX_WIRE_VERSION, "maxWireVersion": 30 }).is_ok());
        assert!(ok(doc! { "minWireVersion": 0, "maxWireVersion": MIN_WIRE_VERSION }).is_ok());
        assert!(ok(doc! { "minWireVersion": MAX_WIRE_VERSION + 1, "maxWireVersion": 30 }).is_err());
        assert!(ok(doc! { "minWireVersion": 0, "maxWireVersion": MIN_WIRE_VERSION - 1 }).is_err());
    }

    #[test]
    fn the_hello_is_sent_to_admin_and_its_reply_kept_or_refused() {
        let options = MongoOptions::new(Address::new("db", 27017));
        let metadata = doc! { "driver": { "name": "x", "version": "1" } };
        let mut conn = Connection::new(FakeServer::new(|_| hello_reply()), Address::new("db", 27017));
        let reply = block_on(hello(&mut conn, &options, &metadata, None)).unwrap();
        assert_eq!(reply, hello_reply());
        let sent = &conn.transport_mut().received[0];
        assert_eq!(sent.get_str("$db").ok(), Some("admin"));
        assert_eq!(sent.get_i32("isMaster").ok(), Some(1));
        // What the server said of itself is the connection's.
        assert_eq!(conn.server(), &ServerInfo::from_hello(&hello_reply()));
        assert_eq!(conn.server().connection_id, Some(7));

        let mut conn = Connection::new(
            FakeServer::new(|_| doc! { "ok": 0.0, "code": 11, "errmsg": "no" }),
            Address::new("db", 27017),
        );
        let err = block_on(hello(&mut conn, &options, &metadata, None)).unwrap_err();
        assert_eq!(err.command_error().map(|e| e.code), Some(11), "{err}");

        let mut conn = Connection::new(
            FakeServer::new(|_| doc! { "ok": 1.0, "maxWireVersion": 5 }),
            Address::new("db", 27017),
        );
        let err = block_on(hello(&mut conn, &options, &metadata, None)).unwrap_err();
        assert!(
            matches!(err, Error::Handshake { ref address, .. } if address == "db:27017"),
            "{err:?}"
        );
    }
}

/// The bounds of opening one connection, by the client-side operations
/// timeout specification ("Server Selection", "Background Connection
/// Pooling"): with a deadline and its length (for the timeout error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// TCP (with DNS) and TLS: `connectTimeoutMS`, or, under `timeoutMS`
    /// for a checkout due by a deadline, `min(connectTimeoutMS, what is
    /// left)`.
    pub(crate) socket: Option<(Instant, Duration)>,
    /// The `hello` and authentication together: `connectTimeoutMS`
    /// without `timeoutMS`; under it, none (each command is bounded by
    /// `commands` instead).
    pub(crate) handshake: Option<(Instant, Duration)>,
    /// Each handshake command.
    pub(crate) commands: HandshakeTimeout,
}

impl Limits {
    /// The limits of a connection opened at `now` with `options`, for a
    /// checkout due by `checkout` (`None`: for `minPoolSize`, or for a
    /// checkout without a deadline).
    pub(crate) fn new(options: &MongoOptions, checkout: Option<Instant>, now: Instant) -> Limits {
        let connect = options.connect_timeout.map(|t| (now + t, t));
        let Some(timeout_ms) = options.timeout else {
            return Limits {
                socket: connect,
                handshake: connect,
                commands: HandshakeTimeout::None,
            };
        };
        let left = checkout.map(|d| (d, d.saturating_duration_since(now)));
        let socket = match (connect, left) {
            (Some(connect), Some(left)) => Some(connect.min(left)),
            (connect, left) => connect.or(left),
        };
        Limits {
            socket,
            handshake: None,
            commands: HandshakeTimeout::new(Some(timeout_ms), checkout),
        }
    }
}
