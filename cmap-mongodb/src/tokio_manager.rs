//! The async manager, for `cmap_tokio::Pool`: tokio's sockets, rustls.

use std::future::Future;
use std::time::Duration;

use cmap_core::{Address, EstablishErrorKind, ServiceId};
use cmap_tokio::ManageConnection;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::connection::Connection;
use crate::error::{Error, Stage};
use crate::handshake::hello;
use crate::manager::{Manager, Tokio};
use crate::transport::TokioStream;

/// A pooled connection of a [`MongoManager`]: run commands on it with
/// [`run_command`](Connection::run_command).
pub type MongoConnection = Connection<TokioStream>;

/// The manager of a `cmap_tokio::Pool`: see [`Manager`] for its options.
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cmap_mongodb::{bson::doc, MongoManager};
///
/// let uri = "mongodb://app:secret@127.0.0.1:27017/shop?maxPoolSize=10";
/// let pool = cmap_tokio::Pool::builder().connection_string(uri).build(MongoManager::new(uri)?)?;
/// let mut conn = pool.get().await?;
/// let reply = conn.run_command("shop", &doc! { "ping": 1 }).await?;
/// assert_eq!(reply.get_f64("ok")?, 1.0);
/// # Ok(())
/// # }
/// ```
pub type MongoManager = Manager<Tokio>;

impl Manager<Tokio> {
    /// Opens one connection: TCP, TLS, `hello`, authentication, each
    /// bounded by what is left of `connectTimeoutMS`.
    pub async fn open(&self) -> Result<MongoConnection, Error> {
        let settings = &self.settings;
        let limit = settings.options.connect_timeout.map(|t| (Instant::now() + t, t));
        let stream = bounded(limit, Stage::Connect, connect(settings.address())).await?;
        let stream = match &settings.tls {
            None => TokioStream::Plain(stream),
            Some((config, name)) => {
                let connector = tokio_rustls::TlsConnector::from(config.clone());
                let handshake = async {
                    connector
                        .connect(name.clone(), stream)
                        .await
                        .map_err(|e| match crate::tls::refusal(&e) {
                            Some(refused) => Error::Tls(refused),
                            None => Error::Network {
                                during: Stage::Tls,
                                source: e,
                            },
                        })
                };
                TokioStream::Tls(Box::new(bounded(limit, Stage::Tls, handshake).await?))
            }
        };
        let mut conn = Connection::new(stream, settings.address().clone());
        let auth = settings.authenticator()?;
        let reply = bounded(
            limit,
            Stage::Hello,
            hello(&mut conn, &settings.options, &settings.metadata, auth.as_ref()),
        )
        .await?;
        if let Some(auth) = auth {
            bounded(limit, Stage::Authentication, auth.authenticate(&mut conn, &reply)).await?;
        }
        Ok(conn)
    }
}

/// `work` bounded by the connect deadline, if there is one.
async fn bounded<T>(
    limit: Option<(Instant, Duration)>,
    during: Stage,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match limit {
        None => work.await,
        Some((deadline, after)) => tokio::time::timeout_at(deadline, work)
            .await
            .unwrap_or(Err(Error::Timeout { during, after })),
    }
}

/// Resolves the host, then tries its addresses in turn.
async fn connect(address: &Address) -> Result<TcpStream, Error> {
    let host = address.host().trim_start_matches('[').trim_end_matches(']');
    let port = address.port().unwrap_or(cmap_core::DEFAULT_PORT);
    let resolved = tokio::net::lookup_host((host, port))
        .await
        .map_err(|source| Error::Dns {
            host: host.to_owned(),
            source,
        })?;
    let mut last = None;
    for addr in resolved {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                // Commands are small messages answered at once.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(Error::Network {
        during: Stage::Connect,
        source: last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address")),
    })
}

impl ManageConnection for Manager<Tokio> {
    type Connection = MongoConnection;
    type Error = Error;
    /// MongoDB connections carry no state between commands to undo.
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<MongoConnection, Error>> + Send {
        self.open()
    }

    /// [`Error::establish_kind`].
    fn classify(&self, error: &Error) -> EstablishErrorKind {
        error.establish_kind()
    }

    /// A connection whose socket the server closed is refused without a
    /// round trip; with
    /// [`validate_idle_after`](MongoManager::validate_idle_after), one idle
    /// that long is sent a `ping`.
    fn check(&self, conn: &mut MongoConnection) -> impl Future<Output = Result<(), Error>> + Send {
        self.settings.check(conn)
    }

    fn is_broken(&self, conn: &mut MongoConnection) -> bool {
        conn.is_broken()
    }

    fn address(&self) -> Option<Address> {
        Some(Manager::address(self))
    }

    fn service_id(&self, conn: &MongoConnection) -> Option<ServiceId> {
        conn.service_id()
    }
}
