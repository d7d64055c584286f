//! The pool handle: `Rc`-shared, cloned freely on its thread, closed when
//! the last handle is dropped.

use std::future::Future;
use std::panic::Location;
use std::rc::Rc;
use std::time::{Duration, Instant};

use cmap_async::{GetError, IdleCheck, NotReadyError};
use cmap_core::{Address, Clear, Event, PoolState, Stats, Status, UsageError};

use crate::builder::PoolBuilder;
use crate::events::Subscription;
use crate::guard::PooledConnection;
use crate::manager::ManageConnection;
use crate::runtime::LocalRuntime;
use crate::shared::{Shared, Wait};
use crate::signal::Signal;

/// A connection pool for one thread. Cloning gives another handle to the
/// same pool; the last handle dropped closes it.
pub struct Pool<M: ManageConnection, R: LocalRuntime> {
    shared: Rc<Shared<M, R>>,
}

impl<M: ManageConnection, R: LocalRuntime> Pool<M, R> {
    /// A builder with the defaults every adapter shares (see
    /// [`PoolBuilder`]).
    pub fn builder() -> PoolBuilder<M, R> {
        PoolBuilder::new()
    }

    pub(crate) fn from_shared(shared: Rc<Shared<M, R>>) -> Self {
        Pool { shared }
    }

    /// A connection, waiting at most the wait-queue timeout from its first
    /// poll. The future borrows nothing (spawn it if you like); dropped at any point, it
    /// loses no connection and no capacity.
    #[track_caller]
    pub fn get(&self) -> impl Future<Output = Result<PooledConnection<M, R>, GetError>> + 'static {
        self.shared.clone().get(Wait::QueueTimeout, Location::caller())
    }

    /// [`get`](Self::get) with a wait of the caller's (from the first
    /// poll, as `get`'s) instead of the wait-queue timeout (such as what is left of an operation's own
    /// timeout); `Duration::ZERO` takes only an available connection.
    #[track_caller]
    pub fn get_timeout(
        &self,
        timeout: Duration,
    ) -> impl Future<Output = Result<PooledConnection<M, R>, GetError>> + 'static {
        self.shared.clone().get(Wait::For(timeout), Location::caller())
    }

    /// [`get`](Self::get) until `deadline` on the runtime's clock (`None`:
    /// no limit).
    #[track_caller]
    pub fn get_until(
        &self,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<PooledConnection<M, R>, GetError>> + 'static {
        self.shared.clone().get(Wait::Until(deadline), Location::caller())
    }

    /// Waits until the pool holds minPoolSize open connections (idle or
    /// in use), or, with minPoolSize 0, until one checkout succeeds (its
    /// connection left idle), at most `timeout`: as
    /// `cmap_async::Pool::wait_ready`, so a service fails at start, with
    /// the cause, when its database is unreachable.
    ///
    /// # Errors
    ///
    /// [`NotReadyError`] at the timeout: the counts then and the last
    /// establishment failure.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), NotReadyError> {
        let started = self.shared.rt.now();
        let wanted = self.shared.core.borrow().options().min_pool_size() as usize;
        if wanted == 0 {
            return match self.get_timeout(timeout).await {
                Ok(conn) => {
                    drop(conn);
                    Ok(())
                }
                Err(_) => Err(self.not_ready(1, started)),
            };
        }
        let ready = |s: &Status| s.available + s.in_use >= wanted;
        let opened_or_closed =
            |e: &Event| matches!(e, Event::ConnectionReady { .. } | Event::ConnectionClosed { .. });
        if self
            .wait_until(started.checked_add(timeout), opened_or_closed, ready)
            .await
        {
            Ok(())
        } else {
            Err(self.not_ready(wanted, started))
        }
    }

    /// Waits until the pool's counts satisfy `done`, looking again at
    /// each event `wakes` picks (the core builds events only while someone
    /// listens: a subscription is held meanwhile), until `deadline`
    /// (`None`: no limit); returns whether they did (looked at once more
    /// at the deadline).
    async fn wait_until(
        &self,
        deadline: Option<Instant>,
        wakes: impl Fn(&Event) -> bool + 'static,
        done: impl Fn(&Status) -> bool,
    ) -> bool {
        let changed = Rc::new(Signal::default());
        let wake = changed.clone();
        let subscription = self.on_event(move |event| {
            if wakes(event) {
                wake.fire();
            }
        });
        let outcome = loop {
            if done(&self.status()) {
                break true;
            }
            let Some(deadline) = deadline else {
                changed.wait().await;
                continue;
            };
            let timed_out = async {
                self.shared.rt.sleep_until(deadline).await;
                true
            };
            if futures_lite::future::or(
                async {
                    changed.wait().await;
                    false
                },
                timed_out,
            )
            .await
            {
                break done(&self.status());
            }
        };
        self.unsubscribe(subscription);
        outcome
    }

    fn not_ready(&self, wanted: usize, started: Instant) -> NotReadyError {
        let waited = self.shared.rt.now().saturating_duration_since(started);
        NotReadyError::of(&self.shared.core.borrow(), wanted, waited)
    }

    /// Checks every connection idle now with the manager's check, all
    /// within `timeout` (psycopg_pool's `check()`), as
    /// `cmap_async::Pool::check_idle`: the good ones go back, the bad ones
    /// (or one whose check outlives the timeout) are closed.
    pub async fn check_idle(&self, timeout: Duration) -> IdleCheck {
        self.shared.clone().check_idle(timeout).await
    }

    /// Changes minPoolSize and maxPoolSize of the running pool, as
    /// `cmap_async::Pool::resize`: a larger size serves waiting checkouts
    /// at once, a smaller one closes idle connections over it now and the
    /// rest as they come back.
    ///
    /// # Errors
    ///
    /// [`UsageError::InvalidSize`] when `min` exceeds a non-zero `max`,
    /// [`UsageError::ResizeClosed`] once the pool is closed; the sizes stay
    /// as they were.
    pub fn resize(&self, min: u32, max: u32) -> Result<(), UsageError> {
        self.shared.input(|core, now| core.handle_resize(now, min, max))
    }

    /// Closes the pool, waits until no connection is in use or `timeout`
    /// has passed, and closes the rest by force (reason `poolClosed`), as
    /// `cmap_async::Pool::close_gracefully`. Returns how many were forced:
    /// 0 when all came back.
    pub async fn close_gracefully(&self, timeout: Duration) -> usize {
        self.close();
        let deadline = self.shared.rt.now().checked_add(timeout);
        let returned = |e: &Event| {
            matches!(
                e,
                Event::ConnectionCheckedIn { .. } | Event::ConnectionClosed { .. }
            )
        };
        if self.wait_until(deadline, returned, |s| s.in_use == 0).await {
            return 0;
        }
        // The pool is closed: forcing cannot be refused.
        self.shared
            .input(|core, now| core.handle_force_close(now).unwrap_or(0))
    }

    /// Marks the pool ready (spec: "Marking a Pool Ready").
    ///
    /// # Errors
    ///
    /// The pool is closed.
    pub fn ready(&self) -> Result<(), UsageError> {
        self.shared.input(|core, now| core.handle_ready(now))
    }

    /// Clears the pool (spec: "Clearing a Connection Pool"): it pauses,
    /// its connections go stale, every queued checkout fails with a
    /// retryable `PoolClearedError`; with `interrupt_in_use`, the
    /// connections in use are interrupted too.
    ///
    /// # Errors
    ///
    /// Misuse the core refuses (a load-balanced pool needs a service id:
    /// [`clear_with`](Self::clear_with)).
    pub fn clear(&self, interrupt_in_use: bool) -> Result<(), UsageError> {
        self.clear_with(Clear {
            interrupt_in_use,
            ..Clear::default()
        })
    }

    /// [`clear`](Self::clear) with all the core's settings.
    ///
    /// # Errors
    ///
    /// As [`clear`](Self::clear).
    pub fn clear_with(&self, clear: Clear) -> Result<(), UsageError> {
        self.shared.input(|core, now| core.handle_clear(now, clear))
    }

    /// Closes the pool: idle connections closed, queued checkouts failed,
    /// connections in use closed when they come back.
    pub fn close(&self) {
        self.shared.input(|core, now| core.handle_close(now));
        self.shared.timer.fire();
        if let Some(leaks) = &self.shared.leaks {
            leaks.close();
        }
    }

    /// Calls `callback` with every event, in the core's order, on this
    /// thread, outside every borrow of the pool (it may call the pool).
    pub fn on_event(&self, callback: impl Fn(&Event) + 'static) -> Subscription {
        self.shared.events.subscribe(Rc::new(callback))
    }

    /// Ends a subscription made by [`on_event`](Self::on_event).
    pub fn unsubscribe(&self, subscription: Subscription) {
        self.shared.events.unsubscribe(subscription);
    }

    /// Connection counts and the wait queue's length now.
    pub fn status(&self) -> Status {
        self.shared.core.borrow().status()
    }

    /// The counters since the pool was built, with the panics caught in
    /// user code and the leaks detected.
    pub fn stats(&self) -> Stats {
        let mut stats = self.shared.core.borrow().stats();
        stats.panics_caught = self.shared.events.panics.get();
        stats.leaks_detected = self.shared.leaks.as_ref().map_or(0, |leaks| leaks.detected());
        stats
    }

    /// Paused, ready or closed.
    pub fn state(&self) -> PoolState {
        self.shared.core.borrow().state()
    }

    /// The server's address, as events and logs give it.
    pub fn address(&self) -> &Address {
        &self.shared.address
    }

    /// The flight recorder's recording so far (the builder's
    /// `flight_recorder`), for `spec-runner replay`; `None` when off.
    #[cfg(feature = "recorder")]
    pub fn recording(&self) -> Option<cmap_core::Recording> {
        self.shared.core.borrow().recording()
    }
}

impl<M: ManageConnection, R: LocalRuntime> Clone for Pool<M, R> {
    fn clone(&self) -> Self {
        self.shared.handles.set(self.shared.handles.get() + 1);
        Pool {
            shared: self.shared.clone(),
        }
    }
}

impl<M: ManageConnection, R: LocalRuntime> Drop for Pool<M, R> {
    fn drop(&mut self) {
        let left = self.shared.handles.get() - 1;
        self.shared.handles.set(left);
        if left == 0 {
            self.close();
        }
    }
}

impl<M: ManageConnection, R: LocalRuntime> std::fmt::Debug for Pool<M, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("address", &self.shared.address)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}
