//! `get()`: the checkout future, cancellation-safe at every await, and the
//! check that runs before a connection is handed out.
//!
//! A checkout starts at its first poll. If the core serves it in that same
//! input (a connection is available), the connection is returned at once:
//! no slot, no waker. Otherwise it waits in a slot, completed by whichever
//! input drains its `Deliver` or `Fail` (once that input's lock is
//! released and its events are out). Its deadline is the core's: the timer
//! task fails it on time. The input cycle a poll runs, step by step, and
//! the lock order: `shared.rs`'s module doc.
//!
//! Dropped while queued, it cancels its waiter; dropped after its
//! connection was delivered but before it took it, it checks that
//! connection back in. Either way no capacity and no connection is lost,
//! and an establishment it started goes on for the next checkout.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use cmap_core::{CheckOutError, ConnectionId, Pooled, SharedError, TimeoutContext, WaiterId};

use crate::clock::CoarseNow;
use crate::under_lock::{lock_slot, SharedSlot, Slot};
use crate::error::GetError;
use crate::manager::ManageConnection;
use crate::panics::Hook;
use crate::runtime::Runtime;
use crate::shared::{Ended, Shared};
use crate::util::{race_lazy, Either};

enum State<C> {
    Start,
    Queued(WaiterId, SharedSlot<C>),
    Done,
}

/// How long a checkout may wait.
#[derive(Clone, Copy)]
enum Limit {
    /// This long from the instant it starts (`None`: no limit). The
    /// deadline is taken from the very `now` of the check-out input (plus
    /// its lag, when that `now` is a coarse reading: never early), so a
    /// zero timeout still gets an available connection.
    After(Option<Duration>),
    /// Until this instant (`None`: no limit).
    Until(Option<Instant>),
}

impl Limit {
    /// The deadline of a checkout that starts at `now`: never earlier than
    /// the precise clock would have put it.
    #[inline]
    fn deadline(self, now: CoarseNow) -> Option<Instant> {
        match self {
            Limit::After(timeout) => timeout.and_then(|t| now.at.checked_add(t.checked_add(now.lag)?)),
            Limit::Until(deadline) => deadline,
        }
    }
}

/// One checkout from the core.
pub(crate) struct Checkout<'a, M: ManageConnection, R: Runtime> {
    shared: &'a Shared<M, R>,
    limit: Limit,
    /// The newest connection the pool had asked for when it started (set
    /// at the first poll): a connection with a later id was made after.
    issued_before: Option<ConnectionId>,
    state: State<M::Connection>,
}

impl<M: ManageConnection, R: Runtime> Future for Checkout<'_, M, R> {
    type Output = Result<Pooled<M::Connection>, CheckOutError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let shared = self.shared;
        match &self.state {
            State::Start => {
                let mut cycle = shared.cycle(shared.read_clock(), true);
                let deadline = self.limit.deadline(cycle.read());
                if M::CHECKS {
                    // For the check and the checkouts after a failed one
                    // (`Shared::get`); nothing else reads them.
                    self.limit = Limit::Until(deadline);
                    self.issued_before = cycle.last_issued;
                }
                cycle.check_out(deadline, cx.waker());
                match cycle.end() {
                    Ended::Done(outcome) => {
                        self.state = State::Done;
                        Poll::Ready(outcome)
                    }
                    Ended::Queued(id, slot) => {
                        self.state = State::Queued(id, slot);
                        Poll::Pending
                    }
                    Ended::NoCheckout => unreachable!("a checkout was started"),
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
    fn drop(&mut self) {
        // Most checkouts end served (`Done`): nothing to write back then.
        if !matches!(self.state, State::Queued(..)) {
            return;
        }
        let State::Queued(id, slot) = std::mem::replace(&mut self.state, State::Done) else {
            return;
        };
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

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
    /// One checkout, with no check after it, waiting at most `timeout`
    /// (`None`: no limit).
    pub(crate) fn check_out(&self, timeout: Option<Duration>) -> Checkout<'_, M, R> {
        self.checkout_within(Limit::After(timeout))
    }

    /// A checkout, not started yet, limited by `limit`.
    #[inline]
    fn checkout_within(&self, limit: Limit) -> Checkout<'_, M, R> {
        Checkout {
            shared: self,
            limit,
            issued_before: None,
            state: State::Start,
        }
    }

    /// Checks out a connection that passes the manager's check, waiting at
    /// most `timeout` in all (`None`: no limit). The caller puts it in a
    /// guard.
    pub(crate) async fn get(&self, timeout: Option<Duration>) -> Result<Pooled<M::Connection>, GetError> {
        let mut limit = Limit::After(timeout);
        let mut issued_before = None;
        loop {
            let mut checkout = self.checkout_within(limit);
            let pooled = match (&mut checkout).await {
                Ok(pooled) => pooled,
                Err(mut error) => {
                    // A retry after a failed check runs on what was left
                    // of the deadline: its timeout ends the whole wait,
                    // not only the retry's last instant.
                    if let (CheckOutError::WaitQueueTimeout { context, .. }, Some(timeout), Some(_)) =
                        (&mut error, timeout, issued_before)
                    {
                        context.waited = timeout;
                    }
                    return Err(error.into());
                }
            };
            if !M::CHECKS {
                // Nothing to check: handed out as it is.
                return Ok(pooled);
            }
            // Later attempts (after a failed check) keep the first deadline.
            limit = checkout.limit;
            let issued_before = *issued_before.get_or_insert(checkout.issued_before);
            drop(checkout);
            // A connection made for this call: its check failing is an
            // error. (By id, not by time: a coarse clock gives instants
            // that tie.)
            let fresh = Some(pooled.id()) > issued_before;
            let mut checking = Checking::new(self, pooled);
            // The checkout's one deadline covers the check too: a check
            // still running then (a round trip to a server that stopped
            // answering) is given up, and its connection closed.
            let deadline = match limit {
                Limit::Until(deadline) => deadline,
                Limit::After(_) => None,
            };
            let Some(checked) = self.check(checking.connection(), deadline).await else {
                drop(checking);
                let waited = timeout.unwrap_or_default();
                return Err(self.check_timed_out(waited).into());
            };
            let failed = match checked {
                Ok(()) => return Ok(checking.pass()),
                Err(failed) => failed,
            };
            drop(checking);
            if fresh {
                return Err(GetError::CheckFailed(failed));
            }
        }
    }
}

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
    /// Runs the manager's check on `conn`, told the checkout's `deadline`
    /// and given up at it: `None` when the deadline came first, otherwise
    /// the check's outcome (a check that panicked failed with
    /// [`Panicked`](crate::Panicked)).
    pub(crate) async fn check(
        &self,
        conn: &mut M::Connection,
        deadline: Option<Instant>,
    ) -> Option<Result<(), SharedError>> {
        let check = self
            .events
            .panics
            .guard(Hook::Check, || self.manager.check_until(conn, deadline));
        let outcome = match deadline {
            // The timer is made only if the check has to wait: most checks
            // are done at their first poll.
            Some(deadline) => match race_lazy(check, || self.rt.sleep_until(deadline)).await {
                Either::Left(outcome) => outcome,
                Either::Right(()) => return None,
            },
            None => check.await,
        };
        Some(match outcome {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(Arc::new(error)),
            Err(panicked) => Err(Arc::new(panicked)),
        })
    }

    /// An available connection, checked out now without the manager's
    /// check, or `None` if none is (a checkout with a zero timeout: it
    /// starts no connection).
    pub(crate) async fn take_available(&self) -> Option<Pooled<M::Connection>> {
        self.check_out(Some(Duration::ZERO)).await.ok()
    }

    /// The error of a checkout whose deadline passed during the manager's
    /// check: a wait-queue timeout, after its whole timeout (`waited`).
    fn check_timed_out(&self, waited: Duration) -> CheckOutError {
        let (status, last_error, max_pool_size) = self.input(|inner, _| {
            let core = &inner.core;
            (
                core.status(),
                core.last_establish_error(),
                core.options().max_pool_size(),
            )
        });
        CheckOutError::WaitQueueTimeout {
            address: self.address.clone(),
            context: Box::new(TimeoutContext {
                waited,
                max_pool_size,
                status,
                last_error,
            }),
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
    use super::*;

    #[test]
    fn a_deadline_from_a_coarse_reading_covers_its_lag() {
        let at = Instant::now();
        let lag = Duration::from_millis(8);
        let coarse = CoarseNow { at, lag };
        let timeout = Duration::from_millis(100);
        assert_eq!(
            Limit::After(Some(timeout)).deadline(coarse),
            Some(at + timeout + lag)
        );
        assert_eq!(
            Limit::After(Some(timeout)).deadline(CoarseNow::exact(at)),
            Some(at + timeout)
        );
        assert_eq!(Limit::After(None).deadline(coarse), None);
        assert_eq!(
            Limit::Until(Some(at)).deadline(coarse),
            Some(at),
            "a set deadline stays"
        );
    }
}
