//! The async manager on the async-io stack, for `cmap_async_std::Pool`
//! under smol or async-std: smol's sockets and resolver, rustls over
//! futures-io, async-io's timer.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use async_net::TcpStream;
use rustls::pki_types::ServerName;

use crate::async_open::Net;
use crate::connection::Connection;
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
