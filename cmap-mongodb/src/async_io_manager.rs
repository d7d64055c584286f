//! The async manager on the async-io stack, for `cmap_async_std::Pool`
//! under smol or async-std: smol's sockets and resolver, rustls over
//! futures-io, async-io's timer.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use async_net::TcpStream;
use cmap_async_std::ManageConnection;
use cmap_core::{Address, EstablishErrorKind, ServiceId};
use rustls::pki_types::ServerName;

use crate::async_open::Net;
use crate::connection::Connection;
use crate::error::Error;
use crate::manager::{AsyncIo, Manager};
use crate::transport::AsyncIoStream;

/// A pooled connection of an [`AsyncIoManager`].
pub type AsyncIoConnection = Connection<AsyncIoStream>;

/// The manager of a `cmap_async_std::Pool` (smol or async-std): see
/// [`Manager`] for its options.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # smol::block_on(async {
/// use cmap_mongodb::{bson::doc, AsyncIoManager};
///
/// let uri = "mongodb://127.0.0.1:27017/?maxPoolSize=10";
/// let pool = cmap_async_std::Pool::builder().connection_string(uri).build(AsyncIoManager::new(uri)?)?;
/// let mut conn = pool.get().await?;
/// conn.run_command("admin", &doc! { "ping": 1 }).await?;
/// # Ok(())
/// # })
/// # }
/// ```
pub type AsyncIoManager = Manager<AsyncIo>;

impl Manager<AsyncIo> {
    /// Opens one connection: TCP, TLS, `hello`, authentication, each
    /// bounded by what is left of `connectTimeoutMS`.
    pub async fn open(&self) -> Result<AsyncIoConnection, Error> {
        crate::async_open::open::<AsyncIo>(&self.settings).await
    }
}

impl Net for AsyncIo {
    type Tcp = TcpStream;
    type Stream = AsyncIoStream;

    async fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        async_net::resolve((host, port)).await
    }

    async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        Ok(tcp)
    }

    fn plain(tcp: TcpStream) -> AsyncIoStream {
        AsyncIoStream::Plain(tcp)
    }

    async fn tls(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
    ) -> io::Result<AsyncIoStream> {
        let tls = futures_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await?;
        Ok(AsyncIoStream::Tls(Box::new(tls)))
    }

    async fn within<T: Send>(deadline: Instant, work: impl Future<Output = T> + Send) -> Option<T> {
        let work = async { Some(work.await) };
        let timer = async {
            async_io::Timer::at(deadline).await;
            None
        };
        futures_lite::future::or(work, timer).await
    }
}

impl ManageConnection for Manager<AsyncIo> {
    type Connection = AsyncIoConnection;
    type Error = Error;
    /// MongoDB connections carry no state between commands to undo.
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<AsyncIoConnection, Error>> + Send {
        self.open()
    }

    /// [`Error::establish_kind`].
    fn classify(&self, error: &Error) -> EstablishErrorKind {
        error.establish_kind()
    }

    /// As the tokio manager's check.
    fn check(&self, conn: &mut AsyncIoConnection) -> impl Future<Output = Result<(), Error>> + Send {
        self.settings.check(conn)
    }

    fn is_broken(&self, conn: &mut AsyncIoConnection) -> bool {
        conn.is_broken()
    }

    fn address(&self) -> Option<Address> {
        Some(Manager::address(self))
    }

    fn service_id(&self, conn: &AsyncIoConnection) -> Option<ServiceId> {
        conn.service_id()
    }
}
