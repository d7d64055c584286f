//! What the operational checks beyond the spec report (they run in
//! `shared/get.rs`): waiting until the pool is ready, checking every idle
//! connection now.

use std::time::Duration;

use cmap_core::{EstablishError, TimeoutContext};

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
