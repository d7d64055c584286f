//! A deterministic runtime on a manual clock, for testing cmap-async
//! itself: one thread, tasks run in the order they were woken, and time
//! moves only when the test says so ([`ManualRuntime::advance`]) or when
//! nothing else can happen ([`ManualRuntime::block_on`] then jumps to the
//! next timer, as tokio's paused clock does). A deadline of the pool is
//! met at the exact instant it names, on every run.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use cmap_async::Runtime;

type BoxedTask = Pin<Box<dyn Future<Output = ()> + Send>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The runtime; clones share the clock, the tasks and the timers.
#[derive(Clone)]
pub struct ManualRuntime(Arc<Clock>);

struct Clock {
    origin: Instant,
    elapsed: Mutex<Duration>,
    /// Tasks woken and not yet polled, in the order they were woken.
    ready: Mutex<VecDeque<Arc<Task>>>,
    /// Sleeps not yet due, by deadline, then by when they were registered.
    timers: Mutex<BTreeMap<(Instant, u64), Waker>>,
    next_timer: AtomicU64,
}

struct Task {
    future: Mutex<Option<BoxedTask>>,
    /// In `ready` already: a second wake before the poll adds nothing.
    queued: AtomicBool,
    clock: Weak<Clock>,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(clock) = self.clock.upgrade() {
            lock(&clock.ready).push_back(self);
        }
    }
}

impl Default for ManualRuntime {
    fn default() -> Self {
        ManualRuntime(Arc::new(Clock {
            origin: Instant::now(),
            elapsed: Mutex::default(),
            ready: Mutex::default(),
            timers: Mutex::default(),
            next_timer: AtomicU64::new(0),
        }))
    }
}

impl ManualRuntime {
    /// A runtime whose clock stands still until advanced.
    pub fn new() -> ManualRuntime {
        ManualRuntime::default()
    }

    /// How far the clock has been moved since the runtime was made.
    pub fn elapsed(&self) -> Duration {
        *lock(&self.0.elapsed)
    }

    /// Moves the clock by `by`, waking every sleep due by then (in deadline
    /// order), and runs every task that can run.
    pub fn advance(&self, by: Duration) {
        *lock(&self.0.elapsed) += by;
        self.fire_due();
        self.run_until_stalled();
    }

    /// Runs every task that can run, without moving the clock.
    pub fn run_until_stalled(&self) {
        loop {
            let Some(task) = lock(&self.0.ready).pop_front() else {
                return;
            };
            task.queued.store(false, Ordering::Release);
            let Some(mut future) = lock(&task.future).take() else {
                continue;
            };
            let waker = Waker::from(task.clone());
            if future
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
            {
                *lock(&task.future) = Some(future);
            }
        }
    }

    /// Runs `future` to completion on this thread with the spawned tasks;
    /// when nothing can run and `future` is not done, moves the clock to
    /// the next sleep's deadline.
    ///
    /// # Panics
    ///
    /// When nothing can run and no sleep is pending: `future` would wait
    /// forever.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let main = Arc::new(MainWake::default());
        let waker = Waker::from(main.clone());
        let mut cx = Context::from_waker(&waker);
        loop {
            main.woken.store(false, Ordering::Release);
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            self.run_until_stalled();
            if main.woken.load(Ordering::Acquire) {
                continue;
            }
            let next = lock(&self.0.timers).keys().next().map(|(at, _)| *at);
            let Some(at) = next else {
                panic!("nothing can run and no timer is pending: the future would wait forever");
            };
            let now = self.now();
            self.advance(at.saturating_duration_since(now));
        }
    }

    fn fire_due(&self) {
        let now = self.now();
        loop {
            let due = {
                let mut timers = lock(&self.0.timers);
                match timers.first_key_value() {
                    Some((&(at, _), _)) if at <= now => timers.pop_first().map(|(_, w)| w),
                    _ => None,
                }
            };
            match due {
                Some(waker) => waker.wake(),
                None => return,
            }
        }
    }
}

/// The waker of the future [`ManualRuntime::block_on`] runs.
#[derive(Default)]
struct MainWake {
    woken: AtomicBool,
}

impl Wake for MainWake {
    fn wake(self: Arc<Self>) {
        self.woken.store(true, Ordering::Release);
    }
}

impl Runtime for ManualRuntime {
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let task = Arc::new(Task {
            future: Mutex::new(Some(Box::pin(future))),
            queued: AtomicBool::new(true),
            clock: Arc::downgrade(&self.0),
        });
        lock(&self.0.ready).push_back(task);
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        Sleep {
            clock: self.0.clone(),
            deadline,
            key: None,
        }
    }

    fn now(&self) -> Instant {
        self.0.origin + *lock(&self.0.elapsed)
    }
}

/// A sleep on the manual clock: pending until the clock reaches its
/// deadline.
struct Sleep {
    clock: Arc<Clock>,
    deadline: Instant,
    key: Option<(Instant, u64)>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = self.clock.origin + *lock(&self.clock.elapsed);
        let mut timers = lock(&self.clock.timers);
        if now >= self.deadline {
            if let Some(key) = self.key {
                timers.remove(&key);
            }
            return Poll::Ready(());
        }
        let key = match self.key {
            Some(key) => key,
            None => (
                self.deadline,
                self.clock.next_timer.fetch_add(1, Ordering::Relaxed),
            ),
        };
        timers.insert(key, cx.waker().clone());
        drop(timers);
        self.key = Some(key);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            lock(&self.clock.timers).remove(&key);
        }
    }
}
