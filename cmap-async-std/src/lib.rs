//! # cmap-async-std
//!
//! The [`cmap_core`] connection pool on the async-io stack: the same crate
//! works under async-std and under smol (async-std is discontinued
//! upstream in favour of smol). It is only a [`Runtime`] (spawn and
//! sleep); everything else is [`cmap_async`], re-exported here, with
//! [`Pool`] and [`PoolBuilder`] fixed to [`AsyncStdRuntime`]. Compared
//! with `cmap-tokio`, only the crate name changes.
//!
//! ```
//! use std::future::Future;
//! use cmap_async_std::{ManageConnection, Pool};
//!
//! /// Connections to a TCP server (smol's `TcpStream`; async-std's works too).
//! struct Tcp(std::net::SocketAddr);
//!
//! impl ManageConnection for Tcp {
//!     type Connection = smol::net::TcpStream;
//!     type Error = std::io::Error;
//!     fn classify(&self, e: &std::io::Error) -> cmap_async_std::EstablishErrorKind { cmap_async_std::EstablishErrorKind::of_io(e) }
//!     fn connect(&self) -> impl Future<Output = Result<Self::Connection, Self::Error>> + Send {
//!         smol::net::TcpStream::connect(self.0)
//!     }
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Or `async_std::task::block_on`: the pool is the same.
//!     smol::block_on(async {
//!         let server = smol::net::TcpListener::bind("127.0.0.1:0").await?;
//!         let addr = server.local_addr()?;
//!         smol::spawn(async move { while let Ok(_socket) = server.accept().await {} }).detach();
//!
//!         let pool = Pool::builder().address(addr).max_pool_size(4).build(Tcp(addr))?;
//!         let conn = pool.get().await?; // a smol::net::TcpStream, pooled
//!         println!("local address {}", conn.local_addr()?);
//!         drop(conn); // back to the pool
//!         assert_eq!(pool.status().available, 1);
//!         pool.close();
//!         Ok(())
//!     })
//! }
//! ```
//!
//! `docs/guide.md` in the repository is the user guide.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::future::Future;
use std::time::Instant;

pub use cmap_async::*;

/// Runs a future to completion on the current thread, driving the async-io
/// reactor meanwhile: `async_io::block_on`, which `smol::block_on` is, and
/// which works for a program on async-std too. Use it where a synchronous
/// function must wait for the pool (`block_on(pool.get())`).
///
/// ```
/// # use cmap_async_std::{ManageConnection, Pool};
/// # struct Numbers;
/// # impl ManageConnection for Numbers {
/// #     type Connection = u64;
/// #     type Error = std::io::Error;
/// #     fn classify(&self, e: &std::io::Error) -> cmap_async_std::EstablishErrorKind { cmap_async_std::EstablishErrorKind::of_io(e) }
/// #     fn connect(&self) -> impl std::future::Future<Output = Result<u64, std::io::Error>> + Send {
/// #         async { Ok(7) }
/// #     }
/// # }
/// let pool = Pool::builder().address("db:1").build(Numbers).unwrap();
/// let conn = cmap_async_std::block_on(pool.get()).unwrap();
/// assert_eq!(*conn, 7);
/// ```
pub use async_io::block_on;

/// The async-io runtime, as the pool uses it, for async-std and smol
/// alike:
///
/// - **spawn**: [`async_global_executor::spawn`], detached. It is the
///   executor `async_std::task::spawn` itself uses (the same crate and
///   major version, so under async-std the pool's tasks run where the
///   application's do), and it starts its own threads on first use, so it
///   runs whichever `block_on` drives the caller: `smol::block_on`,
///   `async_std::task::block_on`, [`block_on`], or none. `smol::spawn` was
///   the other candidate; its global executor is single-threaded unless
///   `SMOL_THREADS` says otherwise, and smol documents it as a convenience
///   for tests and small programs.
/// - **sleep**: [`async_io::Timer`], the timer both async-std and smol use;
///   the async-io reactor fires it whether or not a thread is inside a
///   `block_on`.
/// - **clock**: [`Instant::now`], the clock `Timer` sleeps on, and its
///   coarse copy for the cheap reads ([`system_coarse_now`]).
///
/// It holds nothing, so any value works from any thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct AsyncStdRuntime;

impl Runtime for AsyncStdRuntime {
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        // Detached: the pool's tasks clean up after themselves if dropped.
        async_global_executor::spawn(future).detach();
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        let timer = async_io::Timer::at(deadline);
        async move {
            timer.await;
        }
    }

    // Read on every input, from the pool's generic code in another
    // crate: inlined there, a call's prologue is most of its cost.
    #[inline]
    fn now_coarse(&self) -> CoarseNow {
        system_coarse_now()
    }
}

/// A pool on async-std or smol: `cmap_async_std::Pool::builder()...build(manager)`.
pub type Pool<M> = cmap_async::Pool<M, AsyncStdRuntime>;

/// The builder of a [`Pool`] on async-std or smol.
pub type PoolBuilder<M> = cmap_async::PoolBuilder<M, AsyncStdRuntime>;
