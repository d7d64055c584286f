//! Re-executing a recording: a pool restored from the snapshot is fed
//! every recorded input at its instant, and each output it gives must be
//! the recorded one, in order.

use std::convert::Infallible;
use std::fmt::{self, Write as _};
use std::time::{Duration, Instant};

use super::codec::{instant_from_base, nanos_from_base, with_base};
use super::file::Line;
use super::{RecordedInput, Recorder, Recording};
use crate::connection::PoolId;
use crate::input::Input;
use crate::output::Output;
use crate::pool::Pool;
use crate::stats::Status;
use crate::virtual_time::{self, VirtualDriver};

/// How far the recording's zero is placed after the caller's origin, so
/// that instants before it (a connection created before recording began)
/// can be represented.
const ROOM_BEFORE_ZERO: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A replay that ran to its end (or to the instant asked for) with every
/// output as recorded.
#[derive(Debug, Clone)]
pub struct Replay {
    steps: Vec<Step>,
    state: String,
}

/// One input of a replay and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Nanoseconds from the recording's zero.
    pub at: i64,
    /// The input, as the recording writes it.
    pub input: String,
    /// The outputs it caused, as the recording writes them.
    pub outputs: Vec<String>,
    /// The pool's counts after it.
    pub status: Status,
    /// The establishment pace after it: how many connections may be
    /// established at once (`maxConnecting`, or the adaptive pace's limit).
    pub pace: u32,
}

/// Why a recording could not be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The recording's snapshot or one of its inputs cannot be read.
    #[error("the recording cannot be replayed: {0}")]
    Malformed(String),
    /// The replayed pool gave another output than the recorded one.
    #[error(
        "replay diverged at input {step} ({at}: {input}): expected {}, got {}",
        .expected.as_deref().unwrap_or("no more outputs"),
        .actual.as_deref().unwrap_or("no more outputs")
    )]
    Diverged {
        /// 0-based index of the input.
        step: usize,
        /// Its instant, from the recording's zero.
        at: Seconds,
        /// The input.
        input: String,
        /// The recorded output (`None`: the replay gave more).
        expected: Option<String>,
        /// The replayed one (`None`: it gave fewer).
        actual: Option<String>,
    },
}

/// Nanoseconds from a recording's zero, shown as signed seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seconds(pub i64);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "+" };
        let abs = self.0.unsigned_abs();
        write!(
            f,
            "{sign}{}.{:06}s",
            abs / 1_000_000_000,
            abs % 1_000_000_000 / 1_000
        )
    }
}

impl Recording {
    /// Re-executes the recording on a pool restored from its snapshot and
    /// checks that every output is the recorded one. `origin` is any
    /// instant (the caller's clock): the outputs do not depend on it.
    ///
    /// # Errors
    ///
    /// [`ReplayError::Diverged`] at the first output that differs, or
    /// [`ReplayError::Malformed`] for a recording that cannot be read.
    pub fn replay(&self, origin: Instant) -> Result<Replay, ReplayError> {
        self.replay_until(origin, None)
    }

    /// [`replay`](Self::replay) of the inputs up to `until` (nanoseconds
    /// from the recording's zero) only, to look at the pool then
    /// ([`Replay::state`]).
    ///
    /// # Errors
    ///
    /// As [`replay`](Self::replay).
    pub fn replay_until(&self, origin: Instant, until: Option<i64>) -> Result<Replay, ReplayError> {
        let malformed = |e: serde_json::Error| ReplayError::Malformed(e.to_string());
        let base = origin + ROOM_BEFORE_ZERO;
        let mut pool: Pool<()> =
            with_base(base, || serde_json::from_value(self.snapshot.clone())).map_err(malformed)?;
        pool.adopt_restored();
        pool.recorder = Some(Box::new(Recorder::unbounded(base)));
        let mut steps = Vec::new();
        let mut lines = self.lines().iter().peekable();
        while let Some(line) = lines.next() {
            let Line::Input { at, input: text } = line else {
                return Err(ReplayError::Malformed("an output before any input".into()));
            };
            if until.is_some_and(|until| *at > until) {
                break;
            }
            let input: RecordedInput =
                with_base(base, || serde_json::from_value(text.clone())).map_err(malformed)?;
            let now = instant_from_base(base, *at)
                .ok_or_else(|| ReplayError::Malformed(format!("instant {at} ns out of range")))?;
            pool.apply(now, input);
            let actual = pool.take_replayed();
            let mut expected = Vec::new();
            while let Some(Line::Output { output }) = lines.peek() {
                expected.push(output.clone());
                lines.next();
            }
            if let Some(k) = (0..expected.len().max(actual.len())).find(|&k| expected.get(k) != actual.get(k))
            {
                return Err(ReplayError::Diverged {
                    step: steps.len(),
                    at: Seconds(*at),
                    input: text.to_string(),
                    expected: expected.get(k).cloned(),
                    actual: actual.get(k).cloned(),
                });
            }
            steps.push(Step {
                at: *at,
                input: text.to_string(),
                outputs: actual,
                status: pool.status(),
                pace: pool.pace.limit,
            });
        }
        let state = pool.describe(base);
        Ok(Replay { steps, state })
    }
}

impl Replay {
    /// Every input replayed, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The pool after the last input replayed: its state, generation,
    /// connections and waiters, one per line.
    pub fn state(&self) -> &str {
        &self.state
    }
}

/// The timeline: one line per input with the pool's counts after it, then
/// the outputs it caused, indented.
impl fmt::Display for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for step in &self.steps {
            let s = step.status;
            writeln!(
                f,
                "{} {:?} gen {} | pending {} available {} in use {} waiting {} | {}",
                Seconds(step.at),
                s.state,
                s.generation,
                s.pending,
                s.available,
                s.in_use,
                s.waiting,
                step.input
            )?;
            for output in &step.outputs {
                writeln!(f, "    {output}")?;
            }
        }
        Ok(())
    }
}

/// A replay's pool on the virtual-time loop: the recorder notes every
/// output as it is queued, so performing one is dropping it.
struct Replaying<'a> {
    pool: &'a mut Pool<()>,
    now: Instant,
}

impl VirtualDriver<()> for Replaying<'_> {
    type Error = Infallible;

    fn pool(&mut self) -> &mut Pool<()> {
        self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    fn perform(&mut self, output: Output<()>) -> Result<(), Infallible> {
        drop(output);
        Ok(())
    }

    /// Events kept apart were noted as they were queued too.
    fn settled(&mut self) -> Result<(), Infallible> {
        self.pool.apart.clear();
        Ok(())
    }
}

impl Pool<()> {
    /// Makes a pool read from a snapshot its own: a pool id of this
    /// process, which `apply` gives the connections checked in or
    /// detached. (Those it holds keep the snapshot's unset id: they leave
    /// it only in outputs, which a replay compares and drops.)
    fn adopt_restored(&mut self) {
        self.id = PoolId::next();
    }

    /// Feeds one recorded input, as the driver did, its connections
    /// made this pool's. Its result is the recorded one too (a refused
    /// input was refused then), so it is not looked at: the outputs are
    /// what is compared.
    /// It is drained as a driver would, on the virtual-time loop.
    fn apply(&mut self, now: Instant, mut input: RecordedInput) {
        if let Input::CheckIn(connection) | Input::Detach(connection) = &mut input {
            connection.meta.pool = self.id;
        }
        let replaying = &mut Replaying { pool: self, now };
        match virtual_time::apply(replaying, input) {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }

    /// The text of the outputs the last input caused.
    fn take_replayed(&mut self) -> Vec<String> {
        let Some(recorder) = self.recorder.as_deref_mut() else {
            return Vec::new();
        };
        recorder
            .take_lines()
            .into_iter()
            .filter_map(|line| match line {
                Line::Output { output } => Some(output),
                Line::Input { .. } => None,
            })
            .collect()
    }

    /// The pool's state in words, instants from the recording's zero.
    fn describe(&self, base: Instant) -> String {
        let at = |t: Instant| Seconds(nanos_from_base(base, t));
        let mut text = String::new();
        let s = self.status();
        let _ = writeln!(
            text,
            "at {}: {:?}, generation {}, {} connections ({} pending, {} available, {} in use), {} waiting",
            at(self.now),
            s.state,
            s.generation,
            s.total,
            s.pending,
            s.available,
            s.in_use,
            s.waiting
        );
        for (id, pending) in self.conns.pending_ids() {
            let _ = writeln!(
                text,
                "  pending   #{id} generation {} since {} for {}",
                pending.generation,
                at(pending.created_at),
                pending
                    .requester
                    .map_or("no waiter".to_owned(), |w| format!("waiter {w}"))
            );
        }
        for meta in self.conns.available_metas() {
            let _ = writeln!(
                text,
                "  available #{} generation {} created {} idle since {}",
                meta.id,
                meta.generation,
                at(meta.created_at),
                at(meta.last_used)
            );
        }
        for in_use in self.conns.in_use_entries() {
            let interrupted = if in_use.interrupted { " (interrupted)" } else { "" };
            let _ = writeln!(
                text,
                "  in use    #{} generation {}{interrupted}",
                in_use.id, in_use.generation
            );
        }
        for (id, waiter) in self.queue.iter() {
            let _ = writeln!(
                text,
                "  waiter {id} since {} deadline {}{}",
                at(waiter.started_at),
                waiter.deadline.map_or("none".to_owned(), |d| at(d).to_string()),
                waiter
                    .requested
                    .map_or(String::new(), |c| format!(", asked for #{c}"))
            );
        }
        if let Some(bounds) = self.pace.adaptive {
            let _ = writeln!(
                text,
                "  establishment pace: {} at once (adaptive {}..{}, doubling below {}), fastest recent connect {}",
                self.pace.limit,
                bounds.min,
                bounds.max,
                self.pace.threshold,
                self.pace
                    .floor
                    .map_or("none yet".to_owned(), |f| format!("{f:?}"))
            );
        }
        if let Some(error) = &self.backoff.last_error {
            let _ = writeln!(text, "  last establishment error: {error}");
        }
        text
    }
}
