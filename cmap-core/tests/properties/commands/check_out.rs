//! Checkouts: `Input::CheckOut`, `Input::Cancel`.

use std::time::{Duration, Instant};

use cmap_core::{Action, CheckOut, Handled, Input, UsageError, WaiterId};

use crate::model::{Sim, WState};
use crate::steps::{CancelTarget, Drawn, DIRECT, FOREVER, UNTIL};

impl Sim {
    /// `Input::CheckOut` at `now`: with the options' timeout from `now`
    /// (as `handle_check_out`, whose `now` may be stale), or (`UNTIL`) a
    /// deadline `value` ms from now (may be in the past) or none; `DIRECT`:
    /// a checkout served at once returns its connection, judged as the
    /// `Deliver` it stands for.
    pub(crate) fn check_out(&mut self, now: Instant, drawn: Drawn) -> Result<(), String> {
        let deadline = if !drawn.has(UNTIL) {
            self.wait_queue_timeout.and_then(|t| now.checked_add(t))
        } else if drawn.has(FOREVER) {
            None
        } else {
            let d = Duration::from_millis(drawn.value.unsigned_abs());
            if drawn.value >= 0 {
                now.checked_add(d)
            } else {
                now.checked_sub(d)
            }
        };
        let direct = drawn.has(DIRECT);
        let (before, timer) = (self.pool.state(), self.pool.poll_timeout());
        let w = match self.handle(now, Input::CheckOut { deadline, direct })? {
            Ok(Handled::CheckOut(CheckOut::Later(w))) => w,
            Ok(Handled::CheckOut(CheckOut::Ready(connection))) if direct => {
                self.timer_not_moved_earlier(timer)?;
                // The id it used is the next one.
                let waiter = WaiterId(self.waiters.len() as u64 + 1);
                self.served_directly = Some(Action::Deliver { waiter, connection });
                waiter
            }
            other => return Err(format!("checkout (direct: {direct}) answered {other:?}")),
        };
        self.expect_immediate_failure(before, w);
        self.log(|| format!("check out {drawn:?} -> {w}"));
        self.new_waiter(w, deadline)?;
        self.unqueued = Some(w.0);
        self.after(false)
    }

    /// `Input::Cancel`: withdraws a queued checkout, or one already resolved or
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
        let r = self.handle_plain(now, Input::Cancel(w))?;
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
