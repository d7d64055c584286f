//! # cmap-tokio
//!
//! The [`cmap_core`] connection pool on tokio. This crate is only the
//! tokio [`Runtime`] (spawn and sleep); everything else is
//! [`cmap_async`], re-exported here, with [`Pool`] and [`PoolBuilder`]
//! fixed to tokio.
//!
//! ```
//! use std::future::Future;
//! use cmap_tokio::{ManageConnection, Pool};
//!
//! /// Connections to a TCP server.
//! struct Tcp(std::net::SocketAddr);
//!
//! impl ManageConnection for Tcp {
//!     type Connection = tokio::net::TcpStream;
//!     type Error = std::io::Error;
//!     fn classify(&self, e: &std::io::Error) -> cmap_tokio::EstablishErrorKind { cmap_tokio::EstablishErrorKind::of_io(e) }
//!     fn connect(&self) -> impl Future<Output = Result<Self::Connection, Self::Error>> + Send {
//!         tokio::net::TcpStream::connect(self.0)
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let server = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = server.local_addr()?;
//!     tokio::spawn(async move { while let Ok(_socket) = server.accept().await {} });
//!
//!     let pool = Pool::builder().address(addr).max_pool_size(4).build(Tcp(addr))?;
//!     let conn = pool.get().await?; // a tokio::net::TcpStream, pooled
//!     println!("local address {}", conn.local_addr()?);
//!     drop(conn); // back to the pool
//!     assert_eq!(pool.status().available, 1);
//!     pool.close();
//!     Ok(())
//! }
//! ```
//!
//! `docs/guide.md` in the repository is the user guide.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::future::Future;
use std::time::Instant;

pub use cmap_async::*;
use tokio::runtime::{Handle, RuntimeFlavor};

/// The tokio runtime, as the pool uses it: tasks are spawned on a
/// [`Handle`], so guards may be dropped and pools used from any thread, and
/// the clock is tokio's, so tests with `tokio::time::pause` work.
///
/// On a multi-thread runtime, whose clock cannot be paused, the cheap
/// reads of the clock (`Runtime::now_coarse`) are the system's coarse
/// clock ([`system_coarse_now`]); on a current-thread runtime they stay
/// tokio's clock.
#[derive(Debug, Clone)]
pub struct TokioRuntime {
    handle: Handle,
    /// Whether tokio's clock may be paused here: only a current-thread
    /// runtime's can (`tokio::time::pause` panics on the others).
    pausable: bool,
}

impl TokioRuntime {
    /// The runtime behind `handle`.
    ///
    /// ```
    /// let rt = tokio::runtime::Runtime::new().unwrap();
    /// let _runtime = cmap_tokio::TokioRuntime::new(rt.handle().clone());
    /// ```
    pub fn new(handle: Handle) -> TokioRuntime {
        let pausable = !matches!(handle.runtime_flavor(), RuntimeFlavor::MultiThread);
        TokioRuntime { handle, pausable }
    }
}

/// The current runtime.
///
/// # Panics
///
/// Outside a tokio runtime (as [`Handle::current`] does): build the pool
/// inside one, or use `PoolBuilder::build_on` with [`TokioRuntime::new`].
impl Default for TokioRuntime {
    fn default() -> TokioRuntime {
        TokioRuntime::new(Handle::current())
    }
}

impl Runtime for TokioRuntime {
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        // Detached: the pool's tasks clean up after themselves if dropped.
        drop(self.handle.spawn(future));
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        tokio::time::sleep_until(deadline.into())
    }

    // Read on every input, from the pool's generic code in another
    // crate: inlined there, a call's prologue is most of its cost.
    #[inline]
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    // Read on every input, from the pool's generic code in another
    // crate: inlined there, a call's prologue is most of its cost.
    #[inline]
    fn now_coarse(&self) -> CoarseNow {
        if self.pausable {
            CoarseNow::exact(self.now())
        } else {
            system_coarse_now()
        }
    }
}

/// A pool on tokio: `cmap_tokio::Pool::builder()...build(manager)`.
pub type Pool<M> = cmap_async::Pool<M, TokioRuntime>;

/// The builder of a [`Pool`] on tokio.
pub type PoolBuilder<M> = cmap_async::PoolBuilder<M, TokioRuntime>;
