//! Operational checks beyond the spec, as psycopg_pool offers them:
//! waiting until the pool is ready for traffic (`open(wait=True)`,
//! HikariCP's `initializationFailTimeout`), and checking every idle
//! connection now (`check()`).

use std::time::Duration;

use cmap_core::{EstablishError, TimeoutContext};

use crate::checkout::Checking;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::Shared;

/// The pool did not hold the connections asked for in time: from
/// [`Pool::wait_ready`](crate::Pool::wait_ready), and the source of
/// [`BuildError::NotReady`](crate::BuildError::NotReady).
#[derive(Debug, Clone, thiserror::Error)]
#[error("the pool did not reach {wanted} open connection(s){context}")]
pub struct NotReadyError {
    /// How many connections were waited for: minPoolSize, or 1 with none.
    pub wanted: usize,
    /// How long it waited, the pool's counts then, and the last
    /// establishment failure (the cause, when the server refused).
    pub context: TimeoutContext,
}

/// Equal when they report the same: counts, wait, and the same cause's
/// text (an establishment error holds the manager's error, which need not
/// compare), so that `BuildError` stays comparable.
impl PartialEq for NotReadyError {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.context, &other.context);
        self.wanted == other.wanted
            && (a.waited, a.max_pool_size, a.status) == (b.waited, b.max_pool_size, b.status)
            && a.last_error.as_ref().map(ToString::to_string)
                == b.last_error.as_ref().map(ToString::to_string)
    }
}

impl Eq for NotReadyError {}

impl NotReadyError {
    /// The error of a pool that did not reach `wanted` connections after
    /// waiting `waited`: `core`'s counts and last establishment failure
    /// now. For a driver of its own, as every driver here builds it.
    pub fn of<C>(core: &cmap_core::Pool<C>, wanted: usize, waited: Duration) -> NotReadyError {
        NotReadyError {
            wanted,
            context: TimeoutContext {
                waited,
                max_pool_size: core.options().max_pool_size(),
                status: core.status(),
                last_error: core.last_establish_error(),
            },
        }
    }

    /// The last establishment failure: why no connection came.
    pub fn last_error(&self) -> Option<&EstablishError> {
        self.context.last_error.as_ref()
    }
}

/// What [`Pool::check_idle`](crate::Pool::check_idle) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdleCheck {
    /// Idle connections checked.
    pub checked: usize,
    /// Those that failed the check (or ran out of time) and were closed.
    pub closed: usize,
}

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use cmap_core::{PoolState, Status};

    fn not_ready(wanted: usize, waited_ms: u64, available: usize, cause: Option<&str>) -> NotReadyError {
        NotReadyError {
            wanted,
            context: TimeoutContext {
                waited: Duration::from_millis(waited_ms),
                max_pool_size: 10,
                status: Status {
                    state: PoolState::Ready,
                    generation: 0,
                    total: available,
                    available,
                    pending: 0,
                    in_use: 0,
                    waiting: 0,
                },
                last_error: cause.map(|c| EstablishError::network(std::io::Error::other(c.to_owned()))),
            },
        }
    }

    #[test]
    fn not_ready_errors_are_equal_when_they_report_the_same() {
        let refused = not_ready(2, 100, 1, Some("connection refused"));
        assert_eq!(refused, not_ready(2, 100, 1, Some("connection refused")));
        for other in [
            not_ready(3, 100, 1, Some("connection refused")),
            not_ready(2, 200, 1, Some("connection refused")),
            not_ready(2, 100, 0, Some("connection refused")),
            not_ready(2, 100, 1, Some("timed out")),
            not_ready(2, 100, 1, None),
        ] {
            assert_ne!(refused, other);
        }
    }
}
