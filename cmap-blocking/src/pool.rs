//! The synchronous `Pool`: `cmap_async::Pool` on [`ThreadRuntime`], each
//! method waiting with [`block_on`] where the async one returns a future,
//! and a fork check on every checkout.

use std::fmt;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cmap_async::{
    Address, Clear, Event, GetError, IdleCheck, NotReadyError, PoolOptions, Stats, Status, Subscription,
    UsageError,
};

use crate::block_on::{block_on, block_on_first_poll_inline};
use crate::builder::PoolBuilder;
use crate::events::Events;
use crate::fork;
use crate::manager::{ManageConnection, SyncManager};
use crate::runtime::ThreadRuntime;

/// A checked-out connection: the same guard as the async pool's. It derefs
/// (mutably) to the connection and checks it back in when dropped (after
/// [`ManageConnection::reset`], on the dropping thread); see
/// [`mark_broken`](cmap_async::PooledConnection::mark_broken),
/// [`detach`](cmap_async::PooledConnection::detach) and
/// [`is_interrupted`](cmap_async::PooledConnection::is_interrupted).
/// From [`Pool::get`] it borrows the pool handle (`'a`); from
/// [`Pool::get_owned`], or made
/// [`into_owned`](cmap_async::PooledConnection::into_owned), it is
/// `PooledConnection<'static, M>`.
pub type PooledConnection<'a, M> = cmap_async::PooledConnection<'a, SyncManager<M>>;

/// The pool's fork generation, shared by its handles.
struct Forks {
    generation: AtomicU64,
    /// Held while resetting, so that no thread of the child checks out
    /// before the reset is done.
    reset: Mutex<()>,
}

/// A CMAP connection pool of `M`'s connections, for code with no async
/// runtime: [`get`](Self::get) blocks the calling thread (at most the
/// wait-queue timeout), connections are made on worker threads, and one
/// thread per pool runs its background work and ends with it.
///
/// Cloning it is cheap and gives another handle to the same pool. When the
/// last handle is dropped the pool is closed.
///
/// In a forked child (Unix), the first checkout notices the fork, resets
/// the pool (spec: "Forking"; see
/// [`cmap_async::Pool::reset_after_fork`]) and is served a new connection.
///
/// # Example
///
/// ```
/// # use std::time::Duration;
/// use cmap_blocking::{GetError, ManageConnection, Pool};
///
/// struct Numbers;
///
/// impl ManageConnection for Numbers {
///     type Connection = u64;
///     type Error = std::io::Error;
///     fn classify(&self, e: &std::io::Error) -> cmap_blocking::EstablishErrorKind { cmap_blocking::EstablishErrorKind::of_io(e) }
///     fn connect(&self) -> Result<u64, std::io::Error> {
///         Ok(42)
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = Pool::builder()
///     .address("db.example:27017")
///     .max_pool_size(4)
///     .wait_queue_timeout(Duration::from_secs(2))
///     .build(Numbers)?;
/// let conn = pool.get()?; // waits at most 2 s
/// assert_eq!(*conn, 42);
/// drop(conn); // checked in
/// assert_eq!(pool.status().available, 1);
/// pool.close();
/// # Ok(())
/// # }
/// ```
pub struct Pool<M: ManageConnection> {
    inner: cmap_async::Pool<SyncManager<M>, ThreadRuntime>,
    forks: Arc<Forks>,
}

impl<M: ManageConnection> Pool<M> {
    /// A builder with the defaults of [`cmap_async::PoolBuilder`].
    pub fn builder() -> PoolBuilder<M> {
        PoolBuilder::new()
    }

    pub(crate) fn from_async(inner: cmap_async::Pool<SyncManager<M>, ThreadRuntime>) -> Self {
        Pool {
            inner,
            forks: Arc::new(Forks {
                generation: AtomicU64::new(fork::generation()),
                reset: Mutex::new(()),
            }),
        }
    }

    /// Resets the pool if this process is a fork of the one it was made
    /// in: one atomic load when it is not.
    fn after_fork(&self) {
        let now = fork::generation();
        if self.forks.generation.load(Ordering::Acquire) == now {
            return;
        }
        let _resetting = self.forks.reset.lock().unwrap_or_else(PoisonError::into_inner);
        if self.forks.generation.load(Ordering::Acquire) != now {
            self.inner.reset_after_fork();
            self.forks.generation.store(now, Ordering::Release);
        }
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
        self.after_fork();
        // Pinned where it is made: the checkout future is large, and
        // `block_on` then moves only a pointer. Most checkouts find a
        // connection at their first poll, made before `block_on`'s set-up.
        block_on_first_poll_inline(pin!(self.inner.get()))
    }

    /// As [`get`](Self::get), but the guard holds a handle of its own on
    /// the pool: for a connection to keep in a `'static` place or move to
    /// another thread.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    #[track_caller]
    pub fn get_owned(&self) -> Result<PooledConnection<'static, M>, GetError> {
        self.after_fork();
        block_on_first_poll_inline(pin!(self.inner.get_owned()))
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
        self.after_fork();
        block_on_first_poll_inline(pin!(self.inner.get_timeout(timeout)))
    }

    /// Marks the pool ready: see [`cmap_async::Pool::ready`].
    ///
    /// # Errors
    ///
    /// [`UsageError::PoolClosed`] once the pool is closed.
    pub fn ready(&self) -> Result<(), UsageError> {
        self.inner.ready()
    }

    /// Clears the pool, interrupting the checked-out connections with
    /// `interrupt_in_use`: see [`cmap_async::Pool::clear`].
    ///
    /// # Errors
    ///
    /// [`UsageError::ClearMode`] in load-balanced mode.
    pub fn clear(&self, interrupt_in_use: bool) -> Result<(), UsageError> {
        self.inner.clear(interrupt_in_use)
    }

    /// Clears the pool with a cause and, in load-balanced mode, a service:
    /// see [`cmap_async::Pool::clear_with`].
    ///
    /// # Errors
    ///
    /// [`UsageError::ClearMode`] for a service id in the wrong mode.
    pub fn clear_with(&self, clear: Clear) -> Result<(), UsageError> {
        self.inner.clear_with(clear)
    }

    /// Closes the pool: threads waiting in `get()` fail at once, idle
    /// connections are closed, checked-out ones when given back.
    pub fn close(&self) {
        self.inner.close();
    }

    /// Closes the pool and blocks until the connections in use come back,
    /// or `timeout` passes; the ones still out then are interrupted and
    /// closed in the pool's books. Returns how many were forced. See
    /// [`cmap_async::Pool::close_gracefully`].
    pub fn close_gracefully(&self, timeout: Duration) -> usize {
        block_on(self.inner.close_gracefully(timeout))
    }

    /// The pool's state, connection counts and wait-queue length.
    pub fn status(&self) -> Status {
        self.inner.status()
    }

    /// Counters since the pool was created.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// What the flight recorder holds: see [`cmap_async::Pool::recording`].
    #[cfg(feature = "recorder")]
    pub fn recording(&self) -> Option<cmap_async::Recording> {
        self.inner.recording()
    }

    /// The server address the pool is for.
    pub fn address(&self) -> &Address {
        self.inner.address()
    }

    /// The pool's options as they are now ([`resize`](Self::resize)
    /// changes minPoolSize and maxPoolSize).
    pub fn options(&self) -> PoolOptions {
        self.inner.options()
    }

    /// Blocks until the pool holds minPoolSize open connections (with
    /// minPoolSize 0, until one checkout succeeds), at most `timeout`: see
    /// [`cmap_async::Pool::wait_ready`].
    ///
    /// # Errors
    ///
    /// [`NotReadyError`] at the timeout, naming the last connect error.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), NotReadyError> {
        block_on(self.inner.wait_ready(timeout))
    }

    /// Checks every idle connection now, within `timeout` in all; those
    /// that fail are closed: see [`cmap_async::Pool::check_idle`].
    pub fn check_idle(&self, timeout: Duration) -> IdleCheck {
        block_on(self.inner.check_idle(timeout))
    }

    /// Changes minPoolSize and maxPoolSize (0: no limit) while the pool
    /// runs: see [`cmap_async::Pool::resize`].
    ///
    /// # Errors
    ///
    /// [`UsageError::InvalidSize`] when `min` exceeds a non-zero `max`,
    /// [`UsageError::ResizeClosed`] once the pool is closed.
    pub fn resize(&self, min: u32, max: u32) -> Result<(), UsageError> {
        self.inner.resize(min, max)
    }

    /// The connection manager.
    pub fn manager(&self) -> &M {
        self.inner.manager()
    }

    /// Calls `callback` with every event from now on, in the core's order,
    /// never under the pool's lock: see [`cmap_async::Pool::on_event`].
    pub fn on_event(&self, callback: impl Fn(&Event) + Send + Sync + 'static) -> Subscription {
        self.inner.on_event(callback)
    }

    /// Every event from now on, as a blocking iterator (see [`Events`]).
    pub fn events(&self) -> Events {
        Events::new(self.inner.events())
    }
}

impl<M: ManageConnection> Clone for Pool<M> {
    fn clone(&self) -> Self {
        Pool {
            inner: self.inner.clone(),
            forks: self.forks.clone(),
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
