//! The conformance kit's contract: what the real-time engines
//! (`realtime.rs` for the CMAP-format files, `logging_suite/` for the
//! logging files) need of a pool under test, so that any driver built on
//! `cmap-core` runs the official suite, not only cmap-async's runtimes.
//!
//! A [`Driver`] builds one pool per test (or per client of a logging
//! test) from a [`PoolSpec`]: the test's options, paused, its address,
//! the simulated endpoint as the source of every handshake, and the
//! callback that receives its events. A [`DriverPool`] is driven from
//! plain OS threads (the spec's threads), so its methods block; a driver
//! whose pool cannot leave its thread (cmap-local) serves them from a
//! thread of its own (`local_driver.rs`). Every cmap-async adapter is a
//! driver (the impl below); a driver outside this workspace implements
//! the two traits and calls [`crate::run_file_on`].
//!
//! Time is real: the engines read the system's monotonic clock, and a
//! driver's pool sleeps (the endpoint's `blockTimeMS`, its timers) on its
//! runtime's clock, which must be that one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use cmap_async::{
    Address, ConnectionId, Event, GetError, Pool, PoolOptions, PooledConnection, Status, UsageError,
};

use crate::adapter::{Adapter, SharedEndpoint, SimManager};

/// The callback that receives a pool's events, in the pool's order.
pub type OnEvent = Arc<dyn Fn(&Event) + Send + Sync>;

/// How to build the pool of a test.
#[derive(Clone)]
pub struct PoolSpec {
    /// For events and logs.
    pub address: Address,
    /// The test's options, used as they are (no defaults of the driver's).
    pub options: PoolOptions,
    /// The connect timeout (`None`: the endpoint alone decides how long a
    /// handshake takes).
    pub connect_timeout: Option<Duration>,
    /// Where every handshake goes: connect through [`SimManager`]'s rules
    /// (`Endpoint::handshake` when the attempt starts, its delay slept on
    /// the driver's clock, then its outcome).
    pub endpoint: SharedEndpoint,
    /// Receives every event, from `ConnectionPoolCreated` on.
    pub on_event: OnEvent,
}

/// A driver under test: it builds pools, paused.
pub trait Driver: Sync {
    /// One pool, borrowing the driver.
    type Pool<'a>: DriverPool
    where
        Self: 'a;

    /// The name `--adapter` takes.
    fn driver_name(&self) -> &'static str;

    /// A pool as `spec` says, paused (the test readies it).
    ///
    /// # Errors
    ///
    /// Why the driver refused to build it.
    fn build(&self, spec: PoolSpec) -> Result<Self::Pool<'_>, String>;
}

/// One pool of a driver, as the engines drive it from several OS threads.
pub trait DriverPool: Sync {
    /// A checked-out connection; dropping it checks it in, and its events
    /// are delivered before the drop returns.
    type Conn: Send;

    /// Checks out, blocking the calling thread until the outcome; calls
    /// `begun` once the checkout is queued in the pool or served (the
    /// engines hand the next operation on only then).
    ///
    /// # Errors
    ///
    /// The pool's error, as `get()` gives it.
    fn check_out(&self, begun: &dyn Fn()) -> Result<(ConnectionId, Self::Conn), GetError>;

    /// Clears the pool.
    ///
    /// # Errors
    ///
    /// Misuse the core refuses.
    fn clear(&self, interrupt_in_use: bool) -> Result<(), UsageError>;

    /// Marks the pool ready.
    ///
    /// # Errors
    ///
    /// The pool is closed.
    fn ready(&self) -> Result<(), UsageError>;

    /// Closes the pool; the checkouts it fails return.
    fn close(&self);

    /// Its connection counts.
    fn status(&self) -> Status;
}

/// Every cmap-async runtime adapter is a driver: the async pool on its
/// runtime, a checkout blocked on with [`Adapter::block_on`].
impl<A: Adapter> Driver for A {
    type Pool<'a>
        = AsyncPool<'a, A>
    where
        A: 'a;

    fn driver_name(&self) -> &'static str {
        self.name()
    }

    fn build(&self, spec: PoolSpec) -> Result<AsyncPool<'_, A>, String> {
        let rt = self.runtime();
        let on_event = spec.on_event;
        let pool = Pool::builder()
            .address(spec.address)
            .options(spec.options)
            .start_paused(true)
            .connect_timeout(spec.connect_timeout)
            .on_event(move |event| on_event(event))
            .build_on(SimManager::new(spec.endpoint, rt.clone()), rt)
            .map_err(|e| format!("cannot build the pool: {e}"))?;
        Ok(AsyncPool { adapter: self, pool })
    }
}

/// A cmap-async pool on an adapter's runtime.
pub struct AsyncPool<'a, A: Adapter> {
    adapter: &'a A,
    pool: Pool<SimManager<A::Runtime>, A::Runtime>,
}

impl<A: Adapter> DriverPool for AsyncPool<'_, A> {
    type Conn = PooledConnection<'static, SimManager<A::Runtime>>;

    fn check_out(&self, begun: &dyn Fn()) -> Result<(ConnectionId, Self::Conn), GetError> {
        let get = FirstPoll {
            future: Box::pin(self.pool.get_owned()),
            begun: Some(begun),
        };
        let conn = self.adapter.block_on(get)?;
        Ok((conn.connection_id(), conn))
    }

    fn clear(&self, interrupt_in_use: bool) -> Result<(), UsageError> {
        self.pool.clear(interrupt_in_use)
    }

    fn ready(&self) -> Result<(), UsageError> {
        self.pool.ready()
    }

    fn close(&self) {
        self.pool.close();
    }

    fn status(&self) -> Status {
        self.pool.status()
    }
}

/// Polls `future` and calls `begun` after its first poll: a checkout is
/// then queued in the pool, or already served.
pub struct FirstPoll<'a, F> {
    /// The checkout.
    pub future: Pin<Box<F>>,
    /// Called once, after the first poll.
    pub begun: Option<&'a dyn Fn()>,
}

impl<F: Future> Future for FirstPoll<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let poll = self.future.as_mut().poll(cx);
        if let Some(begun) = self.begun.take() {
            begun();
        }
        poll
    }
}
