//! Connections coming back: `Input::CheckIn` (or
//! `handle_check_in_direct`), `Input::Detach`, `Step::WrongPool`.

use std::time::Instant;

use cmap_core::{Action, ClosedReason, HandOver, HandleError, Handled, Input};

use crate::model::{Arrival, CState, Sim};
use crate::steps::{Drawn, DIRECT, ERRORED};
use crate::support::Conn;

impl Sim {
    /// `Input::CheckIn`: a held connection goes back, errored or not;
    /// `DIRECT`: through `handle_check_in_direct`, the only entry that
    /// returns a hand-over to a waiter, judged as the `Deliver` it stands
    /// for (the same input: `Input::CheckIn` says why).
    pub(crate) fn check_in(&mut self, now: Instant, drawn: Drawn) -> Result<(), String> {
        if self.held.is_empty() {
            return self.after(false);
        }
        let (errored, direct) = (drawn.has(ERRORED), drawn.has(DIRECT));
        let mut c = self.held.swap_remove(drawn.pick % self.held.len());
        if errored {
            c.mark_errored();
        }
        let id = c.id().0;
        let interrupted = self.conn(id)?.state == CState::Held { interrupted: true };
        let over = if interrupted {
            Some(false)
        } else {
            self.over_size_with_arrival(now)
        };
        let to = if interrupted {
            CState::Disposing
        } else {
            CState::Pooled
        };
        self.move_conn(id, &[CState::Held { interrupted }], to)?;
        self.checking_in = Some((id, errored));
        // Spec: closed when perished or the pool is closed, made
        // available otherwise; beyond it, closed while the pool
        // holds more than maxPoolSize. (A lifetime is jittered: a
        // connection otherwise fit is not judged.)
        let perished = errored || self.closed || self.is_stale(id);
        let must_close = perished || over == Some(true);
        if !interrupted && (must_close || (over == Some(false) && self.opts.lifetime.is_none())) {
            self.check_in_verdict = Some((id, must_close));
        }
        // Counted bad only when closed as errored, not for the size.
        let bad = if interrupted || self.closed || !errored {
            Some(0)
        } else {
            over.map(|over| u64::from(!over))
        };
        self.arrival = Some(Arrival {
            id,
            over,
            delivers: self.delivers,
            returns_bad: Some((self.pool.stats().returns_bad, bad)),
        });
        let r = if direct {
            let timer = self.pool.poll_timeout();
            let r = self.pool.handle_check_in_direct(now, c);
            self.told(now);
            self.timer_not_moved_earlier(timer)?;
            r.map(|handed| {
                if let Some(HandOver { waiter, connection }) = handed {
                    self.served_directly = Some(Action::Deliver { waiter, connection });
                }
            })
            .map_err(|e| format!("{e:?}"))
        } else {
            match self.handle(now, Input::CheckIn(c))? {
                Ok(Handled::Done) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        };
        self.log(|| format!("check in {id} errored={errored} direct={direct} -> {}", r.is_ok()));
        ensure!(r.is_ok(), "check in of {id} refused: {r:?}");
        self.after(false)
    }

    /// `Input::Detach`: a held connection leaves the pool for good.
    pub(crate) fn detach(&mut self, now: Instant, pick: usize) -> Result<(), String> {
        if self.held.is_empty() {
            return self.after(false);
        }
        let c = self.held.swap_remove(pick % self.held.len());
        let id = c.id().0;
        let interrupted = self.conn(id)?.state == CState::Held { interrupted: true };
        self.move_conn(id, &[CState::Held { interrupted }], CState::Closed)?;
        self.closing = Some((id, ClosedReason::Detached));
        if !interrupted {
            self.count_closed(id)?;
        }
        let r = self.handle(now, Input::Detach(c))?;
        self.log(|| format!("detach {id} -> {}", r.is_ok()));
        match r {
            Ok(Handled::Detached(conn)) => ensure!(conn == Conn(id), "detach of {id} gave back {conn:?}"),
            other => return Err(format!("detach of {id}: {other:?}")),
        }
        self.after(false)
    }

    /// `Step::WrongPool`: a held connection checked in to (or detached
    /// from) another pool, which refuses it and hands it back untouched.
    pub(crate) fn wrong_pool(&mut self, now: Instant, pick: usize, detach: bool) -> Result<(), String> {
        if self.held.is_empty() {
            return self.after(false);
        }
        let index = pick % self.held.len();
        let c = self.held.swap_remove(index);
        let id = c.id();
        let input = if detach {
            Input::Detach(c)
        } else {
            Input::CheckIn(c)
        };
        let r = self.other.handle(now, input);
        ensure!(
            self.other.poll_output().is_none(),
            "a refused connection made outputs"
        );
        let err = match r {
            Err(HandleError::CheckIn(err)) => err,
            other => return Err(format!("another pool took connection {id}: {other:?}")),
        };
        let c = err.into_connection();
        ensure!(c.id() == id, "a refused connection came back as another");
        self.held.push(c);
        self.log(|| format!("wrong pool {id} detach={detach}"));
        self.after(false)
    }
}
