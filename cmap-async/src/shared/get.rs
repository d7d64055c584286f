//! Taking connections out: `get()` (a checkout, then the manager's check),
//! and the checks psycopg_pool offers beyond the spec built on it: waiting
//! until the pool is ready (`open(wait=True)`), checking every idle
//! connection now (`check()`). The checkout future: `checkout.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_core::{CheckOutError, Pooled, SharedError, TimeoutContext, Wait};

use super::Shared;
use crate::checkout::{Checking, Checkout};
use crate::error::GetError;
use crate::manager::ManageConnection;
use crate::panics::Hook;
use crate::readiness::{IdleCheck, NotReadyError};
use crate::runtime::Runtime;
use crate::util::{race_lazy, Either};

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
    /// One checkout, with no check after it, waiting at most `timeout`
    /// (`None`: no limit).
    pub(crate) fn check_out(&self, timeout: Option<Duration>) -> Checkout<'_, M, R> {
        Checkout::new(self, Wait::at_most(timeout))
    }

    /// Checks out a connection that passes the manager's check, waiting at
    /// most `timeout` in all (`None`: no limit). The caller puts it in a
    /// guard.
    pub(crate) async fn get(&self, timeout: Option<Duration>) -> Result<Pooled<M::Connection>, GetError> {
        let mut wait = Wait::at_most(timeout);
        let mut issued_before = None;
        loop {
            let mut checkout = Checkout::new(self, wait);
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
            wait = checkout.wait;
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
            let deadline = match wait {
                Wait::Until(deadline) => deadline,
                Wait::For(_) => None,
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

    /// Waits until the pool holds minPoolSize open connections (idle or
    /// in use), or at least one (a checkout, with minPoolSize 0), at most
    /// `timeout`.
    pub(crate) async fn wait_ready(&self, timeout: Duration) -> Result<(), NotReadyError> {
        let started = self.rt.now();
        let deadline = started.checked_add(timeout);
        let wanted = self.lock().core.options().min_pool_size() as usize;
        if wanted == 0 {
            // Nothing opens by itself: one checkout proves the server
            // answers (and leaves its connection idle).
            return match self.get(Some(timeout)).await {
                Ok(conn) => {
                    self.check_in(conn);
                    Ok(())
                }
                Err(_) => Err(self.not_ready(1, started)),
            };
        }
        let ready = |s: &cmap_core::Status| s.available + s.in_use >= wanted;
        if self.wait_for(&self.established, deadline, ready).await {
            Ok(())
        } else {
            Err(self.not_ready(wanted, started))
        }
    }

    fn not_ready(&self, wanted: usize, started: std::time::Instant) -> NotReadyError {
        let waited = self.rt.now().saturating_duration_since(started);
        NotReadyError::of(&self.lock().core, wanted, waited)
    }

    /// Checks every connection idle now with the manager's check, all
    /// within `timeout`: each is taken out of the pool (so that the next
    /// one taken is another), the good ones go back together at the end,
    /// and the bad ones, or one whose check outlives the timeout, are
    /// closed.
    pub(crate) async fn check_idle(&self, timeout: Duration) -> IdleCheck {
        let deadline = self.rt.now().checked_add(timeout);
        let idle = self.lock().core.status().available;
        let mut report = IdleCheck::default();
        let mut good = Vec::with_capacity(idle);
        for _ in 0..idle {
            let Some(conn) = self.take_available().await else {
                break;
            };
            report.checked += 1;
            let mut checking = Checking::new(self, conn);
            let passed = matches!(self.check(checking.connection(), deadline).await, Some(Ok(())));
            if passed {
                good.push(checking.pass());
            } else {
                // Dropped unpassed: checked in marked errored, closed.
                drop(checking);
                report.closed += 1;
            }
        }
        for conn in good {
            self.check_in(conn);
        }
        report
    }
}
