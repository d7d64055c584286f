//! The connection manager of the tokio examples: TCP connections to the
//! echo server each example starts (`cmap_testkit::echo`). A driver's
//! `connect` would also do its handshake and authentication here.

use std::future::Future;
use std::net::SocketAddr;

use cmap_tokio::{EstablishErrorKind, ManageConnection};
use tokio::net::TcpStream;

/// Connections to the echo server at `addr`.
pub struct Echo {
    pub addr: SocketAddr,
}

impl ManageConnection for Echo {
    type Connection = TcpStream;
    type Error = std::io::Error;
    fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(e)
    }

    fn connect(&self) -> impl Future<Output = Result<TcpStream, std::io::Error>> + Send {
        TcpStream::connect(self.addr)
    }
}
