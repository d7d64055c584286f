//! The pool with no async runtime at all: threads share real TCP
//! connections to an echo server that the example starts itself.
//!
//! ```text
//! cargo run -p cmap-blocking --example blocking
//! ```
//!
//! The echo server and the printing are shared with the other adapters'
//! examples (`cmap_testkit::echo`); what is left here is what differs:
//! a synchronous manager, and threads instead of tasks.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use cmap_blocking::{ManageConnection, Pool};
use cmap_testkit::echo::{echo_server, report, show};

/// Connections to the echo server. A driver's `connect` would also do its
/// handshake and authentication here; it runs on a thread of its own.
struct Echo {
    addr: SocketAddr,
}

impl ManageConnection for Echo {
    type Connection = TcpStream;
    type Error = std::io::Error;
    fn classify(&self, e: &std::io::Error) -> cmap_blocking::EstablishErrorKind {
        cmap_blocking::EstablishErrorKind::of_io(e)
    }

    fn connect(&self) -> Result<TcpStream, std::io::Error> {
        TcpStream::connect_timeout(&self.addr, Duration::from_secs(2))
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let addr = echo_server()?;
    println!("echo server on {addr}");

    let pool = Pool::builder()
        .address(addr)
        .max_pool_size(3)
        .wait_queue_timeout(Duration::from_secs(2))
        .on_event(show)
        .build(Echo { addr })?;

    // Six threads share three connections.
    let threads: Vec<_> = (0..6)
        .map(|n| {
            let pool = pool.clone();
            thread::spawn(move || -> Result<(), BoxError> {
                for round in 0..2 {
                    let mut conn = pool.get()?; // blocks at most 2 s
                    let message = format!("hello from thread {n}, round {round}\n");
                    conn.write_all(message.as_bytes())?;
                    let mut echoed = vec![0; message.len()];
                    conn.read_exact(&mut echoed)?;
                    assert_eq!(echoed, message.as_bytes());
                    thread::sleep(Duration::from_millis(10));
                    // `conn` is checked in here.
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no thread panicked")?;
    }

    report(&pool.status(), &pool.stats());
    pool.close();
    Ok(())
}
