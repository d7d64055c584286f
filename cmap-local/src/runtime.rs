//! What differs between single-threaded runtimes, and nothing else: how to
//! spawn a task on this thread, how to sleep until an instant, which clock
//! to read. No `Send` anywhere: every task the pool spawns stays on the
//! thread that built it.

use std::future::Future;
use std::time::Instant;

/// A runtime for one thread, as the pool needs it: cmap-async's `Runtime`
/// without `Send` or `Sync`.
///
/// The pool spawns one timer task (it sleeps until the core's next
/// deadline), one task per connection being established, and one per
/// [`reset`](crate::ManageConnection::reset) that has to wait.
///
/// # Example
///
/// The whole tokio implementation ([`TokioLocal`](crate::TokioLocal)):
///
/// ```
/// use std::future::Future;
/// use std::time::Instant;
///
/// #[derive(Clone, Copy)]
/// struct Local;
///
/// impl cmap_local::LocalRuntime for Local {
///     fn spawn_local<F: Future<Output = ()> + 'static>(&self, future: F) {
///         tokio::task::spawn_local(future); // inside a LocalSet
///     }
///     fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + 'static {
///         tokio::time::sleep_until(deadline.into())
///     }
/// }
/// ```
pub trait LocalRuntime: Clone + 'static {
    /// Runs `future` to completion on this thread, detached. Dropping it
    /// unpolled (a runtime shutting down) is acceptable: every task the
    /// pool spawns cleans up after itself when dropped.
    fn spawn_local<F: Future<Output = ()> + 'static>(&self, future: F);

    /// A future that completes at `deadline`, or at once if it has passed.
    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + 'static;

    /// The clock of every input; the one [`sleep_until`](Self::sleep_until)
    /// sleeps on (default: the system's monotonic clock).
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// tokio's current-thread runtime with a [`tokio::task::LocalSet`]: pools
/// are built and used inside `LocalSet::run_until` (or `block_on`), as
/// `spawn_local` requires.
#[cfg(feature = "tokio")]
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioLocal;

#[cfg(feature = "tokio")]
impl LocalRuntime for TokioLocal {
    fn spawn_local<F: Future<Output = ()> + 'static>(&self, future: F) {
        tokio::task::spawn_local(future);
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + 'static {
        tokio::time::sleep_until(deadline.into())
    }

    /// tokio's clock, so that a test's paused time moves the pool too.
    // Read on every input, from the pool's generic code in another
    // crate: inlined there, a call's prologue is most of its cost.
    #[inline]
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// The [compio](https://docs.rs/compio) runtime: one per thread, tasks on
/// it with `compio_runtime::spawn`, detached.
#[cfg(feature = "compio")]
#[derive(Debug, Clone, Copy, Default)]
pub struct Compio;

#[cfg(feature = "compio")]
impl LocalRuntime for Compio {
    fn spawn_local<F: Future<Output = ()> + 'static>(&self, future: F) {
        compio_runtime::spawn(future).detach();
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + 'static {
        compio_runtime::time::sleep_until(deadline)
    }
}
