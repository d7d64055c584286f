//! One handler per kind of input and per driver behaviour: `Sim::step`
//! resets the step's books and dispatches each `Step` (`steps.rs`);
//! `Sim::input` turns a drawn input into its `cmap_core::Input` with the
//! model's books, and hands it to the handler of its kind, which moves the
//! books, applies it through `Pool::handle` (`Sim::handle`) and ends with
//! `after`: drain and judge the outputs (`outputs.rs`), then the
//! after-step checks (`checks.rs`).

use std::time::{Duration, Instant};

use cmap_core::{HandleError, Handled, Input, InputKind, UsageError};

use crate::model::Sim;
use crate::steps::{Drawn, Step};
use crate::support::Conn;

mod check_in;
mod check_out;
mod establish;
mod lifecycle;
mod resize;
mod time;

/// The pool's answer to an input, with misuse as the `UsageError` the
/// typed method gives (a connection of another pool is the business of
/// `Step::WrongPool` alone).
pub(crate) type Answer = Result<Handled<Conn>, UsageError>;

impl Sim {
    /// One step: resets the step's books, and runs its handler, which
    /// performs the input (or the driver's behaviour), drains and judges
    /// the outputs and runs the after-step checks (`after`).
    pub(crate) fn step(&mut self, step: &Step) -> Result<(), String> {
        self.step_started = self.pool_now;
        self.touched.clear();
        self.step_generation = self.generation;
        self.step_clear = None;
        self.step_force_close = false;
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
        self.pace_bound = self.pace.allowed();
        self.step_pending = self.pending.len();
        let now = self.wall;
        match *step {
            Step::Input(drawn) => self.input(now, drawn),
            Step::Stale { ms, input } => {
                let at = now.checked_sub(Duration::from_millis(ms)).unwrap_or(now);
                self.input(at, input)
            }
            Step::Advance { ms } => self.advance(Duration::from_millis(ms)),
            Step::Nudge { ns } => self.advance(Duration::from_nanos(ns)),
            Step::FireTimer { early } => self.fire_timer(early),
            Step::AtIdleEdge { offset_ns } => self.at_idle_edge(offset_ns),
            Step::Jump { ms } => self.jump(ms),
            Step::WrongPool { pick, detach } => self.wrong_pool(now, pick, detach),
            Step::LateResult { pick, ok } => self.late_result(now, pick, ok),
            Step::UnknownResult { ahead, ok } => self.unknown_result(now, ahead, ok),
        }
    }

    /// A drawn input at `now`, to the handler of its kind. A kind the
    /// model does not follow (one added to the core since, or one
    /// `SET_ASIDE` drawn by mistake) fails the run.
    pub(crate) fn input(&mut self, now: Instant, drawn: Drawn) -> Result<(), String> {
        match drawn.kind {
            InputKind::CheckOut => self.check_out(now, drawn),
            InputKind::CheckIn => self.check_in(now, drawn),
            InputKind::Detach => self.detach(now, drawn.pick),
            InputKind::Established => self.established(now, drawn.pick, drawn.service()),
            InputKind::EstablishFailed => self.establish_failed(now, drawn.pick, drawn.fail_kind()),
            InputKind::Cancel => self.cancel(now, drawn.pick, drawn.cancel_target()),
            InputKind::Clear => self.clear(now, drawn),
            InputKind::Ready => self.ready(now),
            InputKind::Close => self.close(now),
            InputKind::ForceClose => self.force_close(now),
            InputKind::Resize => self.resize(drawn.sizes()),
            InputKind::Timeout => self.timeout(now),
            kind => Err(format!("a kind of input the model does not follow: {kind:?}")),
        }
    }

    /// Applies `input` at `now` through `Pool::handle`, the one way in,
    /// and moves the model's notion of the pool's clock. A connection of
    /// this pool refused fails the step.
    pub(crate) fn handle(&mut self, now: Instant, input: Input<Conn>) -> Result<Answer, String> {
        let kind = input.kind();
        let r = self.pool.handle(now, input);
        self.told(now);
        self.handled.insert(kind);
        match r {
            Ok(handled) => Ok(Ok(handled)),
            Err(HandleError::Usage(e)) => Ok(Err(e)),
            Err(e) => Err(format!("{kind:?} refused: {e:?}")),
        }
    }

    /// [`handle`](Self::handle) for an input that answers `Done` or
    /// misuse: its answer as the typed method gives it.
    pub(crate) fn handle_plain(
        &mut self,
        now: Instant,
        input: Input<Conn>,
    ) -> Result<Result<(), UsageError>, String> {
        let kind = input.kind();
        match self.handle(now, input)? {
            Ok(Handled::Done) => Ok(Ok(())),
            Ok(other) => Err(format!("{kind:?} answered {other:?}")),
            Err(e) => Ok(Err(e)),
        }
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
