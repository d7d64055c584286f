//! What differs between async runtimes, and nothing else: how to spawn a
//! detached task, how to sleep until an instant, and which clock to read.

use std::future::Future;
use std::time::Instant;

use crate::clock::CoarseNow;

/// An async runtime, as the pool needs it. An adapter crate (such as
/// `cmap-tokio`) implements this and re-exports the rest of this crate.
///
/// The pool spawns a few kinds of tasks: one background task per pool (the
/// timer, which sleeps until the core's next deadline), one per connection
/// being established, and short ones to close connections and to finish a
/// [`reset`](crate::ManageConnection::reset) off the caller's path.
///
/// # Example
///
/// The whole tokio implementation:
///
/// ```
/// use std::future::Future;
/// use std::time::Instant;
///
/// #[derive(Clone)]
/// struct Tokio(tokio::runtime::Handle);
///
/// impl cmap_async::Runtime for Tokio {
///     fn spawn<F>(&self, future: F)
///     where
///         F: Future<Output = ()> + Send + 'static,
///     {
///         // A handle spawns from any thread, even outside the runtime.
///         self.0.spawn(future);
///     }
///
///     fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
///         tokio::time::sleep_until(deadline.into())
///     }
///
///     fn now(&self) -> Instant {
///         tokio::time::Instant::now().into_std()
///     }
/// }
/// ```
pub trait Runtime: Clone + Send + Sync + 'static {
    /// Runs `future` to completion in the background, detached from the
    /// caller. It must work from any thread (guards can be dropped
    /// anywhere); if the runtime is shutting down, dropping the future
    /// unpolled is acceptable: every task the pool spawns cleans up after
    /// itself when dropped.
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static;

    /// A future that completes at `deadline`, or at once if it has passed.
    /// It is created and polled inside tasks spawned with
    /// [`spawn`](Runtime::spawn).
    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static;

    /// The clock the pool reads for every input; it must be the clock
    /// [`sleep_until`](Runtime::sleep_until) sleeps on. The default is the
    /// system's monotonic clock; a runtime with a mockable clock (tokio's
    /// paused time) returns its own.
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// [`now`](Runtime::now) read cheaply, for the inputs whose instant
    /// only dates idle and use times: a checkout that finds a connection
    /// and nobody waiting, a check-in nobody waits for (the pool reads
    /// `now` whenever a deadline or a waited checkout's duration depends
    /// on the instant). The default is `now` itself. A runtime whose `now`
    /// is the system clock may return [`system_coarse_now`]; one whose
    /// clock can be paused or mocked must not, or idle times would follow
    /// the wall clock instead of its own.
    ///
    /// [`system_coarse_now`]: crate::system_coarse_now
    fn now_coarse(&self) -> CoarseNow {
        CoarseNow::exact(self.now())
    }
}
