//! Checkouts: `Cmd::CheckOut`, `Cmd::CheckOutUntil`, `Cmd::Cancel`.

use std::time::{Duration, Instant};

use cmap_core::{Action, CheckOut, UsageError, WaiterId};

use crate::model::{Sim, WState};
use crate::CancelTarget;

impl Sim {
    /// `Cmd::CheckOut`: `handle_check_out` with a `now` `stale_ms` behind the
    /// clock; the waiter gets the options' timeout from that `now`.
    pub(crate) fn check_out(&mut self, now: Instant, stale_ms: u64) -> Result<(), String> {
        let at = now.checked_sub(Duration::from_millis(stale_ms)).unwrap_or(now);
        let before = self.pool.state();
        let w = self.pool.handle_check_out(at);
        self.told(at);
        self.expect_immediate_failure(before, w);
        let deadline = self.wait_queue_timeout.and_then(|t| at.checked_add(t));
        self.log(|| format!("check out -> {w}"));
        self.new_waiter(w, deadline)?;
        self.unqueued = Some(w.0);
        self.after(false)
    }

    /// `Cmd::CheckOutUntil`: `handle_check_out_until`, or
    /// `handle_check_out_direct`, with a deadline `offset_ms` from now.
    pub(crate) fn check_out_until(
        &mut self,
        now: Instant,
        offset_ms: Option<i64>,
        direct: bool,
    ) -> Result<(), String> {
        let deadline = offset_ms.and_then(|o| {
            let d = Duration::from_millis(o.unsigned_abs());
            if o >= 0 {
                now.checked_add(d)
            } else {
                now.checked_sub(d)
            }
        });
        let before = self.pool.state();
        let w = if direct {
            match self.pool.handle_check_out_direct(now, deadline) {
                CheckOut::Later(w) => w,
                CheckOut::Ready(connection) => {
                    // The id it used is the next one.
                    let waiter = WaiterId(self.waiters.len() as u64 + 1);
                    self.served_directly = Some(Action::Deliver { waiter, connection });
                    waiter
                }
            }
        } else {
            self.pool.handle_check_out_until(now, deadline)
        };
        self.told(now);
        self.expect_immediate_failure(before, w);
        self.log(|| format!("check out until {offset_ms:?} (direct: {direct}) -> {w}"));
        self.new_waiter(w, deadline)?;
        self.unqueued = Some(w.0);
        self.after(false)
    }

    /// `Cmd::Cancel`: withdraws a queued checkout, or one already resolved or
    /// never issued (refused).
    pub(crate) fn cancel(&mut self, now: Instant, pick: usize, target: CancelTarget) -> Result<(), String> {
        let w = match target {
            CancelTarget::Waiting => self.waiting.iter().nth(pick % self.waiting.len().max(1)).copied(),
            CancelTarget::Resolved => {
                let n = self.resolved.len();
                (n > 0).then(|| self.resolved[n - 1 - pick % n.min(8)])
            }
            CancelTarget::Unknown => Some(self.waiters.len() as u64 + 1 + (pick % 3) as u64),
        };
        let Some(w) = w.map(WaiterId) else {
            return self.after(false);
        };
        // A waiter whose deadline the late `now` passes times out in
        // this very call, before the cancel looks for it.
        let cancellable = self.waiting.contains(&w.0)
            && self.waiters[w.0 as usize - 1]
                .deadline
                .is_none_or(|d| d > now.max(self.pool_now));
        let r = self.pool.handle_cancel(now, w);
        self.told(now);
        self.log(|| format!("cancel {w} -> {r:?}"));
        if cancellable {
            ensure!(r.is_ok(), "cancel of queued {w}: {r:?}");
            // What the call did before it withdrew the checkout (a
            // backoff that ended may have started a connection for
            // it) comes out first.
            self.drain()?;
            self.resolve(w, WState::Cancelled)?;
            self.cancels += 1;
        } else {
            ensure!(
                r == Err(UsageError::UnknownWaiter(w)),
                "cancel of {w}, not queued: {r:?}"
            );
        }
        self.after(false)
    }
}
