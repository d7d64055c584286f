//! One handler per command: `Sim::step` resets the step's books and
//! dispatches each `Cmd` variant to its handler, which performs the input on
//! the pool, moves the model's books, and ends with `after`: drain and judge
//! the outputs (`outputs.rs`), then the after-step checks (`checks.rs`).

use std::time::Instant;

use crate::model::Sim;
use crate::Cmd;

mod check_in;
mod check_out;
mod establish;
mod lifecycle;
mod resize;
mod time;

impl Sim {
    /// One input: resets the step's books, runs the command's handler (one
    /// per `Cmd` variant, in `commands/`), which performs the input, drains
    /// and judges the outputs and runs the after-step checks (`after`).
    pub(crate) fn step(&mut self, cmd: &Cmd) -> Result<(), String> {
        self.step_started = self.pool_now;
        self.touched.clear();
        self.step_generation = self.generation;
        self.step_clear = None;
        self.checking_in = None;
        self.closing = None;
        self.step_caused = None;
        self.step_pool_closed = false;
        self.unqueued = None;
        self.arriving = None;
        self.failure = None;
        self.gave_up_events = 0;
        self.resize = None;
        self.arrival = None;
        self.step_outputs = 0;
        self.pace_bound = self.pace.limit;
        self.step_pending = self.pending.len();
        let now = self.wall;
        match *cmd {
            Cmd::CheckOut { stale_ms } => self.check_out(now, stale_ms),
            Cmd::CheckOutUntil { offset_ms, direct } => self.check_out_until(now, offset_ms, direct),
            Cmd::CheckIn {
                pick,
                errored,
                direct,
            } => self.check_in(now, pick, errored, direct),
            Cmd::Detach { pick } => self.detach(now, pick),
            Cmd::WrongPool { pick, detach } => self.wrong_pool(now, pick, detach),
            Cmd::Established { pick, service } => self.established(now, pick, service),
            Cmd::EstablishFailed { pick, kind } => self.establish_failed(now, pick, kind),
            Cmd::LateResult { pick, ok } => self.late_result(now, pick, ok),
            Cmd::UnknownResult { ahead, ok } => self.unknown_result(now, ahead, ok),
            Cmd::Cancel { pick, target } => self.cancel(now, pick, target),
            Cmd::Clear {
                interrupt,
                service,
                wrong_mode,
            } => self.clear(now, interrupt, service, wrong_mode),
            Cmd::Ready => self.ready(now),
            Cmd::Close => self.close(now),
            Cmd::Advance { ms } => self.advance(ms),
            Cmd::Nudge { ns } => self.nudge(ns),
            Cmd::FireTimer { early } => self.fire_timer(early),
            Cmd::Jump { ms } => self.jump(ms),
            Cmd::StaleTimeout { ms } => self.stale_timeout(ms),
            Cmd::AtIdleEdge { offset_ns } => self.at_idle_edge(offset_ns),
            Cmd::Resize { min, max } => self.resize(min, max),
        }
    }

    /// The driver's timer fires at `at`; says so, for `after`.
    pub(crate) fn fire(&mut self, at: Instant) -> bool {
        self.pool.handle_timeout(at);
        self.told(at);
        let elapsed = self.elapsed();
        self.log(|| format!("timeout at +{elapsed:?}"));
        true
    }

    /// How every handler ends: the input's outputs drained and judged (and
    /// a connection served directly), then the after-step checks.
    pub(crate) fn after(&mut self, fired: bool) -> Result<(), String> {
        self.drain()?;
        if let Some(delivered) = self.served_directly.take() {
            self.log(|| format!("directly: {delivered:?}"));
            self.on_action(delivered)?;
        }
        self.check(fired)
    }
}
