//! `get()`: one checkout, its deadline, its check, and what a dropped
//! future leaves behind (nothing: a queued checkout is withdrawn, a
//! connection already in its slot goes back).

use std::future::poll_fn;
use std::panic::Location;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use cmap_async::driver::catch_panic_in;
use cmap_async::{GetError, Hook, IdleCheck};
use cmap_core::{Pooled, SharedError, WaiterId};

use crate::guard::PooledConnection;
use crate::manager::ManageConnection;
use crate::runtime::LocalRuntime;
use crate::shared::{Outcome, QueuedCheckOut, Shared, Wait};
use crate::signal::Slot;

/// A queued checkout; withdrawn if dropped before its outcome is taken.
struct Queued<'a, M: ManageConnection, R: LocalRuntime> {
    pool: &'a Shared<M, R>,
    waiter: WaiterId,
    slot: Rc<Slot<Outcome<M::Connection>>>,
    done: bool,
}

impl<M: ManageConnection, R: LocalRuntime> Drop for Queued<'_, M, R> {
    fn drop(&mut self) {
        if !self.done {
            self.pool.cancel(self.waiter, &self.slot);
        }
    }
}

impl<M: ManageConnection, R: LocalRuntime> Shared<M, R> {
    /// One checkout through the core: served at once, or queued until its
    /// slot is filled (the core fails it at its deadline).
    async fn check_out_once(&self, now: Instant, wait: Wait) -> Outcome<M::Connection> {
        match self.check_out(now, wait).0 {
            Ok(conn) => Ok(conn),
            Err(queued) => self.queued(queued).await,
        }
    }

    /// The outcome of a checkout the core queued, once its slot is filled.
    async fn queued(&self, (waiter, slot): QueuedCheckOut<M::Connection>) -> Outcome<M::Connection> {
        let mut queued = Queued {
            pool: self,
            waiter,
            slot,
            done: false,
        };
        poll_fn(|cx| match queued.slot.take() {
            Some(outcome) => {
                queued.done = true;
                Poll::Ready(outcome)
            }
            None => {
                queued.slot.register(cx.waker());
                Poll::Pending
            }
        })
        .await
    }

    /// Checks every connection idle now with the manager's check, all
    /// within `timeout`: each is taken out of the pool (so that the next
    /// one taken is another), the good ones go back together at the end,
    /// and the bad ones, or one whose check outlives the timeout, are
    /// closed (as `cmap_async::Pool::check_idle`).
    pub(crate) async fn check_idle(self: Rc<Self>, timeout: Duration) -> IdleCheck {
        let deadline = self.rt.now().checked_add(timeout);
        let idle = self.core.borrow().status().available;
        let mut report = IdleCheck::default();
        let mut good = Vec::with_capacity(idle);
        for _ in 0..idle {
            // Only an available connection: a zero wait establishes none.
            let at = self.rt.now();
            let Ok(conn) = self.check_out_once(at, Wait::For(Duration::ZERO)).await else {
                break;
            };
            report.checked += 1;
            let mut guard = PooledConnection::new(self.clone(), conn);
            if matches!(self.checked(&mut guard, deadline).await, Some(Ok(()))) {
                good.push(guard);
            } else {
                guard.mark_broken();
                report.closed += 1;
            }
        }
        drop(good);
        report
    }

    /// The manager's check of `guard`'s connection, bounded by `deadline`:
    /// `None` when the deadline came first; a check that panicked failed
    /// with [`Panicked`](cmap_async::Panicked).
    async fn checked(
        &self,
        guard: &mut PooledConnection<M, R>,
        deadline: Option<Instant>,
    ) -> Option<Result<(), SharedError>> {
        let check = async {
            match catch_panic_in(&*self.events.panics, Hook::Check, || {
                self.manager.check(guard, deadline)
            })
            .await
            {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(Arc::new(error) as SharedError),
                Err(panicked) => Err(Arc::new(panicked) as SharedError),
            }
        };
        match deadline {
            Some(deadline) => {
                let timed_out = async {
                    self.rt.sleep_until(deadline).await;
                    None
                };
                futures_lite::future::or(async { Some(check.await) }, timed_out).await
            }
            None => Some(check.await),
        }
    }

    /// `get()`: checkouts until one passes the manager's check, all within
    /// one deadline; the guard watched for leaks as checked out by
    /// `caller`, when leak detection is on.
    pub(crate) async fn get(
        self: Rc<Self>,
        wait: Wait,
        caller: &'static Location<'static>,
    ) -> Result<PooledConnection<M, R>, GetError> {
        // One clock reading for the checkout and its deadline.
        let started = self.rt.now();
        // The common checkout, served at once, awaits nothing.
        let (conn, deadline) = match self.check_out(started, wait) {
            (Ok(conn), deadline) => (conn, deadline),
            (Err(queued), deadline) => (self.queued(queued).await?, deadline),
        };
        if !M::CHECKS {
            // The handle moves into the guard: no count taken and dropped.
            let mut guard = PooledConnection::new(self, conn);
            guard.track(caller);
            return Ok(guard);
        }
        let mut conn: Pooled<M::Connection> = conn;
        loop {
            let mut guard = PooledConnection::new(self.clone(), conn);
            match self.checked(&mut guard, deadline).await {
                Some(Ok(())) => {
                    guard.track(caller);
                    return Ok(guard);
                }
                Some(Err(error)) => {
                    guard.mark_broken();
                    // Made for this very checkout: a new one would fail
                    // the same way.
                    if guard.created_at() >= started {
                        return Err(GetError::CheckFailed(error));
                    }
                }
                // The deadline passed during the check: the next checkout
                // times out in the core, with its event.
                None => guard.mark_broken(),
            }
            drop(guard);
            conn = self.check_out_once(self.rt.now(), Wait::Until(deadline)).await?;
        }
    }
}
