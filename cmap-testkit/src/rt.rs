//! The few things a test needs of a runtime beyond [`Runtime`]: spawn and
//! join, sleep, timeout, and waiting for a condition, written once on top
//! of `Runtime::spawn` and `Runtime::sleep_until`; [`FrozenCoarse`], a
//! runtime whose cheap clock shows when the pool reads it; and
//! [`Shedding`], one that drops its tasks as a runtime shutting down does.

use std::future::Future;
use std::panic::{resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use cmap_async::{CoarseNow, Event, EventStream, Runtime};
use event_listener::{Event as Notify, EventListener};
use futures_lite::FutureExt;

struct Shared<T> {
    outcome: Mutex<Option<thread::Result<T>>>,
    done: Notify,
}

/// A spawned task's result: awaiting it gives the task's output, or
/// panics with the task's panic.
#[must_use = "a dropped Join detaches the task"]
pub struct Join<T> {
    shared: Arc<Shared<T>>,
    listener: Option<EventListener>,
}

/// Spawns `future` on `rt`; the returned [`Join`] resolves to its output.
pub fn spawn<T, F>(rt: &impl Runtime, future: F) -> Join<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let shared = Arc::new(Shared {
        outcome: Mutex::new(None),
        done: Notify::new(),
    });
    let theirs = shared.clone();
    rt.spawn(async move {
        let outcome = AssertUnwindSafe(future).catch_unwind().await;
        *theirs.outcome.lock().unwrap() = Some(outcome);
        theirs.done.notify(usize::MAX);
    });
    Join {
        shared,
        listener: None,
    }
}

impl<T> Future for Join<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        loop {
            if let Some(outcome) = self.shared.outcome.lock().unwrap().take() {
                return Poll::Ready(outcome.unwrap_or_else(|panic| resume_unwind(panic)));
            }
            match self.listener.as_mut() {
                // Listen, then look again: no notification is lost.
                None => self.listener = Some(self.shared.done.listen()),
                Some(listener) => {
                    if Pin::new(listener).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.listener = None;
                }
            }
        }
    }
}

/// Sleeps for `duration` on `rt`'s timer.
pub async fn sleep(rt: &impl Runtime, duration: Duration) {
    rt.sleep_until(rt.now() + duration).await;
}

/// `future`'s output, or `None` if `duration` passes first.
pub async fn timeout<F: Future>(rt: &impl Runtime, duration: Duration, future: F) -> Option<F::Output> {
    async { Some(future.await) }
        .or(async {
            sleep(rt, duration).await;
            None
        })
        .await
}

/// Polls `cond` every millisecond for up to two seconds.
///
/// # Panics
///
/// If `cond` is still false then.
pub async fn eventually(rt: &impl Runtime, what: &str, cond: impl FnMut() -> bool) {
    poll_until(what, cond, || sleep(rt, Duration::from_millis(1))).await;
}

/// Runs `future` to completion inside a `LocalSet` on a current-thread
/// tokio runtime (I/O and timers on): where cmap-local's pools live.
pub fn on_local_set<F: Future>(future: F) -> F::Output {
    let (rt, tasks) = local_set();
    tasks.block_on(&rt, future)
}

/// A current-thread tokio runtime (I/O and timers on) and a `LocalSet`,
/// for a test that awaits or drops the set itself (its tasks ended, or
/// dropped unfinished).
pub fn local_set() -> (tokio::runtime::Runtime, tokio::task::LocalSet) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    (rt, tokio::task::LocalSet::new())
}

/// [`eventually`] on the current tokio runtime, for pools that are not
/// cmap-async's (cmap-local's on a `LocalSet`).
///
/// # Panics
///
/// If `cond` is still false after two seconds.
pub async fn eventually_on_tokio(what: &str, cond: impl FnMut() -> bool) {
    poll_until(what, cond, || tokio::time::sleep(Duration::from_millis(1))).await;
}

async fn poll_until<F: std::future::Future>(
    what: &str,
    mut cond: impl FnMut() -> bool,
    mut tick: impl FnMut() -> F,
) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tick().await;
    }
    panic!("timed out waiting for: {what}");
}

/// The next event of a stream.
pub async fn next(stream: &mut EventStream) -> Option<Event> {
    futures_lite::StreamExt::next(stream).await
}

/// Runtime `R` whose cheap clock ([`Runtime::now_coarse`]) stands still
/// where the runtime was made, with a lag that covers it (so it is still
/// a valid coarse clock), and which counts its precise reads: an input
/// that used the cheap clock where it needed the precise one shows as a
/// wrong instant, and one that read the precise clock where the cheap one
/// would do shows in the count.
#[derive(Clone)]
pub struct FrozenCoarse<R> {
    inner: R,
    frozen: Instant,
    precise_reads: Arc<AtomicUsize>,
}

impl<R: Default> Default for FrozenCoarse<R> {
    fn default() -> Self {
        FrozenCoarse {
            inner: R::default(),
            frozen: Instant::now(),
            precise_reads: Arc::default(),
        }
    }
}

impl<R> FrozenCoarse<R> {
    /// How many times [`Runtime::now`] was read (by this value and its
    /// clones).
    pub fn precise_reads(&self) -> usize {
        self.precise_reads.load(Ordering::SeqCst)
    }
}

impl<R: Runtime> Runtime for FrozenCoarse<R> {
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.inner.spawn(future);
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        self.inner.sleep_until(deadline)
    }

    fn now(&self) -> Instant {
        self.precise_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.now()
    }

    fn now_coarse(&self) -> CoarseNow {
        // An hour covers any test.
        CoarseNow {
            at: self.frozen,
            lag: Duration::from_secs(3600),
        }
    }
}

/// Runtime `R` that drops the tasks it is given while
/// [`shed`](Shedding::shed) is on, unpolled, as a runtime shutting down
/// drops its tasks: what the pool spawns then (an establishment) must
/// still leave the pool whole.
#[derive(Clone, Default)]
pub struct Shedding<R> {
    inner: R,
    shedding: Arc<AtomicBool>,
}

impl<R> Shedding<R> {
    /// Drops (`true`) or spawns (`false`) the tasks given from now on.
    pub fn shed(&self, on: bool) {
        self.shedding.store(on, Ordering::SeqCst);
    }
}

impl<R: Runtime> Runtime for Shedding<R> {
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if self.shedding.load(Ordering::SeqCst) {
            drop(future);
        } else {
            self.inner.spawn(future);
        }
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        self.inner.sleep_until(deadline)
    }

    fn now(&self) -> Instant {
        self.inner.now()
    }

    fn now_coarse(&self) -> CoarseNow {
        self.inner.now_coarse()
    }
}
