//! # cmap-local
//!
//! The [`cmap_core`] connection pool for one thread: for thread-per-core
//! servers (one pool per core, nothing shared), tokio's current-thread
//! runtime with a `LocalSet`, and [compio](https://docs.rs/compio). No
//! lock, no atomic, no `Send` or `Sync` asked of the manager or its
//! connections: the pool is an `Rc`, its core sits in a `RefCell`, and
//! every task it spawns stays on the thread that built it.
//!
//! - [`Pool`] — built with [`Pool::builder`] (the settings and defaults of
//!   every adapter); [`Pool::get`] waits at most the wait-queue timeout and
//!   returns a [`PooledConnection`] guard that checks the connection in on
//!   drop; [`Pool::ready`], [`Pool::clear`], [`Pool::close`],
//!   [`Pool::status`], [`Pool::stats`], events with [`Pool::on_event`],
//!   the spec's log messages through `tracing` (target
//!   [`LOG_TARGET`]), the flight recorder ([`Pool::recording`]), leak
//!   detection ([`PoolBuilder::leak_detection_threshold`]) and, with the
//!   feature `metrics`, metrics export (`PoolBuilder::metrics`).
//! - Panics in the manager's hooks and in event callbacks are caught,
//!   logged and counted (`Stats::panics_caught`): the hook failed, and the
//!   pool loses no connection slot.
//! - [`ManageConnection`] — cmap-async's manager trait without `Send`.
//! - [`LocalRuntime`] — spawn on this thread, sleep until an instant:
//!   [`TokioLocal`] (feature `tokio`, on by default) and `Compio`
//!   (feature `compio`).
//!
//! ## How the core is driven
//!
//! One input cycle for every input (`shared.rs`): borrow the core, one
//! `handle_*`, drain `poll_output` into events and actions, release,
//! deliver the events in the core's order, then perform the actions, the
//! checkouts' outcomes last. One timer task sleeps until `poll_timeout`
//! and is woken when an input moves it earlier. docs/own-driver.md walks
//! through it as the example of a driver built on `cmap-core`.
//!
//! ## Cancellation safety
//!
//! Dropping a `get()` future at any point loses nothing: still queued, its
//! checkout is withdrawn; already served, its connection is checked back
//! in; a connection being established for it goes to the next checkout.
//!
//! ## Example
//!
//! ```
//! use std::future::Future;
//! use cmap_local::{ManageConnection, Pool, TokioLocal};
//!
//! struct Numbers;
//!
//! impl ManageConnection for Numbers {
//!     type Connection = std::rc::Rc<u64>; // not Send: fine here
//!     type Error = std::io::Error;
//!     fn connect(&self) -> impl Future<Output = Result<Self::Connection, std::io::Error>> {
//!         async { Ok(std::rc::Rc::new(42)) }
//!     }
//!     fn classify(&self, e: &std::io::Error) -> cmap_local::EstablishErrorKind {
//!         cmap_local::EstablishErrorKind::of_io(e)
//!     }
//! }
//!
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
//! tokio::task::LocalSet::new().block_on(&rt, async {
//!     let pool: Pool<Numbers, TokioLocal> = Pool::builder().address("localhost:27017").build(Numbers).unwrap();
//!     let conn = pool.get().await.unwrap();
//!     assert_eq!(**conn, 42);
//! });
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod builder;
#[cfg(any(feature = "bb8", feature = "deadpool"))]
pub mod compat;
mod events;
#[cfg(feature = "recorder")]
mod flight;
mod get;
mod guard;
mod leak;
mod manager;
mod pool;
mod runtime;
mod shared;
mod signal;
mod timer;

pub use builder::PoolBuilder;
pub use events::Subscription;
pub use guard::PooledConnection;
pub use manager::ManageConnection;
pub use pool::Pool;
#[cfg(feature = "compio")]
pub use runtime::Compio;
pub use runtime::LocalRuntime;
#[cfg(feature = "tokio")]
pub use runtime::TokioLocal;

pub use cmap_async::{BuildError, GetError, Hook, IdleCheck, NotReadyError, Panicked, ToAddress, LOG_TARGET};
pub use cmap_core;
#[cfg(feature = "recorder")]
pub use cmap_core::Recording;
pub use cmap_core::{
    Address, CheckOutError, Clear, ClosedReason, ConnectionId, EstablishError, EstablishErrorKind, Event,
    PoolOptions, PoolOptionsBuilder, PoolState, Reconnect, ServiceId, Stats, Status, UsageError,
};
