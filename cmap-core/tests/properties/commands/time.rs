//! Time: `Cmd::Advance`, `Cmd::Nudge`, `Cmd::FireTimer`, `Cmd::Jump`,
//! `Cmd::StaleTimeout`, `Cmd::AtIdleEdge`.

use std::time::Duration;

use crate::model::{CState, Sim};
use crate::Cmd;

impl Sim {
    /// `Cmd::Advance`: time passes and the timer fires.
    pub(crate) fn advance(&mut self, ms: u64) -> Result<(), String> {
        self.wall += Duration::from_millis(ms);
        let fired = self.fire(self.wall);
        self.after(fired)
    }

    /// `Cmd::Nudge`: a tiny step of time, then the timer fires.
    pub(crate) fn nudge(&mut self, ns: u64) -> Result<(), String> {
        self.wall += Duration::from_nanos(ns);
        let fired = self.fire(self.wall);
        self.after(fired)
    }

    /// `Cmd::FireTimer`: the timer fires at `poll_timeout` (or 1 ns before).
    pub(crate) fn fire_timer(&mut self, early: bool) -> Result<(), String> {
        let at = self.pool.poll_timeout().unwrap_or(self.wall);
        let at = if early {
            at.checked_sub(Duration::from_nanos(1)).unwrap_or(at)
        } else {
            at
        };
        self.wall = self.wall.max(at);
        let fired = self.fire(self.wall);
        self.after(fired)
    }

    /// `Cmd::Jump`: the clock moves without the timer firing.
    pub(crate) fn jump(&mut self, ms: u64) -> Result<(), String> {
        self.wall += Duration::from_millis(ms);
        self.log(|| format!("jump {ms}"));
        self.after(false)
    }

    /// `Cmd::StaleTimeout`: a spurious timer call with an old `now`.
    pub(crate) fn stale_timeout(&mut self, ms: u64) -> Result<(), String> {
        let at = self
            .wall
            .checked_sub(Duration::from_millis(ms))
            .unwrap_or(self.wall);
        let fired = self.fire(at);
        self.after(fired)
    }

    /// `Cmd::AtIdleEdge`: the clock moves beside the idle edge of the
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
        self.step(&Cmd::CheckOut { stale_ms: 0 })
    }
}
