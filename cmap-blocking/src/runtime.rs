//! [`ThreadRuntime`]: `cmap_async`'s [`Runtime`] on OS threads, and
//! [`unblock`], which runs a blocking call on one.

use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Instant;

use cmap_async::{system_coarse_now, CoarseNow, Runtime};

use crate::block_on::Sleep;
use crate::workers;

/// The pool's runtime for code without one: every task runs to completion
/// on an OS thread of its own, in [`block_on`](crate::block_on).
///
/// - **spawn**: on a worker thread, an idle one if there is one, otherwise
///   a new one. Idle threads end after 10 s without work. A pool's
///   background task keeps one thread while the pool lives and ends with
///   it; connects, closes and slow resets take one for as long as they
///   run.
/// - **sleep**: [`Sleep`], which `block_on` waits for by parking the thread
///   until the nearest deadline (`park_timeout`): no timer thread, no
///   polling loop.
/// - **clock**: [`Instant::now`].
///
/// It holds nothing (the worker threads are process-wide), so any value
/// works from any thread, forked children included.
///
/// To run the async pool (`cmap_async::Pool<M, ThreadRuntime>`) from
/// synchronous code, wait for its futures with
/// [`block_on`](crate::block_on); the synchronous [`Pool`](crate::Pool)
/// does exactly that.
///
/// ```
/// use std::sync::mpsc;
/// use cmap_blocking::{Runtime, ThreadRuntime};
///
/// let (tx, rx) = mpsc::channel();
/// ThreadRuntime::default().spawn(async move { tx.send(thread_name()).unwrap() });
/// assert_eq!(rx.recv().unwrap().as_deref(), Some("cmap-blocking"));
/// # fn thread_name() -> Option<String> { std::thread::current().name().map(str::to_owned) }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadRuntime;

impl ThreadRuntime {
    /// The worker threads alive now, and how many of them are idle (for
    /// tests and diagnostics; every `ThreadRuntime` shares them).
    pub fn threads() -> (usize, usize) {
        workers::counts()
    }
}

impl Runtime for ThreadRuntime {
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        workers::spawn(Box::pin(future));
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        Sleep::until(deadline)
    }

    /// The system clock's coarse copy: `Sleep` sleeps on the system clock.
    // Read on every input, from the pool's generic code in another
    // crate: inlined there, a call's prologue is most of its cost.
    #[inline]
    fn now_coarse(&self) -> CoarseNow {
        system_coarse_now()
    }
}

/// Where an [`Unblock`]'s call leaves its result.
struct Outcome<T> {
    result: Option<thread::Result<T>>,
    waker: Option<Waker>,
}

/// The future of [`unblock`].
#[must_use = "futures do nothing unless polled"]
pub struct Unblock<T, F> {
    call: Option<F>,
    outcome: Option<Arc<Mutex<Outcome<T>>>>,
}

/// Runs the blocking `call` on a worker thread, starting when the future
/// is first polled, and resolves to its result. Dropping the future does
/// not stop the call; its result is then dropped on that thread. A panic
/// in `call` is resumed where the future is polled.
///
/// The pool runs a synchronous manager's `connect` this way, so that the
/// connect timeout and an abort can give up on it (see
/// [`SyncManager`](crate::SyncManager)).
///
/// ```
/// let t = cmap_blocking::block_on(cmap_blocking::unblock(|| std::thread::current().id()));
/// assert_ne!(t, std::thread::current().id());
/// ```
pub fn unblock<T, F>(call: F) -> Unblock<T, F>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    Unblock {
        call: Some(call),
        outcome: None,
    }
}

impl<T, F> Unpin for Unblock<T, F> {}

impl<T, F> Future for Unblock<T, F>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if let Some(call) = self.call.take() {
            let outcome = Arc::new(Mutex::new(Outcome {
                result: None,
                waker: Some(cx.waker().clone()),
            }));
            self.outcome = Some(outcome.clone());
            workers::spawn(Box::pin(async move {
                let result = catch_unwind(AssertUnwindSafe(call));
                let waker = {
                    let mut o = outcome.lock().unwrap_or_else(PoisonError::into_inner);
                    o.result = Some(result);
                    o.waker.take()
                };
                if let Some(waker) = waker {
                    waker.wake();
                }
            }));
            return Poll::Pending;
        }
        let outcome = self.outcome.as_ref().expect("polled after completion");
        let mut o = outcome.lock().unwrap_or_else(PoisonError::into_inner);
        match o.result.take() {
            Some(Ok(value)) => {
                drop(o);
                self.outcome = None;
                Poll::Ready(value)
            }
            Some(Err(panic)) => {
                drop(o);
                self.outcome = None;
                resume_unwind(panic)
            }
            None => {
                match &mut o.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    slot => *slot = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_on::tests::assert_wakes_the_waker_of_its_last_poll;
    use std::time::Duration;

    #[test]
    fn an_unblocked_call_wakes_the_waker_of_its_last_poll() {
        let mut call = unblock(|| {
            thread::sleep(Duration::from_millis(20));
            5
        });
        assert_wakes_the_waker_of_its_last_poll(Pin::new(&mut call));
        let waker = Waker::noop();
        assert_eq!(
            Pin::new(&mut call).poll(&mut Context::from_waker(waker)),
            Poll::Ready(5)
        );
    }
}
