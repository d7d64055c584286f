//! The async managers, written once for every async runtime: opening a
//! connection (resolve, connect, TLS, `hello`, authentication, each
//! bounded by what is left of `connectTimeoutMS`, or as `timeoutMS` says:
//! [`Limits`]) and the pool's
//! `ManageConnection`. What differs between runtimes (their sockets, TLS
//! streams and timers) is a [`Net`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;

use cmap_async::ManageConnection;
use cmap_core::{Address, EstablishErrorKind, ServiceId};

use crate::connection::Connection;
use crate::error::{Error, Stage};
use crate::handshake::{hello, HandshakeTimeout, Limits};
use crate::manager::{Manager, Runtime};
use crate::settings::Settings;
use crate::transport::Transport;

/// An async runtime's networking, as a [`Manager`] needs it: implemented
/// for [`Tokio`](crate::Tokio) (feature `tokio`) and
/// [`AsyncIo`](crate::AsyncIo) (feature `smol`). Sealed.
pub trait Net: Runtime {
    /// A connected TCP socket.
    type Tcp: Send;
    /// What a connection runs on: the socket, or TLS over it.
    type Stream: Transport;

    /// The addresses `host` resolves to.
    fn resolve(host: &str, port: u16) -> impl Future<Output = io::Result<Vec<SocketAddr>>> + Send;
    /// A TCP connection to `addr`, with `TCP_NODELAY` (commands are small
    /// messages answered at once).
    fn connect(addr: SocketAddr) -> impl Future<Output = io::Result<Self::Tcp>> + Send;
    /// The socket as it is.
    fn plain(tcp: Self::Tcp) -> Self::Stream;
    /// The TLS handshake over the socket.
    fn tls(
        tcp: Self::Tcp,
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
    ) -> impl Future<Output = io::Result<Self::Stream>> + Send;
    /// `work`, unless `deadline` comes first (`None`).
    fn within<T: Send>(
        deadline: Instant,
        work: impl Future<Output = T> + Send,
    ) -> impl Future<Output = Option<T>> + Send;
}

impl<N: Net> Manager<N> {
    /// Opens one connection: TCP, TLS, `hello`, authentication, each
    /// bounded by what is left of `connectTimeoutMS` (under `timeoutMS`,
    /// the handshake's commands by `timeoutMS` each, as for `minPoolSize`).
    pub async fn open(&self) -> Result<Connection<N::Stream>, Error> {
        open::<N>(&self.settings, None).await
    }
}

impl<N: Net> ManageConnection for Manager<N> {
    type Connection = Connection<N::Stream>;
    type Error = Error;
    /// MongoDB connections carry no state between commands to undo.
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Connection<N::Stream>, Error>> + Send {
        self.open()
    }

    /// Under `timeoutMS`, a connection a checkout needs is bounded by what
    /// is left of it: TCP and TLS by `min(connectTimeoutMS, left)`, each
    /// handshake command by what is left (with `maxTimeMS`); one for no
    /// checkout (`None`) bounds each handshake command by `timeoutMS`.
    /// Without `timeoutMS`, `deadline` is ignored.
    fn connect_until(
        &self,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Connection<N::Stream>, Error>> + Send {
        open::<N>(&self.settings, deadline)
    }

    /// [`Error::establish_kind`].
    fn classify(&self, error: &Error) -> EstablishErrorKind {
        error.establish_kind()
    }

    /// A connection whose socket the server closed is refused without a
    /// round trip; with
    /// [`validate_idle_after`](Manager::validate_idle_after), one idle
    /// that long is sent a `ping`.
    fn check(&self, conn: &mut Connection<N::Stream>) -> impl Future<Output = Result<(), Error>> + Send {
        self.settings.check(conn)
    }

    fn is_broken(&self, conn: &mut Connection<N::Stream>) -> bool {
        conn.is_broken()
    }

    fn address(&self) -> Option<Address> {
        Some(Manager::address(self))
    }

    fn service_id(&self, conn: &Connection<N::Stream>) -> Option<ServiceId> {
        conn.service_id()
    }
}

/// Opens one connection on the runtime `N`, for a checkout due by
/// `checkout` (see [`Limits`]).
async fn open<N: Net>(
    settings: &Settings,
    checkout: Option<Instant>,
) -> Result<Connection<N::Stream>, Error> {
    let limits = Limits::new(&settings.options, checkout, Instant::now());
    let limit = limits.socket;
    let tcp = bounded::<N, _>(limit, Stage::Connect, connect::<N>(settings)).await?;
    let stream = match &settings.tls {
        None => N::plain(tcp),
        Some((config, name)) => {
            let handshake = async {
                N::tls(tcp, config.clone(), name.clone())
                    .await
                    .map_err(|e| match crate::tls::refusal(&e) {
                        Some(refused) => Error::Tls(refused),
                        None => Error::Network {
                            during: Stage::Tls,
                            source: e,
                        },
                    })
            };
            bounded::<N, _>(limit, Stage::Tls, handshake).await?
        }
    };
    let mut conn = Connection::new(stream, settings.address().clone());
    conn.handshake_timeout = limits.commands;
    let limit = limits.handshake;
    let auth = settings.authenticator()?;
    let reply = bounded::<N, _>(
        limit,
        Stage::Hello,
        hello(&mut conn, &settings.options, &settings.metadata, auth.as_ref()),
    )
    .await?;
    if let Some(auth) = auth {
        bounded::<N, _>(limit, Stage::Authentication, auth.authenticate(&mut conn, &reply)).await?;
    }
    conn.handshake_timeout = HandshakeTimeout::None;
    Ok(conn)
}

/// `work` bounded by the connect deadline, if there is one.
async fn bounded<N: Net, T: Send>(
    limit: Option<(Instant, Duration)>,
    during: Stage,
    work: impl Future<Output = Result<T, Error>> + Send,
) -> Result<T, Error> {
    match limit {
        None => work.await,
        Some((deadline, after)) => N::within(deadline, work)
            .await
            .unwrap_or(Err(Error::Timeout { during, after })),
    }
}

/// Resolves the host, then tries its addresses in turn.
async fn connect<N: Net>(settings: &Settings) -> Result<N::Tcp, Error> {
    let address = settings.address();
    let host = address.host().trim_start_matches('[').trim_end_matches(']');
    let port = address.port().unwrap_or(cmap_core::DEFAULT_PORT);
    let resolved = N::resolve(host, port).await.map_err(|source| Error::Dns {
        host: host.to_owned(),
        source,
    })?;
    let mut last = None;
    for addr in resolved {
        match N::connect(addr).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::Network {
        during: Stage::Connect,
        source: last
            .unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the host resolved to no address")),
    })
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;
    use crate::options::MongoOptions;
    use crate::test_server::{closed_port, load_balancer, mongod, serve, silent};

    fn new_manager<N: Net>(uri: &str) -> Manager<N> {
        Manager::<N>::new(uri).unwrap()
    }

    /// What every async runtime must do the same, against a server on a
    /// loopback port.
    async fn scenarios<N: Net>() {
        let server = serve(mongod);
        let uri = format!("mongodb://app:secret@{server}/shop");
        let manager = new_manager::<N>(&uri).validate_idle_after(Duration::ZERO);
        // TCP, the hello and SCRAM: a connection ready for commands.
        let mut conn = ManageConnection::connect(&manager).await.unwrap();
        assert_eq!(conn.server().max_wire_version, 25);
        assert_eq!(conn.address().port(), Some(server.port()));
        assert!(!ManageConnection::is_broken(&manager, &mut conn));
        ManageConnection::check(&manager, &mut conn).await.unwrap();
        let reply = conn.run_command("shop", &doc! { "ping": 1 }).await.unwrap();
        assert_eq!(reply, doc! { "ok": 1.0 });
        assert_eq!(ManageConnection::service_id(&manager, &conn), None);
        assert_eq!(
            ManageConnection::address(&manager),
            Some(Address::new("127.0.0.1", server.port()))
        );
        // The server hangs up: the command fails, the connection is broken.
        let err = conn
            .run_command("admin", &doc! { "hangUp": 1 })
            .await
            .unwrap_err();
        assert!(err.is_network(), "{err:?}");
        assert!(ManageConnection::is_broken(&manager, &mut conn));

        // In load-balanced mode the reply's serviceId is the connection's.
        let oid = bson::oid::ObjectId::new();
        let lb = new_manager::<N>(&format!("mongodb://{}/?loadBalanced=true", load_balancer(oid)));
        let conn = lb.open().await.unwrap();
        assert_eq!(
            ManageConnection::service_id(&lb, &conn),
            Some(ServiceId(oid.bytes()))
        );

        // A wrong password is an authentication failure.
        let wrong = new_manager::<N>(&format!("mongodb://app:wrong@{server}/shop"));
        let err = wrong.open().await.unwrap_err();
        assert_eq!(
            ManageConnection::classify(&wrong, &err),
            EstablishErrorKind::Authentication,
            "{err}"
        );
        assert_eq!(err.command_error().map(|e| e.code), Some(18), "{err}");

        // Nobody listening: a network error while connecting.
        let refused = new_manager::<N>(&format!("mongodb://{}/", closed_port()));
        let err = refused.open().await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Network {
                    during: Stage::Connect,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(err.establish_kind(), EstablishErrorKind::Network);

        // A server that does not answer the hello in time: connectTimeoutMS.
        let slow = new_manager::<N>(&format!("mongodb://{}/?connectTimeoutMS=200", silent()));
        let started = Instant::now();
        let err = slow.open().await.unwrap_err();
        assert!(
            matches!(err, Error::Timeout { during: Stage::Hello, after } if after == Duration::from_millis(200)),
            "{err:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn the_limits_are_connect_timeout_ms_unless_timeout_ms_says_otherwise() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let limits = |uri: &str, checkout_ms: Option<u64>| {
            Limits::new(
                &MongoOptions::parse(uri).unwrap(),
                checkout_ms.map(|t| now + ms(t)),
                now,
            )
        };
        let connect = Some((now + ms(1000), ms(1000)));
        // Without timeoutMS, connectTimeoutMS over all of it, checkout or not.
        let before = Limits {
            socket: connect,
            handshake: connect,
            commands: HandshakeTimeout::None,
        };
        let uri = "mongodb://db/?connectTimeoutMS=1000";
        assert_eq!(limits(uri, Some(300)), before);
        assert_eq!(limits(uri, None), before);
        // A checkout: min(connectTimeoutMS, what is left) for the socket,
        // what is left for each handshake command.
        let uri = "mongodb://db/?connectTimeoutMS=1000&timeoutMS=5000";
        let short = limits(uri, Some(300));
        assert_eq!(short.socket, Some((now + ms(300), ms(300))));
        assert_eq!(
            (short.handshake, short.commands),
            (None, HandshakeTimeout::Until(now + ms(300)))
        );
        assert_eq!(
            limits(uri, Some(4000)).socket,
            connect,
            "connectTimeoutMS is shorter"
        );
        // minPoolSize: connectTimeoutMS, then timeoutMS per command.
        let background = limits(uri, None);
        assert_eq!(background.socket, connect);
        assert_eq!(
            (background.handshake, background.commands),
            (None, HandshakeTimeout::Each(ms(5000)))
        );
        // connectTimeoutMS=0 (no limit): what is left alone.
        let unbounded = limits("mongodb://db/?connectTimeoutMS=0&timeoutMS=5000", Some(300));
        assert_eq!(unbounded.socket, Some((now + ms(300), ms(300))));
    }

    #[cfg(feature = "tokio")]
    #[test]
    fn the_tokio_manager_opens_connections_and_names_what_fails() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(scenarios::<crate::Tokio>());
    }

    #[cfg(feature = "smol")]
    #[test]
    fn the_async_io_manager_opens_connections_and_names_what_fails() {
        smol::block_on(scenarios::<crate::AsyncIo>());
    }
}
