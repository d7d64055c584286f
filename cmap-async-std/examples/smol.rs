//! The pool under smol, with no database: real TCP connections to an echo
//! server that the example starts itself. The same code runs under
//! async-std (`async_std::task::block_on`, `async_std::task::spawn`).
//!
//! ```text
//! cargo run -p cmap-async-std --example smol
//! ```
//!
//! The echo server and the printing are shared with the other adapters'
//! examples (`cmap_testkit::echo`); what is left here is what differs
//! between runtimes: the manager and the client tasks.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use cmap_async_std::{ManageConnection, Pool};
use cmap_testkit::echo::{echo_server, report, show};
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::net::TcpStream;

/// Connections to the echo server. A driver's `connect` would also do its
/// handshake and authentication here.
struct Echo {
    addr: SocketAddr,
}

impl ManageConnection for Echo {
    type Connection = TcpStream;
    type Error = std::io::Error;
    fn classify(&self, e: &std::io::Error) -> cmap_async_std::EstablishErrorKind {
        cmap_async_std::EstablishErrorKind::of_io(e)
    }

    fn connect(&self) -> impl Future<Output = Result<TcpStream, std::io::Error>> + Send {
        TcpStream::connect(self.addr)
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    smol::block_on(async {
        let addr = echo_server()?;
        println!("echo server on {addr}");

        let pool = Pool::builder()
            .address(addr)
            .max_pool_size(3)
            .wait_queue_timeout(Duration::from_secs(2))
            .on_event(show)
            .build(Echo { addr })?;

        // Six tasks share three connections.
        let mut tasks = Vec::new();
        for task in 0..6 {
            let pool = pool.clone();
            tasks.push(smol::spawn(async move {
                for round in 0..2 {
                    let mut conn = pool.get().await?;
                    let message = format!("hello from task {task}, round {round}\n");
                    conn.write_all(message.as_bytes()).await?;
                    let mut echoed = vec![0; message.len()];
                    conn.read_exact(&mut echoed).await?;
                    assert_eq!(echoed, message.as_bytes());
                    smol::Timer::after(Duration::from_millis(10)).await;
                    // `conn` is checked in here.
                }
                Ok::<_, BoxError>(())
            }));
        }
        for task in tasks {
            task.await?;
        }

        report(&pool.status(), &pool.stats());
        pool.close();
        Ok(())
    })
}
