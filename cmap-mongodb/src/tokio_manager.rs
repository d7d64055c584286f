//! The async manager, for `cmap_tokio::Pool`: tokio's sockets, rustls.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use crate::async_open::Net;
use crate::connection::Connection;
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
