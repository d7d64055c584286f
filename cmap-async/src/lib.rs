//! # cmap-async
//!
//! The async driver of the [`cmap_core`] connection pool, written once for
//! every runtime. An adapter crate adds only a [`Runtime`] (how to spawn,
//! how to sleep, which clock to read) and re-exports this crate: `cmap-tokio`, `cmap-async-std`
//! (async-std and smol) and `cmap-blocking` (OS threads, behind a
//! synchronous facade) are the three.
//!
//! - [`Pool`] — built with [`Pool::builder`]; [`Pool::get`] returns a
//!   [`PooledConnection`] guard that derefs to the connection and checks it
//!   in on drop; [`Pool::ready`], [`Pool::clear`], [`Pool::close`],
//!   [`Pool::status`], [`Pool::stats`], and events through
//!   [`Pool::on_event`] or [`Pool::events`].
//! - [`ManageConnection`] — how to connect, and optional hooks to check a
//!   connection on checkout, reset it on return and tell a broken one.
//! - Logs — the spec's "Connection Pool Logging" messages through
//!   `tracing` at DEBUG, target [`LOG_TARGET`] (`cmap::connection`).
//! - Leak detection — [`PoolBuilder::leak_detection_threshold`]: a guard
//!   held too long is reported at WARN with where its `get()` was called.
//! - Metrics — with the cargo feature `metrics`, `PoolBuilder::metrics(true)`
//!   exports gauges, counters and histograms through the `metrics` facade
//!   (names in the guide, section 7).
//!
//! ## How the core is driven
//!
//! The core sits behind one mutex. Every input (a checkout, a guard
//! dropped, a connect that finished, the timer) locks it, calls one
//! `handle_*`, drains every output under the lock into a small local list,
//! unlocks, and only then does the work: spawn connects, close
//! connections, deliver events, and last wake the checkouts served or
//! failed (so a checkout returns after its events and log messages are
//! out, as the spec emits them first). Nothing slow, nothing of the
//! user's and no await ever runs under the lock.
//! One background task per pool sleeps until the core's next deadline.
//!
//! ## Cancellation safety
//!
//! Dropping a `get()` future at any point loses nothing: still queued, its
//! checkout is withdrawn; already served, its connection is checked back
//! in; a connection being established for it goes to the next checkout.
//!
//! ## Example
//!
//! Generic over the runtime (see `cmap-tokio` for runnable examples):
//!
//! ```
//! use std::future::Future;
//! use cmap_async::{GetError, ManageConnection, Pool, Runtime};
//!
//! struct Numbers;
//!
//! impl ManageConnection for Numbers {
//!     type Connection = u64;
//!     type Error = std::io::Error;
//!     fn connect(&self) -> impl Future<Output = Result<u64, std::io::Error>> + Send {
//!         async { Ok(42) }
//!     }
//!     fn classify(&self, error: &std::io::Error) -> cmap_async::EstablishErrorKind {
//!         cmap_async::EstablishErrorKind::of_io(error)
//!     }
//! }
//!
//! async fn run<R: Runtime + Default>() -> Result<(), Box<dyn std::error::Error>> {
//!     let pool: Pool<Numbers, R> = Pool::builder()
//!         .address("localhost:27017")
//!         .max_pool_size(4)
//!         .build(Numbers)?;
//!     let conn = pool.get().await?;
//!     assert_eq!(*conn, 42);
//!     drop(conn);
//!     println!("{:?}", pool.status());
//!     Ok(())
//! }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod abort;
mod builder;
mod checkout;
mod clock;
pub mod compat;
pub mod driver;
mod error;
mod establish;
mod events;
#[cfg(feature = "metrics")]
mod export;
#[cfg(feature = "recorder")]
mod flight;
mod guard;
mod id_map;
mod interrupt;
mod leak;
mod logging;
mod manager;
mod panics;
mod pool;
mod readiness;
mod runtime;
mod setters;
mod shared;
mod slot;
mod spare_slots;
mod sync;
mod timer;
mod under_lock;
mod util;

#[cfg(all(test, loom))]
mod loom_tests;

pub use builder::{
    default_reconnect, PoolBuilder, ToAddress, DEFAULT_CONNECT_TIMEOUT, DEFAULT_RESET_TIMEOUT,
    DEFAULT_WAIT_QUEUE_TIMEOUT,
};
pub use clock::{system_coarse_now, CoarseNow};
pub use error::{BuildError, ConnectTimeoutError, EstablishDroppedError, GetError};
pub use events::{EventStream, Subscription};
pub use guard::PooledConnection;
pub use interrupt::Interrupted;
pub use logging::{log_enabled, log_event, LOG_TARGET};
pub use manager::ManageConnection;
pub use panics::{Hook, Panicked};
pub use pool::Pool;
pub use readiness::{IdleCheck, NotReadyError};
pub use runtime::Runtime;

pub use cmap_core;
// For the builder setters' macro, expanded in other crates.
pub use cmap_core::{
    AdaptiveConnecting, Address, CheckOutError, CheckOutFailedReason, Clear, ClearCause, ClosedReason,
    ConnectionId, ConnectionString, ConnectionStringError, EstablishError, EstablishErrorKind,
    EstablishFailure, Event, InterruptedError, OptionsError, PoolOptions, PoolOptionsBuilder, PoolState,
    Reconnect, ServiceId, SharedError, Stats, Status, TimeoutContext, UnknownOption, UsageError,
};
#[cfg(feature = "recorder")]
pub use cmap_core::{Recording, RecordingError, Replay, ReplayError, Seconds, Step};
#[cfg(feature = "recorder")]
pub use flight::report_incident;
