//! The checkout future `get()` awaits, cancellation-safe at every await,
//! and the guard of a connection under the manager's check (`get()`
//! itself: `shared/get.rs`).
//!
//! A checkout starts at its first poll. If the core serves it in that same
//! input (a connection is available), the connection is returned at once:
//! no slot, no waker. Otherwise it waits in a slot, completed by whichever
//! input drains its `Deliver` or `Fail` (once that input's lock is
//! released and its events are out). Its deadline is the core's: the timer
//! task fails it on time. The input cycle its first poll runs, step by
//! step: `shared/cycle.rs`; the lock order: `shared/mod.rs`.
//!
//! Dropped while queued, it cancels its waiter; dropped after its
//! connection was delivered but before it took it, it checks that
//! connection back in. Either way no capacity and no connection is lost,
//! and an establishment it started goes on for the next checkout.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use cmap_core::{CheckOutError, ConnectionId, Pooled, Wait, WaiterId};

use crate::clock::CoarseNow;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::{Ended, Shared};
use crate::slot::{lock_slot, SharedSlot, Slot};

enum State<C> {
    Start,
    Queued(WaiterId, SharedSlot<C>),
    Done,
}

/// `wait` for a checkout whose `now` is `read`: a timeout is pushed back by
/// the reading's lag, so that it never ends early.
#[inline]
fn lagging(wait: Wait, read: CoarseNow) -> Wait {
    match wait {
        Wait::For(timeout) => Wait::For(timeout.saturating_add(read.lag)),
        until => until,
    }
}

/// One checkout from the core.
pub(crate) struct Checkout<'a, M: ManageConnection, R: Runtime> {
    shared: &'a Shared<M, R>,
    /// How long it may wait: a timeout counts from the `now` of its
    /// check-out input (plus its lag, when that `now` is a coarse reading:
    /// never early), so a zero timeout still gets an available connection.
    pub(crate) wait: Wait,
    /// The newest connection the pool had asked for when it started (set
    /// at the first poll): a connection with a later id was made after.
    pub(crate) issued_before: Option<ConnectionId>,
    state: State<M::Connection>,
}

impl<'a, M: ManageConnection, R: Runtime> Checkout<'a, M, R> {
    /// A checkout, not started yet, waiting at most as `wait` says.
    #[inline]
    pub(crate) fn new(shared: &'a Shared<M, R>, wait: Wait) -> Self {
        Checkout {
            shared,
            wait,
            issued_before: None,
            state: State::Start,
        }
    }

    /// Dropped while queued: its waiter cancelled, or its connection, if
    /// one was delivered meanwhile, checked back in.
    #[cold]
    fn cancel(&self, id: WaiterId, slot: SharedSlot<M::Connection>) {
        let shared = self.shared;
        // From now on an outcome that comes goes back to the pool (see
        // `Inner::complete`).
        let taken = std::mem::replace(&mut *lock_slot(&slot), Slot::Taken);
        match taken {
            Slot::Done(Ok(connection)) => shared.check_in(connection),
            Slot::Done(Err(_)) | Slot::Taken => {}
            Slot::Waiting(_) => shared.input(|inner, now| {
                if inner.waiters.remove(&id).is_some() {
                    // Still queued in the core: not completed yet (a
                    // completion removes the slot under this lock).
                    let _ = inner.core.handle_cancel(now, id);
                }
                // Otherwise an input completed it since: finding the slot
                // taken, it checks the connection back in.
            }),
        }
    }
}

impl<M: ManageConnection, R: Runtime> Future for Checkout<'_, M, R> {
    type Output = Result<Pooled<M::Connection>, CheckOutError>;

    // Always inlined, as are `Cycle::check_out`, `Shared::read_clock` and
    // `Shared::lock` inside it: left to the inliner, the first poll and
    // its clock read go out of line, a call on every checkout (the cost
    // per cycle: docs/benchmarks.md, `bench instructions`).
    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let shared = self.shared;
        match &self.state {
            State::Start => {
                let mut cycle = shared.cycle(shared.read_clock(), true);
                let wait = lagging(self.wait, cycle.read);
                if M::CHECKS {
                    // For the check and the checkouts after a failed one
                    // (`Shared::get`); nothing else reads them.
                    self.wait = Wait::Until(wait.deadline(cycle.read.at));
                    self.issued_before = cycle.inner().last_issued;
                }
                match cycle.check_out(wait, cx.waker()) {
                    Ended::Done(outcome) => {
                        self.state = State::Done;
                        Poll::Ready(outcome)
                    }
                    Ended::Queued(id, slot) => {
                        self.state = State::Queued(id, slot);
                        Poll::Pending
                    }
                }
            }
            State::Queued(_, slot) => {
                // Its own slot: the pool's lock is not needed to take it.
                let mut slot = lock_slot(slot);
                match &mut *slot {
                    Slot::Waiting(waker) => {
                        if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                            *waker = Some(cx.waker().clone());
                        }
                        Poll::Pending
                    }
                    Slot::Done(_) => {
                        let Slot::Done(outcome) = std::mem::replace(&mut *slot, Slot::Taken) else {
                            unreachable!("the slot was just seen done");
                        };
                        drop(slot);
                        self.state = State::Done;
                        Poll::Ready(outcome)
                    }
                    Slot::Taken => unreachable!("a slot is taken only by its own future"),
                }
            }
            State::Done => panic!("checkout polled after completion"),
        }
    }
}

impl<M: ManageConnection, R: Runtime> Drop for Checkout<'_, M, R> {
    // Inlined: most checkouts end served (`Done`), with nothing to write back.
    #[inline]
    fn drop(&mut self) {
        if let State::Queued(id, slot) = std::mem::replace(&mut self.state, State::Done) {
            self.cancel(id, slot);
        }
    }
}

/// A connection under the manager's check. Dropped before it passed (the
/// check failed, or the `get()` future was dropped during it), its state is
/// unknown: it is checked in marked errored, and the pool closes it.
pub(crate) struct Checking<'a, M: ManageConnection, R: Runtime> {
    shared: &'a Shared<M, R>,
    conn: Option<Pooled<M::Connection>>,
}

impl<'a, M: ManageConnection, R: Runtime> Checking<'a, M, R> {
    pub(crate) fn new(shared: &'a Shared<M, R>, conn: Pooled<M::Connection>) -> Self {
        Checking {
            shared,
            conn: Some(conn),
        }
    }

    pub(crate) fn connection(&mut self) -> &mut M::Connection {
        self.conn.as_mut().expect("present until it passed")
    }

    /// It passed: the caller takes it.
    pub(crate) fn pass(mut self) -> Pooled<M::Connection> {
        self.conn.take().expect("present until it passed")
    }
}

impl<M: ManageConnection, R: Runtime> Drop for Checking<'_, M, R> {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            conn.mark_errored();
            self.shared.check_in(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_timeout_from_a_coarse_reading_covers_its_lag() {
        let (at, lag, timeout) = (
            Instant::now(),
            Duration::from_millis(8),
            Duration::from_millis(100),
        );
        let coarse = CoarseNow { at, lag };
        assert_eq!(lagging(Wait::For(timeout), coarse), Wait::For(timeout + lag));
        assert_eq!(
            lagging(Wait::For(timeout), CoarseNow::exact(at)),
            Wait::For(timeout)
        );
        let until = Wait::Until(Some(at));
        assert_eq!(lagging(until, coarse), until, "a set deadline stays");
    }
}
