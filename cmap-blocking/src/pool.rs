//! The synchronous `Pool`: every method one input of the core through
//! the pool's cycle (`shared.rs`), `get()` parked in its slot while it
//! waits, and a fork check on every checkout.

use std::fmt;
use std::panic::Location;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_async::{
    Address, Clear, Event, GetError, IdleCheck, NotReadyError, PoolOptions, Stats, Status, Subscription,
    UsageError,
};

use crate::builder::PoolBuilder;
use crate::events::Events;
use crate::guard::PooledConnection;
use crate::manager::ManageConnection;
use crate::shared::Shared;

/// A CMAP connection pool of `M`'s connections, for code with no async
/// runtime: [`get`](Self::get) blocks the calling thread (at most the
/// wait-queue timeout), connections are made on threads of their own, and
/// one thread per pool runs its background work and ends with it.
///
/// Cloning it is cheap and gives another handle to the same pool. When the
/// last handle is dropped the pool is closed.
///
/// In a forked child (Unix), the first checkout resets the pool (spec:
/// "Forking") and is served a new connection.
///
/// An example: the [crate docs](crate).
pub struct Pool<M: ManageConnection> {
    shared: Arc<Shared<M>>,
}

impl<M: ManageConnection> Pool<M> {
    /// A builder with the defaults of [`cmap_async::PoolBuilder`].
    pub fn builder() -> PoolBuilder<M> {
        PoolBuilder::new()
    }

    pub(crate) fn from_shared(shared: Arc<Shared<M>>) -> Self {
        Pool { shared }
    }

    /// Checks out a connection, blocking the calling thread at most
    /// `waitQueueTimeoutMS` (no limit if it is not set).
    ///
    /// # Errors
    ///
    /// [`GetError::CheckOut`] when the pool is closed, paused or cleared
    /// (retryable), the wait timed out, or establishing the connection made
    /// for this checkout failed (the manager's error is its source);
    /// [`GetError::CheckFailed`] when a new connection fails
    /// [`ManageConnection::check`].
    ///
    /// The guard borrows this handle, so a checkout takes no reference
    /// count on the pool; see [`get_owned`](Self::get_owned).
    #[track_caller]
    pub fn get(&self) -> Result<PooledConnection<'_, M>, GetError> {
        self.get_timeout_at(self.shared.wait_queue_timeout, Location::caller())
    }

    /// As [`get`](Self::get), but the guard holds a share of the pool of
    /// its own: for a connection to keep in a `'static` place or move to
    /// another thread.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    #[track_caller]
    pub fn get_owned(&self) -> Result<PooledConnection<'static, M>, GetError> {
        self.get_owned_with(None)
    }

    /// As [`get_owned`](Self::get_owned), calling `entered` once the
    /// checkout is in the pool: served, or queued in the FIFO behind the
    /// checkouts before it (the spec's test runner starts its next thread
    /// only then).
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    #[track_caller]
    pub fn get_owned_entered(&self, entered: &dyn Fn()) -> Result<PooledConnection<'static, M>, GetError> {
        self.get_owned_with(Some(entered))
    }

    #[track_caller]
    fn get_owned_with(&self, entered: Option<&dyn Fn()>) -> Result<PooledConnection<'static, M>, GetError> {
        let conn = self.shared.get(self.shared.wait_queue_timeout, entered)?;
        Ok(PooledConnection::owning(
            conn,
            self.shared.clone(),
            Location::caller(),
        ))
    }

    /// Checks out a connection, blocking at most `timeout` instead of
    /// `waitQueueTimeoutMS`. A zero timeout takes an available connection
    /// or fails at once.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    #[track_caller]
    pub fn get_timeout(&self, timeout: Duration) -> Result<PooledConnection<'_, M>, GetError> {
        self.get_timeout_at(Some(timeout), Location::caller())
    }

    #[inline]
    fn get_timeout_at(
        &self,
        timeout: Option<Duration>,
        caller: &'static Location<'static>,
    ) -> Result<PooledConnection<'_, M>, GetError> {
        let conn = self.shared.get(timeout, None)?;
        Ok(PooledConnection::borrowing(conn, &self.shared, caller))
    }

    /// Marks the pool ready (spec: "ready"); [`UsageError::PoolClosed`]
    /// once it is closed.
    pub fn ready(&self) -> Result<(), UsageError> {
        self.shared.input(|inner, now| inner.core.handle_ready(now))
    }

    /// Clears the pool (spec: "clear"), interrupting the checked-out
    /// connections with `interrupt_in_use`; [`UsageError::ClearMode`] in
    /// load-balanced mode.
    pub fn clear(&self, interrupt_in_use: bool) -> Result<(), UsageError> {
        self.clear_with(Clear {
            interrupt_in_use,
            ..Clear::default()
        })
    }

    /// Clears the pool with a cause and, in load-balanced mode, a service;
    /// [`UsageError::ClearMode`] for a service id in the wrong mode.
    pub fn clear_with(&self, clear: Clear) -> Result<(), UsageError> {
        self.shared
            .input(|inner, now| inner.core.handle_clear(now, clear))
    }

    /// Closes the pool: threads waiting in `get()` fail at once, idle
    /// connections are closed, checked-out ones when given back.
    pub fn close(&self) {
        self.shared.close();
    }

    /// Closes the pool and blocks until the connections in use come back,
    /// or `timeout` passes; the ones still out then are interrupted and
    /// closed in the pool's books. Returns how many were forced.
    pub fn close_gracefully(&self, timeout: Duration) -> usize {
        self.shared.close();
        if self
            .shared
            .wait_for(Instant::now().checked_add(timeout), |s| s.in_use == 0)
        {
            return 0;
        }
        // The pool is closed: forcing cannot be refused.
        self.shared
            .input(|inner, now| inner.core.handle_force_close(now).unwrap_or(0))
    }

    /// The pool's state, connection counts and wait-queue length.
    pub fn status(&self) -> Status {
        self.shared.lock().core.status()
    }

    /// Counters since the pool was created.
    pub fn stats(&self) -> Stats {
        let mut stats = self.shared.lock().core.stats();
        stats.panics_caught = self.shared.events.panics().count();
        stats.leaks_detected = self.shared.leaks.as_ref().map_or(0, |leaks| leaks.detected());
        stats
    }

    /// What the flight recorder holds (`None` unless the builder turned
    /// it on): replay it with `cmap_core::Replay`.
    #[cfg(feature = "recorder")]
    pub fn recording(&self) -> Option<cmap_async::Recording> {
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

    /// Blocks until the pool holds minPoolSize open connections (with
    /// minPoolSize 0, until one checkout succeeds), at most `timeout`; then
    /// [`NotReadyError`], naming the last connect error.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), NotReadyError> {
        let started = Instant::now();
        let wanted = self.shared.lock().core.options().min_pool_size() as usize;
        let ready = if wanted == 0 {
            // Nothing opens by itself: one checkout proves the server
            // answers (and leaves its connection idle).
            self.shared
                .get(Some(timeout), None)
                .map(|conn| self.shared.check_in(conn))
                .is_ok()
        } else {
            let deadline = started.checked_add(timeout);
            self.shared
                .wait_for(deadline, |s| s.available + s.in_use >= wanted)
        };
        let not_ready = || NotReadyError::of(&self.shared.lock().core, wanted.max(1), started.elapsed());
        ready.then_some(()).ok_or_else(not_ready)
    }

    /// Checks every idle connection now with the manager's check, within
    /// `timeout` in all; those that fail are closed. Each is taken out of
    /// the pool while checked, and the good ones go back together at the
    /// end.
    pub fn check_idle(&self, timeout: Duration) -> IdleCheck {
        let deadline = Instant::now().checked_add(timeout);
        let idle = self.shared.lock().core.status().available;
        let mut report = IdleCheck::default();
        let mut good = Vec::with_capacity(idle);
        for _ in 0..idle {
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            // A zero timeout: an available one, or none (nothing started).
            let Ok(mut conn) = self.shared.check_out_now() else {
                break;
            };
            report.checked += 1;
            let panics = self.shared.events.panics();
            let checked = panics.call(cmap_async::Hook::Check, || {
                self.shared.manager.check_within(&mut conn, remaining)
            });
            if matches!(checked, Ok(Ok(()))) {
                good.push(conn);
            } else {
                conn.mark_errored();
                self.shared.check_in(conn);
                report.closed += 1;
            }
        }
        good.into_iter().for_each(|conn| self.shared.check_in(conn));
        report
    }

    /// Changes minPoolSize and maxPoolSize (0: no limit) while the pool
    /// runs (extra connections close as they come back or go idle);
    /// [`UsageError::InvalidSize`] when `min` exceeds a non-zero `max`,
    /// [`UsageError::ResizeClosed`] once the pool is closed.
    pub fn resize(&self, min: u32, max: u32) -> Result<(), UsageError> {
        self.shared
            .input(|inner, now| inner.core.handle_resize(now, min, max))
    }

    /// The connection manager.
    pub fn manager(&self) -> &M {
        &self.shared.manager
    }

    /// Calls `callback` with every event from now on, in the core's order,
    /// never under the pool's lock; a panic in it is caught and counted.
    pub fn on_event(&self, callback: impl Fn(&Event) + Send + Sync + 'static) -> Subscription {
        self.shared
            .events
            .on_batch(cmap_async::driver::subscriber(callback))
    }

    /// Every event from now on, as a blocking iterator (see [`Events`]).
    pub fn events(&self) -> Events {
        Events::new(self.shared.events.stream())
    }
}

impl<M: ManageConnection> Clone for Pool<M> {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::Relaxed);
        Pool {
            shared: self.shared.clone(),
        }
    }
}

impl<M: ManageConnection> Drop for Pool<M> {
    fn drop(&mut self) {
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.close();
        }
    }
}

impl<M: ManageConnection> fmt::Debug for Pool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("address", self.address())
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}
