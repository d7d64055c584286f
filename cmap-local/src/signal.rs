//! A one-thread wake-up: a flag and a waker, in `Cell`s. What a
//! multi-threaded pool needs atomics and `event-listener` for takes two
//! fields here, since every party runs on the same thread.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

/// Fired once or many times; [`wait`](Signal::wait) returns once it has
/// been fired since the last wait returned.
#[derive(Default)]
pub(crate) struct Signal {
    fired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Signal {
    pub(crate) fn fire(&self) {
        self.fired.set(true);
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    /// Waits until fired, and consumes the firing.
    pub(crate) async fn wait(&self) {
        poll_fn(|cx| {
            if self.fired.replace(false) {
                return Poll::Ready(());
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
    }
}

/// Where the outcome of one queued checkout lands, for its `get()` future.
pub(crate) struct Slot<T> {
    outcome: RefCell<Option<T>>,
    waker: RefCell<Option<Waker>>,
}

impl<T> Slot<T> {
    pub(crate) fn new() -> Slot<T> {
        Slot {
            outcome: RefCell::new(None),
            waker: RefCell::new(None),
        }
    }

    pub(crate) fn fill(&self, outcome: T) {
        *self.outcome.borrow_mut() = Some(outcome);
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    pub(crate) fn take(&self) -> Option<T> {
        self.outcome.borrow_mut().take()
    }

    pub(crate) fn register(&self, waker: &Waker) {
        let mut slot = self.waker.borrow_mut();
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }
}
