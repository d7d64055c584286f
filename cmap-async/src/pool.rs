//! `Pool`: the handle users hold. Every method is one input of the core.

use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use cmap_core::{Address, Clear, Event, PoolOptions, Stats, Status, UsageError};

use crate::builder::PoolBuilder;
use crate::error::GetError;
use crate::events::{EventStream, Subscription};
use crate::guard::PooledConnection;
use crate::leak::Caller;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::Shared;

/// A CMAP connection pool of `M`'s connections, driven on runtime `R`.
///
/// Cloning it is cheap and gives another handle to the same pool. When the
/// last handle is dropped the pool is closed: queued checkouts fail, idle
/// connections are closed, and checked-out ones are closed when given back.
///
/// # Example
///
/// ```
/// # use cmap_async::{GetError, ManageConnection, Pool, Runtime};
/// async fn run<M: ManageConnection, R: Runtime>(pool: Pool<M, R>) -> Result<(), GetError> {
///     let conn = pool.get().await?; // waits at most waitQueueTimeoutMS
///     drop(conn); // checked in
///     let status = pool.status();
///     assert_eq!(status.in_use, 0);
///     pool.close();
///     Ok(())
/// }
/// ```
pub struct Pool<M: ManageConnection, R: Runtime> {
    shared: Arc<Shared<M, R>>,
}

impl<M: ManageConnection, R: Runtime> Pool<M, R> {
    /// A builder with this crate's defaults (see [`PoolBuilder`]).
    pub fn builder() -> PoolBuilder<M, R> {
        PoolBuilder::new()
    }

    pub(crate) fn from_shared(shared: Arc<Shared<M, R>>) -> Self {
        Pool { shared }
    }

    /// Checks out a connection, waiting at most `waitQueueTimeoutMS` (no
    /// limit if it is not set). The future and the guard borrow this
    /// handle: a checkout takes no reference count on the pool (see
    /// [`get_owned`](Self::get_owned) for a guard that outlives it). The
    /// future may be dropped at any point without losing a connection or
    /// capacity.
    ///
    /// # Errors
    ///
    /// [`GetError::CheckOut`] when the pool is closed, paused or cleared
    /// (retryable), the wait timed out, or establishing the connection made
    /// for this checkout failed (the manager's error is its source);
    /// [`GetError::CheckFailed`] when a new connection fails
    /// [`ManageConnection::check`].
    ///
    /// # Example
    ///
    /// ```
    /// # use cmap_async::{GetError, ManageConnection, Pool, Runtime};
    /// async fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) -> Result<(), GetError> {
    ///     let mut conn = pool.get().await?;
    ///     let _c: &mut M::Connection = &mut conn;
    ///     Ok(())
    /// }
    /// ```
    #[track_caller]
    pub fn get(&self) -> impl Future<Output = Result<PooledConnection<'_, M>, GetError>> + Send + '_ {
        self.get_within(self.shared.options.wait_queue_timeout(), Location::caller())
    }

    /// Checks out a connection, waiting at most `timeout` instead of
    /// `waitQueueTimeoutMS` (`None`: no limit). A zero timeout takes an
    /// available connection or fails at once.
    ///
    /// # Example
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use cmap_async::{GetError, ManageConnection, Pool, Runtime};
    /// async fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    ///     match pool.get_timeout(Duration::from_millis(50)).await {
    ///         Ok(_conn) => {}
    ///         Err(e) if e.is_timeout() => { /* busy */ }
    ///         Err(_) => {}
    ///     }
    /// }
    /// ```
    #[track_caller]
    pub fn get_timeout(
        &self,
        timeout: impl Into<Option<Duration>>,
    ) -> impl Future<Output = Result<PooledConnection<'_, M>, GetError>> + Send + '_ {
        self.get_within(timeout.into(), Location::caller())
    }

    /// The checkout of `get` and `get_timeout`; `caller` is where they
    /// were called (taken before the future is made: an `async fn` cannot
    /// track its caller), for leak detection.
    fn get_within(
        &self,
        timeout: Option<Duration>,
        caller: Caller,
    ) -> impl Future<Output = Result<PooledConnection<'_, M>, GetError>> + Send + '_ {
        let shared = &*self.shared;
        async move {
            // A manager that does not check: the checkout future itself,
            // without `Shared::get`'s around it.
            let conn = if M::CHECKS {
                shared.get(timeout).await?
            } else {
                shared.check_out(timeout).await?
            };
            Ok(PooledConnection::borrowing(conn, shared, caller))
        }
    }

    /// As [`get`](Self::get), but neither the future nor the guard borrows
    /// this handle: each holds one of its own (a reference count taken and
    /// dropped per checkout). For a checkout to spawn, or a connection to
    /// keep in a `'static` place.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    ///
    /// # Example
    ///
    /// ```
    /// # use cmap_async::{GetError, ManageConnection, Pool, PooledConnection, Runtime};
    /// fn later<M: ManageConnection, R: Runtime>(
    ///     pool: &Pool<M, R>,
    /// ) -> impl std::future::Future<Output = Result<PooledConnection<'static, M>, GetError>> + Send + 'static {
    ///     pool.get_owned() // borrows nothing: can be spawned
    /// }
    /// ```
    #[track_caller]
    pub fn get_owned(
        &self,
    ) -> impl Future<Output = Result<PooledConnection<'static, M>, GetError>> + Send + 'static {
        self.get_owned_within(self.shared.options.wait_queue_timeout(), Location::caller())
    }

    /// As [`get_timeout`](Self::get_timeout), borrowing nothing, as
    /// [`get_owned`](Self::get_owned).
    #[track_caller]
    pub fn get_owned_timeout(
        &self,
        timeout: impl Into<Option<Duration>>,
    ) -> impl Future<Output = Result<PooledConnection<'static, M>, GetError>> + Send + 'static {
        self.get_owned_within(timeout.into(), Location::caller())
    }

    fn get_owned_within(
        &self,
        timeout: Option<Duration>,
        caller: Caller,
    ) -> impl Future<Output = Result<PooledConnection<'static, M>, GetError>> + Send + 'static {
        // The shared state, not a `Pool` handle: a pending checkout does
        // not keep the pool open.
        let shared = self.shared.clone();
        async move {
            let conn = if M::CHECKS {
                shared.get(timeout).await?
            } else {
                shared.check_out(timeout).await?
            };
            Ok(PooledConnection::owning(conn, shared, caller))
        }
    }

    /// Marks the pool ready (spec: "Marking a Connection Pool as Ready"):
    /// checkouts are served and `minPoolSize` is kept. Pools are built
    /// ready unless [`PoolBuilder::start_paused`] says otherwise; a cleared
    /// pool needs this again (or its reconnect backoff, after a failure).
    ///
    /// # Errors
    ///
    /// [`UsageError::PoolClosed`] once the pool is closed.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, PoolState, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// pool.clear(false).unwrap();
    /// assert_eq!(pool.status().state, PoolState::Paused);
    /// pool.ready().unwrap();
    /// # }
    /// ```
    pub fn ready(&self) -> Result<(), UsageError> {
        self.shared.input(|inner, now| inner.core.handle_ready(now))
    }

    /// Clears the pool (spec: "Clearing a Connection Pool"): connections of
    /// the current generation are closed as they come back or are found
    /// idle, the pool is paused, and queued checkouts fail with a retryable
    /// `PoolClearedError`. With `interrupt_in_use`, checked-out connections
    /// are interrupted at once (see [`PooledConnection::interrupted`]).
    /// Call [`ready`](Self::ready) to serve checkouts again.
    ///
    /// # Errors
    ///
    /// [`UsageError::ClearMode`] in load-balanced mode, which clears per
    /// service: use [`clear_with`](Self::clear_with).
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// // The server went away: drop every connection, interrupt those in use.
    /// pool.clear(true).unwrap();
    /// # }
    /// ```
    pub fn clear(&self, interrupt_in_use: bool) -> Result<(), UsageError> {
        self.clear_with(Clear {
            interrupt_in_use,
            ..Clear::default()
        })
    }

    /// Clears the pool with a cause (the text of the `PoolClearedError`
    /// that queued checkouts fail with) and, in load-balanced mode, the
    /// service to clear.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// let cause = "the server stepped down".into();
    /// pool.clear_with(cmap_async::Clear { cause: Some(cause), ..Default::default() }).unwrap();
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`UsageError::ClearMode`] when a service id is given to a pool that
    /// is not load-balanced, or missing for one that is.
    pub fn clear_with(&self, clear: Clear) -> Result<(), UsageError> {
        self.shared
            .input(|inner, now| inner.core.handle_clear(now, clear))
    }

    /// Waits until the pool holds minPoolSize open connections, at most
    /// `timeout` (psycopg_pool's `wait()`); with minPoolSize 0, until one
    /// checkout succeeds, which proves the server answers. For a service
    /// that should not take traffic, or start at all, before its database
    /// does (see also [`PoolBuilder::build_and_wait`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # async fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// if let Err(e) = pool.wait_ready(Duration::from_secs(5)).await {
    ///     eprintln!("database not reachable: {e}"); // names the last connect error
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`NotReadyError`](crate::NotReadyError) at the timeout: how many
    /// connections it waited for, the pool's counts, and the last
    /// establishment failure.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), crate::NotReadyError> {
        self.shared.wait_ready(timeout).await
    }

    /// Checks every connection idle now with the manager's
    /// [`check`](ManageConnection::check) (psycopg_pool's `check()`),
    /// within `timeout` in all; those that fail, or are still being
    /// checked at the timeout, are closed (reason `error`), and the rest
    /// go back to the pool. Each is out of the pool while checked, so a
    /// checkout meanwhile may open a new connection. Returns how many were
    /// checked and closed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # async fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// let report = pool.check_idle(Duration::from_secs(2)).await;
    /// println!("{} checked, {} closed", report.checked, report.closed);
    /// # }
    /// ```
    pub async fn check_idle(&self, timeout: Duration) -> crate::IdleCheck {
        self.shared.check_idle(timeout).await
    }

    /// Changes minPoolSize and maxPoolSize (0: no limit) while the pool
    /// runs. Growing serves waiting checkouts at once and opens
    /// connections up to the new minimum; shrinking closes idle
    /// connections at once (least recently used first) and in-use ones as
    /// they are given back, never interrupting work (reason `shrunk`). An
    /// [`Event::PoolResized`] (and a log message) says so.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// pool.resize(2, 20).unwrap(); // min 2, max 20
    /// assert_eq!(pool.options().max_pool_size(), 20);
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`UsageError::InvalidSize`] when `min` exceeds a non-zero `max`,
    /// [`UsageError::ResizeClosed`] once the pool is closed; the sizes
    /// stay as they were.
    pub fn resize(&self, min: u32, max: u32) -> Result<(), UsageError> {
        self.shared
            .input(|inner, now| inner.core.handle_resize(now, min, max))
    }

    /// Closes the pool (spec: "Closing a Connection Pool"): queued
    /// checkouts fail at once with `PoolClosedError`, idle connections are
    /// closed, pending ones abandoned, and checked-out ones are closed when
    /// given back. Closing twice does nothing.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, PoolState, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// pool.close();
    /// assert_eq!(pool.status().state, PoolState::Closed);
    /// # }
    /// ```
    pub fn close(&self) {
        self.shared.close();
    }

    /// Closes the pool and gives the connections in use until `timeout` to
    /// come back (psycopg_pool's `close(timeout)`): new and queued
    /// checkouts fail at once with `PoolClosedError`, idle connections are
    /// closed, and each connection given back is closed. The ones still out
    /// at the timeout are interrupted (see [`PooledConnection::interrupted`])
    /// and closed in the pool's books (`ConnectionClosed`, reason
    /// `poolClosed`). Returns how many were forced: 0 when all came back.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # async fn run<M: ManageConnection, R: Runtime>(pool: Pool<M, R>) {
    /// let forced = pool.close_gracefully(Duration::from_secs(10)).await;
    /// if forced > 0 {
    ///     eprintln!("{forced} connections were still in use after 10 s");
    /// }
    /// # }
    /// ```
    pub async fn close_gracefully(&self, timeout: Duration) -> usize {
        self.shared.close_gracefully(timeout).await
    }

    /// Resets the pool in a forked child process (spec: "Forking"): call
    /// it in the child, before anything else uses the pool. The pool is
    /// cleared with `interruptInUseConnections` (`ConnectionPoolCleared`,
    /// cause [`ClearCause::Forked`](crate::ClearCause::Forked)), every
    /// connection it had is closed in its books, and its background task,
    /// which did not survive the fork, is started again. A pool that was
    /// ready is marked ready again; a paused one stays paused.
    ///
    /// The parent's connections are *leaked*, not dropped: their sockets
    /// are the parent's too, and dropping a client may send a goodbye that
    /// ends the parent's session. So a connection checked out before the
    /// fork and given back afterwards skips [`ManageConnection::reset`] and
    /// is forgotten. Call this only in a forked child.
    ///
    /// `cmap-blocking` notices forks itself (a `pthread_atfork` counter
    /// compared on every checkout) and calls this.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// # let in_forked_child = false;
    /// if in_forked_child {
    ///     pool.reset_after_fork();
    /// }
    /// # }
    /// ```
    pub fn reset_after_fork(&self) {
        self.shared.reset_after_fork();
    }

    /// The pool's state, connection counts and wait-queue length.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// let s = pool.status();
    /// println!("{:?}: {} of {} in use, {} waiting", s.state, s.in_use, s.total, s.waiting);
    /// # }
    /// ```
    pub fn status(&self) -> Status {
        self.shared.lock().core.status()
    }

    /// Counters since the pool was created.
    ///
    /// `usage_time` is measured on the runtime's cheap clock
    /// ([`Runtime::now_coarse`]: on Linux, one scheduler tick of
    /// resolution): a use shorter than a tick counts as zero or as one
    /// tick, so the total is right on average, not use by use. Waits are
    /// timed on the precise clock.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// let st = pool.stats();
    /// println!("{} checkouts, {} timed out, {:?} waited", st.requests, st.requests_timed_out, st.wait_time);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        let mut stats = self.shared.lock().core.stats();
        stats.panics_caught = self.shared.events.panics.count();
        stats.leaks_detected = self.shared.leaks.as_ref().map_or(0, |leaks| leaks.detected());
        stats
    }

    /// What the flight recorder holds ([`PoolBuilder::flight_recorder`]):
    /// a snapshot of the pool, then every input since and the outputs it
    /// caused. Write it with [`Recording::write_to`] and re-execute it
    /// with `spec-runner replay FILE` (or [`Recording::replay`]). `None`
    /// when the recorder is off. It is copied under the pool's lock.
    ///
    /// [`PoolBuilder::flight_recorder`]: crate::PoolBuilder::flight_recorder
    /// [`Recording::write_to`]: cmap_core::Recording::write_to
    /// [`Recording::replay`]: cmap_core::Recording::replay
    #[cfg(feature = "recorder")]
    pub fn recording(&self) -> Option<cmap_core::Recording> {
        self.shared.lock().core.recording()
    }

    /// The server address the pool is for.
    pub fn address(&self) -> &Address {
        &self.shared.address
    }

    /// The pool's options as they are now ([`resize`](Self::resize)
    /// changes minPoolSize and maxPoolSize).
    pub fn options(&self) -> PoolOptions {
        self.shared.lock().core.options().clone()
    }

    /// The connection manager.
    pub fn manager(&self) -> &M {
        &self.shared.manager
    }

    /// Calls `callback` with every event from now on, in the core's order,
    /// never under the pool's lock, on the thread of the input that produced
    /// it (or of a concurrent input already delivering: one thread delivers
    /// at a time). An input returns once its events are delivered, so after
    /// [`close`](Self::close) returns, `ConnectionPoolClosed` has been seen.
    /// Keep it short: other inputs wait for their events behind it. It may
    /// call into the pool.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// let subscription = pool.on_event(|event| println!("{}", event.name()));
    /// subscription.unsubscribe();
    /// # }
    /// ```
    pub fn on_event(&self, callback: impl Fn(&Event) + Send + Sync + 'static) -> Subscription {
        self.shared.events.on_batch(crate::events::subscriber(callback))
    }

    /// Every event from now on, as a stream (see [`EventStream`]).
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, Pool, Runtime};
    /// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
    /// let mut events = pool.events();
    /// pool.close();
    /// while let Some(event) = events.try_next() {
    ///     println!("{}", event.name()); // ... ConnectionPoolClosed
    /// }
    /// # }
    /// ```
    pub fn events(&self) -> EventStream {
        self.shared.events.stream()
    }
}

impl<M: ManageConnection, R: Runtime> Clone for Pool<M, R> {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::Relaxed);
        Pool {
            shared: self.shared.clone(),
        }
    }
}

impl<M: ManageConnection, R: Runtime> Drop for Pool<M, R> {
    fn drop(&mut self) {
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.close();
        }
    }
}

impl<M: ManageConnection, R: Runtime> fmt::Debug for Pool<M, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("address", &self.shared.address)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}
