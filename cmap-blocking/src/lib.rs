//! # cmap-blocking
//!
//! The [`cmap_core`] connection pool for code with no async runtime, on OS
//! threads, written directly on the driver layer
//! ([`cmap_async::driver`]): a `Mutex` around the core, a `get()` that
//! parks its thread until its slot is filled, a timer thread per pool
//! parked until the core's next deadline, connects on threads of their
//! own. No async runtime and no executor.
//!
//! - [`Pool`] — built with [`Pool::builder`]; [`Pool::get`] blocks the
//!   calling thread at most the wait-queue timeout and returns a
//!   [`PooledConnection`] guard that derefs to the connection and checks
//!   it in on drop; [`Pool::ready`], [`Pool::clear`], [`Pool::close`],
//!   [`Pool::status`], [`Pool::stats`], events through [`Pool::on_event`]
//!   or the [`Events`] iterator, and the spec's log messages through
//!   `tracing` (target [`LOG_TARGET`]).
//! - [`ManageConnection`] — a synchronous manager: `connect` (run on a
//!   thread of its own, never the caller's and never under the pool's
//!   lock), and optional `check`, `reset`, `is_broken`.
//! - Forks (Unix): a pool used in a forked child resets itself on its
//!   first checkout there (spec: "Forking"), noticed without a system
//!   call per checkout.
//!
//! Compared with `cmap-tokio`, `get()` loses its `.await`:
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::{SocketAddr, TcpListener, TcpStream};
//! use cmap_blocking::{ManageConnection, Pool};
//!
//! /// Connections to a TCP server.
//! struct Tcp(SocketAddr);
//!
//! impl ManageConnection for Tcp {
//!     type Connection = TcpStream;
//!     type Error = std::io::Error;
//!     fn classify(&self, e: &std::io::Error) -> cmap_blocking::EstablishErrorKind { cmap_blocking::EstablishErrorKind::of_io(e) }
//!     fn connect(&self) -> Result<TcpStream, std::io::Error> {
//!         TcpStream::connect(self.0)
//!     }
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let server = TcpListener::bind("127.0.0.1:0")?;
//!     let addr = server.local_addr()?;
//!     std::thread::spawn(move || for _socket in server.incoming() {});
//!
//!     let pool = Pool::builder().address(addr).max_pool_size(4).build(Tcp(addr))?;
//!     let conn = pool.get()?; // a std::net::TcpStream, pooled
//!     println!("local address {}", conn.local_addr()?);
//!     drop(conn); // back to the pool
//!     assert_eq!(pool.status().available, 1);
//!     pool.close();
//!     Ok(())
//! }
//! ```
//!
//! `docs/guide.md` in the repository is the user guide.
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod builder;
#[cfg(feature = "r2d2")]
pub mod compat;
mod events;
#[allow(unsafe_code)]
mod fork;
mod guard;
mod manager;
mod pool;
mod shared;

pub use builder::PoolBuilder;
pub use events::Events;
pub use guard::PooledConnection;
pub use manager::ManageConnection;
pub use pool::Pool;

pub use cmap_async;
pub use cmap_async::cmap_core;
pub use cmap_async::{
    default_reconnect, BuildError, ConnectTimeoutError, EstablishDroppedError, GetError, Hook, IdleCheck,
    Interrupted, NotReadyError, Panicked, Subscription, ToAddress, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_RESET_TIMEOUT, DEFAULT_WAIT_QUEUE_TIMEOUT, LOG_TARGET,
};
pub use cmap_async::{
    AdaptiveConnecting, Address, CheckOutError, CheckOutFailedReason, Clear, ClearCause, ClosedReason,
    ConnectionId, ConnectionString, ConnectionStringError, EstablishError, EstablishErrorKind,
    EstablishFailure, Event, InterruptedError, OptionsError, PoolOptions, PoolOptionsBuilder, PoolState,
    Reconnect, ServiceId, SharedError, Stats, Status, TimeoutContext, UnknownOption, UsageError,
};
