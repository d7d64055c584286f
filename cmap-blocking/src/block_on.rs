//! `block_on` and the timer it keeps: a future runs on the calling thread,
//! which parks between polls until the future is woken or until the
//! nearest deadline a [`Sleep`] polled inside it registered. Nothing
//! spins: a thread waits in `park` or `park_timeout`, never in a loop.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

/// Wakes one `block_on`: a flag, and an unpark if the flag was down.
struct Parker {
    thread: Thread,
    notified: AtomicBool,
}

impl Wake for Parker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.notified.swap(true, Ordering::AcqRel) {
            self.thread.unpark();
        }
    }
}

/// The deadlines registered inside one `block_on` call, each with the
/// waker to wake when it passes.
struct Timers {
    /// Which `block_on` call this is (a `Sleep` registered in an earlier
    /// call registers again).
    call: CallId,
    entries: BTreeMap<(Instant, u64), Waker>,
    next_key: u64,
}

/// A `block_on` call, unique process-wide: this thread's number and the
/// call's number on this thread, so numbering a call touches no counter
/// other threads share.
type CallId = (u64, u64);

/// Numbers the threads that call `block_on`.
static THREADS: AtomicU64 = AtomicU64::new(1);

/// What a thread keeps from one `block_on` to the next, so that the
/// checkout fast path allocates nothing.
struct Spare {
    parker: Arc<Parker>,
    waker: Waker,
    timers: Rc<RefCell<Timers>>,
}

impl Spare {
    fn new() -> Spare {
        let parker = Arc::new(Parker {
            thread: thread::current(),
            notified: AtomicBool::new(false),
        });
        Spare {
            waker: Waker::from(parker.clone()),
            parker,
            timers: Rc::new(RefCell::new(Timers {
                call: (0, 0),
                entries: BTreeMap::new(),
                next_key: 0,
            })),
        }
    }
}

thread_local! {
    /// The innermost `block_on` running on this thread.
    static CURRENT: RefCell<Option<Rc<RefCell<Timers>>>> = const { RefCell::new(None) };
    /// Kept for the next `block_on` of this thread (taken by the outer
    /// call while calls nest).
    static SPARE: RefCell<Option<Spare>> = const { RefCell::new(None) };
    /// This thread's number and its last call's number.
    static LAST_CALL: Cell<CallId> = const { Cell::new((0, 0)) };
}

/// A new call's id.
fn next_call() -> CallId {
    LAST_CALL
        .try_with(|last| {
            let (mut thread, call) = last.get();
            if thread == 0 {
                thread = THREADS.fetch_add(1, Ordering::Relaxed);
            }
            last.set((thread, call + 1));
            (thread, call + 1)
        })
        // Only while this thread's locals are being torn down.
        .unwrap_or_else(|_| (THREADS.fetch_add(1, Ordering::Relaxed), 1))
}

/// Makes `timers` the current ones until dropped, then puts back the
/// outer ones (a `block_on` inside a `block_on`).
struct Enter {
    outer: Option<Rc<RefCell<Timers>>>,
}

impl Enter {
    fn new(timers: Rc<RefCell<Timers>>) -> Enter {
        let outer = CURRENT.with(|c| c.borrow_mut().replace(timers));
        Enter { outer }
    }
}

impl Drop for Enter {
    fn drop(&mut self) {
        let outer = self.outer.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = outer);
    }
}

/// Runs `future` to completion on the current thread.
///
/// Between polls the thread parks: until the future's waker is called, or
/// until the nearest deadline of a [`ThreadRuntime`](crate::ThreadRuntime)
/// sleep polled inside it, whichever comes first. Calls may nest (a
/// `block_on` inside a future that another `block_on` runs); each has its
/// own waker and deadlines.
///
/// ```
/// use std::time::{Duration, Instant};
/// use cmap_blocking::{block_on, Runtime, ThreadRuntime};
///
/// let t0 = Instant::now();
/// let rt = ThreadRuntime::default();
/// block_on(rt.sleep_until(t0 + Duration::from_millis(20)));
/// assert!(t0.elapsed() >= Duration::from_millis(20));
/// assert_eq!(block_on(async { 6 * 7 }), 42);
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    let spare = SPARE
        .try_with(|s| s.borrow_mut().take())
        .ok()
        .flatten()
        .unwrap_or_else(Spare::new);
    {
        let mut timers = spare.timers.borrow_mut();
        timers.call = next_call();
        timers.next_key = 0;
    }
    let mut cx = Context::from_waker(&spare.waker);
    let enter = Enter::new(spare.timers.clone());
    let mut future = pin!(future);
    let output = loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            break output;
        }
        wait(&spare.parker, &spare.timers);
    };
    drop(enter);
    // The timers' wakers may hold this parker; they go with this call.
    {
        let mut timers = spare.timers.borrow_mut();
        if !timers.entries.is_empty() {
            timers.entries.clear();
        }
    }
    let _ = SPARE.try_with(|s| *s.borrow_mut() = Some(spare));
    output
}

/// [`block_on`] for a future that usually completes at its first poll (a
/// checkout that finds a connection available): that poll is made at once,
/// with a waker that does nothing, and `block_on`'s set-up (this thread's
/// parker and timers) only follows when the future has to wait. Polled
/// again there, with the real waker, the future replaces the one it was
/// first given, as every future must.
#[inline]
pub(crate) fn block_on_first_poll_inline<F: Future>(mut future: Pin<&mut F>) -> F::Output {
    if let Poll::Ready(output) = future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        return output;
    }
    block_on(future)
}

fn wait(parker: &Parker, timers: &RefCell<Timers>) {
    loop {
        if parker.notified.swap(false, Ordering::AcqRel) {
            return;
        }
        let now = Instant::now();
        let (due, next) = {
            let mut timers = timers.borrow_mut();
            let later = timers.entries.split_off(&(now, u64::MAX));
            let due = std::mem::replace(&mut timers.entries, later);
            (due, timers.entries.keys().next().map(|(deadline, _)| *deadline))
        };
        if !due.is_empty() {
            // Outside the borrow: a waker may do anything.
            for (_, waker) in due {
                waker.wake();
            }
            continue;
        }
        match next {
            Some(deadline) => thread::park_timeout(deadline.saturating_duration_since(now)),
            None => thread::park(),
        }
    }
}

/// A future that completes at `deadline`: [`ThreadRuntime`]'s sleep
/// (`Runtime::sleep_until`).
///
/// Polled inside [`block_on`] (as every task of a `ThreadRuntime` is), it
/// registers its deadline with that call, which parks no longer than
/// that. Polled anywhere else, it has a worker thread wait for it.
///
/// [`ThreadRuntime`]: crate::ThreadRuntime
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    /// The `block_on` call and key it is registered under.
    registered: Option<(CallId, u64)>,
    /// The waker a worker thread wakes, when polled outside `block_on`.
    fallback: Option<Arc<Mutex<Waker>>>,
}

impl Sleep {
    /// A sleep until `deadline`.
    pub fn until(deadline: Instant) -> Sleep {
        Sleep {
            deadline,
            registered: None,
            fallback: None,
        }
    }

    /// Registers with the current `block_on`; false outside one.
    fn register(&mut self, waker: &Waker) -> bool {
        let Ok(Some(current)) = CURRENT.try_with(|c| c.borrow().clone()) else {
            return false;
        };
        let mut timers = current.borrow_mut();
        match self.registered {
            Some((call, key)) if call == timers.call => match timers.entries.get_mut(&(self.deadline, key)) {
                Some(w) if w.will_wake(waker) => {}
                Some(w) => *w = waker.clone(),
                None => {
                    timers.entries.insert((self.deadline, key), waker.clone());
                }
            },
            _ => {
                let key = timers.next_key;
                timers.next_key += 1;
                timers.entries.insert((self.deadline, key), waker.clone());
                self.registered = Some((timers.call, key));
            }
        }
        true
    }

    fn unregister(&mut self) {
        let Some((call, key)) = self.registered.take() else {
            return;
        };
        let deadline = self.deadline;
        let _ = CURRENT.try_with(|c| {
            if let Some(current) = c.borrow().as_ref() {
                if let Ok(mut timers) = current.try_borrow_mut() {
                    if timers.call == call {
                        timers.entries.remove(&(deadline, key));
                    }
                }
            }
        });
        // Registered with another call (or thread): that entry fires once,
        // harmlessly, or goes with its call.
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.unregister();
            return Poll::Ready(());
        }
        if self.register(cx.waker()) {
            return Poll::Pending;
        }
        if cx.waker().will_wake(Waker::noop()) {
            // Nobody to wake (`block_on_first_poll_inline`'s first poll):
            // no worker either; the next poll, with a real waker, arranges
            // the wake-up.
            return Poll::Pending;
        }
        // Outside `block_on`: a worker thread sleeps for us.
        match &self.fallback {
            Some(waker) => {
                let mut w = waker.lock().unwrap_or_else(PoisonError::into_inner);
                if !w.will_wake(cx.waker()) {
                    *w = cx.waker().clone();
                }
            }
            None => {
                let waker = Arc::new(Mutex::new(cx.waker().clone()));
                self.fallback = Some(waker.clone());
                let deadline = self.deadline;
                crate::workers::spawn(Box::pin(async move {
                    Sleep::until(deadline).await;
                    waker.lock().unwrap_or_else(PoisonError::into_inner).wake_by_ref();
                }));
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.unregister();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::time::Duration;

    fn in_block_on() -> bool {
        CURRENT.with(|c| c.borrow().is_some())
    }

    /// The deadlines the current `block_on` call holds.
    fn timers_held() -> usize {
        CURRENT.with(|c| c.borrow().as_ref().map_or(0, |t| t.borrow().entries.len()))
    }

    /// The deadlines this thread's spare timers kept after its last call.
    fn timers_kept() -> usize {
        SPARE.with(|s| {
            s.borrow()
                .as_ref()
                .map_or(0, |spare| spare.timers.borrow().entries.len())
        })
    }

    /// A waker that notes that it was woken.
    #[derive(Default)]
    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    impl Flag {
        fn woken(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// Polls `future` (which must wait) with one waker, then another, and
    /// asserts that the second one is woken within 5 s and the first not:
    /// a future wakes the waker of its last poll.
    pub(crate) fn assert_wakes_the_waker_of_its_last_poll<F: Future>(mut future: Pin<&mut F>) {
        let (first, last) = (Arc::new(Flag::default()), Arc::new(Flag::default()));
        for flag in [&first, &last] {
            let waker = Waker::from(flag.clone());
            assert!(future
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
        }
        let waited = Instant::now();
        while !last.woken() && waited.elapsed() < Duration::from_secs(5) {
            thread::sleep(Duration::from_millis(2));
        }
        assert!(last.woken() && !first.woken());
    }

    /// Runs `f` on a thread of its own, failing if it takes more than 5 s
    /// (a sleep nobody wakes would park its thread for good).
    fn within_5s(f: impl FnOnce() + Send + 'static) {
        let (done, finished) = std::sync::mpsc::channel();
        thread::spawn(move || {
            f();
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(5))
            .expect("the block_on call parked for good: a sleep was never woken");
    }

    #[test]
    fn a_future_ready_at_its_first_poll_runs_outside_block_on() {
        let mut polls = Vec::new();
        let out = block_on_first_poll_inline(pin!(poll_fn(|_| {
            polls.push(in_block_on());
            Poll::Ready(7)
        })));
        assert_eq!((out, polls), (7, vec![false]));
    }

    #[test]
    fn a_future_that_waits_is_polled_again_in_block_on_and_woken_through_the_real_waker() {
        let mut polls = Vec::new();
        let out = block_on_first_poll_inline(pin!(poll_fn(|cx| {
            polls.push(in_block_on());
            match polls.len() {
                // Its waker does nothing: kept, it would never wake.
                1 => Poll::Pending,
                2 => {
                    let waker = cx.waker().clone();
                    thread::spawn(move || {
                        thread::sleep(Duration::from_millis(10));
                        waker.wake();
                    });
                    Poll::Pending
                }
                _ => Poll::Ready(polls.len()),
            }
        })));
        assert_eq!(out, 3);
        assert_eq!(polls, vec![false, true, true]);
    }

    #[test]
    fn a_sleep_polled_with_nobody_to_wake_outside_block_on_arranges_nothing() {
        let deadline = Instant::now() + Duration::from_millis(20);
        let mut sleep = pin!(Sleep::until(deadline));
        assert!(sleep
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
        assert!(sleep.fallback.is_none() && sleep.registered.is_none());
        block_on_first_poll_inline(sleep.as_mut());
        assert!(Instant::now() >= deadline);
    }

    #[test]
    fn two_sleeps_with_one_deadline_keep_their_own_timers() {
        within_5s(|| {
            let deadline = Instant::now() + Duration::from_millis(20);
            block_on(async {
                let mut first = pin!(Sleep::until(deadline));
                let mut second = pin!(Sleep::until(deadline));
                poll_fn(|cx| {
                    let _ = first.as_mut().poll(cx);
                    second.as_mut().poll(cx)
                })
                .await;
            });
            // The first dropped while the second waits, and the second not
            // polled again until its timer wakes the call.
            let deadline = Instant::now() + Duration::from_millis(20);
            block_on(async {
                let mut second = pin!(Sleep::until(deadline));
                let mut first = Some(Box::pin(Sleep::until(deadline)));
                poll_fn(|cx| {
                    let ready = second.as_mut().poll(cx);
                    if let Some(mut first) = first.take() {
                        assert!(first.as_mut().poll(cx).is_pending());
                    }
                    ready
                })
                .await;
            });
        });
    }

    /// A sleep registered in one `block_on` call and polled in `later`'s,
    /// beside a new sleep with the same deadline registered first; `keep`
    /// says which of the two the call then waits for, the other being
    /// dropped at once. Neither may lose the other's timer.
    fn carried_and_fresh(carried: Pin<Box<Sleep>>, deadline: Instant, keep_carried: bool) {
        block_on(async move {
            let mut fresh = Some(Box::pin(Sleep::until(deadline)));
            let mut carried = Some(carried);
            let mut first = true;
            poll_fn(|cx| {
                if !first {
                    // Woken: by the kept sleep's timer, the only one left.
                    return Poll::Ready(());
                }
                first = false;
                for sleep in [&mut fresh, &mut carried].into_iter().flatten() {
                    assert!(sleep.as_mut().poll(cx).is_pending());
                }
                if keep_carried {
                    fresh = None;
                } else {
                    carried = None;
                }
                Poll::Pending
            })
            .await;
        });
    }

    #[test]
    fn a_sleep_carried_into_another_call_keeps_its_own_timer() {
        for keep_carried in [false, true] {
            within_5s(move || {
                let deadline = Instant::now() + Duration::from_millis(30);
                let mut carried = Box::pin(Sleep::until(deadline));
                block_on(poll_fn(|cx| {
                    assert!(carried.as_mut().poll(cx).is_pending());
                    Poll::Ready(())
                }));
                carried_and_fresh(carried, deadline, keep_carried);
            });
        }
        // From one thread's first call to another thread's first call:
        // the calls are told apart by their threads.
        within_5s(|| {
            let deadline = Instant::now() + Duration::from_millis(30);
            let carried = thread::spawn(move || {
                let mut carried = Box::pin(Sleep::until(deadline));
                block_on(poll_fn(|cx| {
                    assert!(carried.as_mut().poll(cx).is_pending());
                    Poll::Ready(())
                }));
                carried
            })
            .join()
            .unwrap();
            thread::spawn(move || carried_and_fresh(carried, deadline, false))
                .join()
                .unwrap();
        });
    }

    #[test]
    fn a_sleep_dropped_or_left_behind_leaves_no_timer() {
        block_on(async {
            {
                let mut dropped = pin!(Sleep::until(Instant::now() + Duration::from_secs(60)));
                poll_fn(|cx| {
                    assert!(dropped.as_mut().poll(cx).is_pending());
                    Poll::Ready(())
                })
                .await;
                assert_eq!(timers_held(), 1);
            }
            assert_eq!(timers_held(), 0, "a dropped sleep unregisters");
        });
        let mut left = Box::pin(Sleep::until(Instant::now() + Duration::from_secs(60)));
        block_on(poll_fn(|cx| {
            assert!(left.as_mut().poll(cx).is_pending());
            Poll::Ready(())
        }));
        assert_eq!(timers_kept(), 0, "a call's timers go with it");
    }

    #[test]
    fn a_sleep_wakes_the_waker_of_its_last_poll() {
        // Inside block_on: polled with two wakers in turn, then the call
        // waits for a later deadline of its own.
        let (first, last) = (Arc::new(Flag::default()), Arc::new(Flag::default()));
        let deadline = Instant::now() + Duration::from_millis(20);
        let mut sleep = pin!(Sleep::until(deadline));
        let mut after = pin!(Sleep::until(deadline + Duration::from_millis(30)));
        let mut polled = false;
        block_on(poll_fn(|cx| {
            if !polled {
                polled = true;
                for flag in [&first, &last] {
                    let waker = Waker::from(flag.clone());
                    assert!(sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
                }
            }
            after.as_mut().poll(cx)
        }));
        assert!(last.woken() && !first.woken());
        // Outside block_on (a worker thread waits for it): the same.
        assert_wakes_the_waker_of_its_last_poll(pin!(Sleep::until(
            Instant::now() + Duration::from_millis(20)
        )));
    }
}
