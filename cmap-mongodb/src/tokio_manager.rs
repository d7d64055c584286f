//! The async manager, for `cmap_tokio::Pool`: tokio's sockets, rustls.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use cmap_core::{Address, EstablishErrorKind, ServiceId};
use cmap_tokio::ManageConnection;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use crate::async_open::Net;
use crate::connection::Connection;
use crate::error::Error;
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
        crate::async_open::open::<Tokio>(&self.settings).await
    }
}

impl Net for Tokio {
    type Tcp = TcpStream;
    type Stream = TokioStream;

    async fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }

    async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        Ok(tcp)
    }

    fn plain(tcp: TcpStream) -> TokioStream {
        TokioStream::Plain(tcp)
    }

    async fn tls(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
    ) -> io::Result<TokioStream> {
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await?;
        Ok(TokioStream::Tls(Box::new(tls)))
    }

    async fn within<T: Send>(deadline: Instant, work: impl Future<Output = T> + Send) -> Option<T> {
        tokio::time::timeout_at(deadline.into(), work).await.ok()
    }
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
