//! Time: `Input::Timeout`, and the driver's clock moving before it
//! (`Step::Advance`, `Step::Nudge`, `Step::FireTimer`) or before a
//! checkout (`Step::AtIdleEdge`), or alone (`Step::Jump`).

use std::time::{Duration, Instant};

use cmap_core::Input;

use crate::model::{CState, Sim};
use crate::steps::{Drawn, Step};

impl Sim {
    /// `Input::Timeout` at `at`: the driver's timer fires (with a stale
    /// `at`, a spurious call with an old `now`).
    pub(crate) fn timeout(&mut self, at: Instant) -> Result<(), String> {
        let r = self.handle_plain(at, Input::Timeout)?;
        ensure!(r.is_ok(), "timeout at {at:?}: {r:?}");
        let elapsed = self.elapsed();
        self.log(|| format!("timeout at +{elapsed:?}"));
        self.after(true)
    }

    /// `Step::Advance`, `Step::Nudge`: time passes, then the timer fires.
    pub(crate) fn advance(&mut self, by: Duration) -> Result<(), String> {
        self.wall += by;
        self.timeout(self.wall)
    }

    /// `Step::FireTimer`: the timer fires at `poll_timeout` (or 1 ns
    /// before).
    pub(crate) fn fire_timer(&mut self, early: bool) -> Result<(), String> {
        let at = self.pool.poll_timeout().unwrap_or(self.wall);
        let at = if early {
            at.checked_sub(Duration::from_nanos(1)).unwrap_or(at)
        } else {
            at
        };
        self.wall = self.wall.max(at);
        self.timeout(self.wall)
    }

    /// `Step::Jump`: the clock moves without the timer firing.
    pub(crate) fn jump(&mut self, ms: u64) -> Result<(), String> {
        self.wall += Duration::from_millis(ms);
        self.log(|| format!("jump {ms}"));
        self.after(false)
    }

    /// `Step::AtIdleEdge`: the clock moves beside the idle edge of the
    /// connection made available last, and a checkout follows.
    pub(crate) fn at_idle_edge(&mut self, offset_ns: i64) -> Result<(), String> {
        let latest = self
            .conns
            .iter()
            .filter(|c| c.state == CState::Pooled)
            .map(|c| c.pooled_since)
            .max();
        let (Some(since), Some(max)) = (latest, self.opts.max_idle_ms) else {
            return self.after(false);
        };
        let edge = since + Duration::from_millis(max);
        let at = if offset_ns < 0 {
            edge - Duration::from_nanos(offset_ns.unsigned_abs())
        } else {
            edge + Duration::from_nanos(offset_ns as u64)
        };
        self.wall = self.wall.max(at);
        self.log(|| format!("to the idle edge {offset_ns:+} ns"));
        self.step(&Step::Input(Drawn::check_out()))
    }
}
