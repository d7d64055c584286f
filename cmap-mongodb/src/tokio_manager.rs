//! The async manager, for `cmap_tokio::Pool`: tokio's sockets, rustls.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use cmap_core::{Address, EstablishErrorKind, ServiceId};
use cmap_tokio::ManageConnection;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::connection::Connection;
use crate::error::{Error, Stage};
use crate::handshake::hello;
use crate::metadata::DriverInfo;
use crate::options::{MongoOptions, OptionsError};
use crate::settings::Settings;
use crate::transport::TokioStream;

/// A pooled connection of a [`MongoManager`]: run commands on it with
/// [`run_command`](Connection::run_command).
pub type MongoConnection = Connection<TokioStream>;

/// Opens and looks after MongoDB connections for a `cmap_tokio::Pool`:
/// TCP, TLS, the `hello` and SCRAM authentication, as the connection
/// string says.
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
pub struct MongoManager {
    settings: Settings,
}

impl fmt::Debug for MongoManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MongoManager")
            .field("options", &self.settings.options)
            .field("validate_idle_after", &self.settings.validate_idle_after)
            .finish_non_exhaustive()
    }
}

impl MongoManager {
    /// A manager for the server of a `mongodb://` connection string. Its
    /// pool options (`maxPoolSize`, ...) are the pool builder's: give it
    /// the same string with `connection_string`.
    ///
    /// # Errors
    ///
    /// A string that is not one, or that asks for what this manager does
    /// not do, naming the option ([`OptionsError`]); an unreadable
    /// `tlsCAFile`.
    pub fn new(uri: &str) -> Result<MongoManager, OptionsError> {
        MongoManager::from_options(MongoOptions::parse(uri)?)
    }

    /// A manager with options built by hand.
    ///
    /// # Errors
    ///
    /// As [`new`](MongoManager::new).
    pub fn from_options(options: MongoOptions) -> Result<MongoManager, OptionsError> {
        Ok(MongoManager {
            settings: Settings::new(options, "tokio")?,
        })
    }

    /// The server's address: the connection string's host.
    pub fn address(&self) -> Address {
        self.settings.address().clone()
    }

    /// The options it connects with.
    pub fn options(&self) -> &MongoOptions {
        &self.settings.options
    }

    /// Sends a `ping` before handing out a connection that has been idle
    /// at least `idle` (default: never; `Duration::ZERO`: on every
    /// checkout). One that fails it is closed and the checkout takes
    /// another.
    pub fn validate_idle_after(mut self, idle: Duration) -> Self {
        self.settings.validate_idle_after = Some(idle);
        self
    }

    /// Adds a wrapping library to the handshake's driver name, version
    /// and platform (the handshake specification's `DriverInfoOptions`).
    pub fn driver_info(mut self, info: DriverInfo) -> Self {
        self.settings.add_driver_info(info);
        self
    }

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

impl ManageConnection for MongoManager {
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
        Some(MongoManager::address(self))
    }

    fn service_id(&self, conn: &MongoConnection) -> Option<ServiceId> {
        conn.service_id()
    }
}
