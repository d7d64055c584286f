//! The harness of the `commands` fuzz target: a random pool configuration
//! and a random sequence of steps on virtual time: time passing, or one
//! `cmap_core::Input` of a kind drawn from `InputKind::ALL`, its arguments
//! drawn from the books of a minimal driver (the connection checked in,
//! the waiter cancelled...). The driver runs on cmap-core's virtual-time
//! loop (`cmap_core::virtual_time`), so every input goes through
//! `Pool::handle` but a direct check-in, which has no `Input` of its own.
//!
//! After every input it drains the outputs and checks:
//!
//! - the core's own invariants (`Pool::check_invariants`);
//! - the driver's books against the core's counts: the checkouts still
//!   waiting, the connections being established, the connections in use;
//! - that every action names something the driver has (a waiter that
//!   waits, a connection it holds), and that misuse never happens for
//!   inputs that are valid by the driver's books;
//! - that time is honoured: after `handle_timeout(t)`, `poll_timeout()` is
//!   later than `t`.
//!
//! Then it runs the same sequence again on a fresh pool, at the same
//! instants, and requires the same outputs, byte for byte (their `Debug`
//! text): the core is deterministic.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use cmap_core::virtual_time::{self, VirtualDriver};
use cmap_core::{
    Action, Address, CheckOut, Clear, ConnectionId, EstablishError, EstablishErrorKind, EstablishFailure,
    HandOver, HandleError, Handled, InputKind, Output, Pool, PoolOptions, Pooled, Reconnect, Recording,
    WaiterId,
};
use std::convert::Infallible;

/// The most inputs one run feeds: longer sequences find nothing shorter
/// ones do not, and slow the fuzzer down.
const MAX_STEPS: usize = 256;

/// One fuzz case.
#[derive(Debug, Clone)]
pub struct Input {
    /// The pool's options.
    pub options: Options,
    /// The inputs, in order.
    pub steps: Vec<Step>,
}

impl Input {
    /// Decodes a case: the options first, then steps until the bytes run
    /// out (at most [`MAX_STEPS`]). Every byte string long enough for the
    /// options is a case, and a mutation that adds bytes adds steps.
    pub fn from_bytes(data: &[u8]) -> Option<Input> {
        let mut u = arbitrary::Unstructured::new(data);
        let options = Options::arbitrary(&mut u).ok()?;
        let mut steps = Vec::new();
        while !u.is_empty() && steps.len() < MAX_STEPS {
            steps.push(Step::arbitrary(&mut u).ok()?);
        }
        Some(Input { options, steps })
    }
}

/// The pool options a case draws, kept small so that limits are met.
#[derive(Arbitrary, Debug, Clone)]
pub struct Options {
    max_pool_size: u8,
    min_pool_size: u8,
    max_connecting: u8,
    wait_queue_timeout_ms: Option<u16>,
    max_idle_ms: Option<u16>,
    lifetime_ms: Option<u16>,
    maintenance_ms: Option<u16>,
    keep_ready: bool,
    keep_waiting: bool,
    reconnect: bool,
    seed: u64,
}

/// One step of the driver: time passes, or one input of the pool.
#[derive(Arbitrary, Debug, Clone)]
pub enum Step {
    /// Time passes; the timer fires at every deadline on the way.
    Advance(u16),
    /// One input of the kind `InputKind::ALL[kind % len]`, its arguments
    /// drawn by `Driver::input` from the driver's books by `pick` and
    /// shaped by `value` and `flags`.
    Input {
        /// Which kind of input.
        kind: u8,
        /// Which connection or waiter, among those the books hold.
        pick: u8,
        /// A number: a timeout in ms, an error kind, sizes.
        value: u16,
        /// Switches: a deadline of its own, direct, errored, interrupt.
        flags: u8,
    },
}

impl Step {
    /// The step of an input of `kind`.
    pub fn input(kind: InputKind, pick: u8, value: u16, flags: u8) -> Step {
        let kind = InputKind::ALL
            .iter()
            .position(|k| *k == kind)
            .expect("a kind of ALL");
        Step::Input {
            kind: kind as u8,
            pick,
            value,
            flags,
        }
    }
}

impl Options {
    fn build(&self) -> Option<PoolOptions> {
        let ms = |v: u16| Duration::from_millis(u64::from(v));
        let mut b = PoolOptions::builder()
            .max_pool_size(u32::from(self.max_pool_size % 8))
            .min_pool_size(u32::from(self.min_pool_size % 4))
            .max_connecting(1 + u32::from(self.max_connecting % 3))
            .wait_queue_timeout(self.wait_queue_timeout_ms.map(ms))
            .max_idle_time(self.max_idle_ms.map(ms))
            .maintenance_interval(self.maintenance_ms.map(|v| ms(1 + v % 2000)))
            .establish_failure(if self.keep_ready {
                EstablishFailure::KeepReady
            } else {
                EstablishFailure::ClearPool
            })
            .keep_waiting_on_overload(self.keep_waiting)
            .seed(self.seed);
        if let Some(lifetime) = self.lifetime_ms {
            b = b.max_lifetime(Duration::from_millis(1 + u64::from(lifetime)), 0.2);
        }
        if self.reconnect {
            b = b.reconnect(Some(Reconnect {
                initial_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(200),
                give_up_after: Some(Duration::from_secs(2)),
                max_delay_while_waiting: Duration::from_millis(5),
            }));
        }
        // Options the core refuses (min above max, say) make no case.
        b.build().ok()
    }
}

/// The flight recorder's ring in the second run: small, so that its
/// segments roll and a replay starts from a snapshot taken mid-run.
const RING: usize = 64;

/// Runs `input` twice on fresh pools, the second time with the flight
/// recorder on, and checks everything the module says, and that the
/// recording replays exactly; panics on the first thing wrong.
pub fn run(input: &Input) {
    let Some(options) = input.options.build() else {
        return;
    };
    let base = Instant::now();
    let (first, _) = Driver::new(base, options.clone()).run(&input.steps, false);
    let (again, recording) = Driver::new(base, options).run(&input.steps, true);
    assert!(
        first == again,
        "the same inputs at the same instants gave other outputs"
    );
    let recording = recording.expect("the recorder began at once");
    assert_eq!(recording.incident(), None);
    if let Err(e) = recording.replay(base) {
        panic!("the recording did not replay: {e}");
    }
}

/// A minimal driver with its own books.
struct Driver {
    pool: Pool<u64>,
    now: Instant,
    in_use: Vec<Pooled<u64>>,
    /// In use, but interrupted: closed in the core's books already.
    interrupted: BTreeSet<ConnectionId>,
    pending: Vec<ConnectionId>,
    /// Abandoned by the core; a late result is still accepted.
    aborted: Vec<ConnectionId>,
    waiting: Vec<WaiterId>,
    connections_made: u64,
    transcript: Vec<String>,
    /// The kind of the input being applied, for `answered`.
    asking: Option<InputKind>,
    /// Events kept apart, taken after every input.
    events: Vec<cmap_core::Event>,
}

impl Driver {
    fn new(now: Instant, options: PoolOptions) -> Driver {
        Driver {
            pool: Pool::new(now, Address::new("fuzz", 27017), options),
            now,
            in_use: Vec::new(),
            interrupted: BTreeSet::new(),
            pending: Vec::new(),
            aborted: Vec::new(),
            waiting: Vec::new(),
            connections_made: 0,
            transcript: Vec::new(),
            asking: None,
            events: Vec::new(),
        }
    }

    fn run(mut self, steps: &[Step], record: bool) -> (Vec<String>, Option<Recording>) {
        settle(virtual_time::drain(&mut self));
        if record {
            self.pool.start_recording(self.now, RING);
        }
        for step in steps {
            self.transcript.push(format!("> {step:?}"));
            self.step(step);
        }
        (self.transcript, self.pool.recording())
    }

    fn step(&mut self, step: &Step) {
        let (kind, pick, value, flags) = match *step {
            Step::Advance(ms) => {
                let until = self.now + Duration::from_millis(u64::from(ms));
                settle(virtual_time::advance(self, until).map(drop));
                return;
            }
            Step::Input {
                kind,
                pick,
                value,
                flags,
            } => (kind, pick, value, flags),
        };
        let kind = InputKind::ALL[usize::from(kind) % InputKind::ALL.len()];
        let flag = |bit: u8| flags & bit != 0;
        if kind == InputKind::CheckIn && flag(4) {
            // Through `handle_check_in_direct`, whose hand-over is checked
            // as the `Deliver` it stands for: a fast entry point with no
            // `Input` of its own.
            if let Some(conn) = self.take_in_use(pick, flag(1)) {
                match self.pool.handle_check_in_direct(self.now, conn) {
                    Ok(Some(HandOver { waiter, connection })) => {
                        self.served(waiter);
                        self.in_use.push(connection);
                    }
                    Ok(None) => {}
                    Err(_) => panic!("a connection of this pool was refused at check-in"),
                }
            }
            settle(virtual_time::drain(self));
            return;
        }
        match self.input(kind, pick, value, flags) {
            Some(input) => {
                self.asking = Some(kind);
                settle(virtual_time::apply(self, input));
            }
            None => settle(virtual_time::drain(self)),
        }
        if kind == InputKind::Timeout {
            if let Some(next) = self.pool.poll_timeout() {
                assert!(
                    next > self.now,
                    "handle_timeout({:?}) left a deadline that is due",
                    self.now
                );
            }
        }
    }

    /// The input of `kind` with arguments from the books, or none when the
    /// books hold nothing to pick from.
    fn input(&mut self, kind: InputKind, pick: u8, value: u16, flags: u8) -> Option<cmap_core::Input<u64>> {
        use cmap_core::Input;
        let now = self.now;
        let flag = |bit: u8| flags & bit != 0;
        Some(match kind {
            InputKind::CheckOut => {
                let timeout = flag(1).then(|| Duration::from_millis(u64::from(value)));
                let deadline = timeout
                    .or_else(|| self.pool.options().wait_queue_timeout())
                    .map(|t| now + t);
                Input::CheckOut {
                    deadline,
                    direct: flag(2),
                }
            }
            InputKind::CheckIn => Input::CheckIn(self.take_in_use(pick, flag(1))?),
            InputKind::Detach => Input::Detach(self.take_in_use(pick, false)?),
            InputKind::Established => {
                let id = self.take_establishing(pick)?;
                self.connections_made += 1;
                Input::Established {
                    id,
                    connection: self.connections_made,
                    service_id: None,
                }
            }
            InputKind::EstablishFailed => {
                let id = self.take_establishing(pick)?;
                let kind = match value % 3 {
                    0 => EstablishErrorKind::Network,
                    1 => EstablishErrorKind::Authentication,
                    _ => EstablishErrorKind::Other,
                };
                let error = EstablishError::new(kind, std::io::Error::other("fuzzed failure"));
                Input::EstablishFailed { id, error }
            }
            InputKind::Cancel => Input::Cancel(take(&mut self.waiting, pick)?),
            InputKind::Clear => Input::Clear(Clear {
                interrupt_in_use: flag(1),
                ..Clear::default()
            }),
            InputKind::ResetAfterFork => Input::ResetAfterFork,
            InputKind::Ready => Input::Ready,
            InputKind::Close => Input::Close,
            InputKind::ForceClose => Input::ForceClose,
            InputKind::Resize => Input::Resize {
                min: u32::from(value & 0xff) % 5,
                max: u32::from(value >> 8) % 9,
            },
            InputKind::Timeout => Input::Timeout,
            InputKind::EventsEnabled => Input::EventsEnabled(!flag(1)),
            InputKind::EventsApart => Input::EventsApart(flag(1)),
            other => panic!("a kind of input the harness does not draw: {other:?}"),
        })
    }

    /// A connection in use, by `pick`, out of the books (and `errored`).
    fn take_in_use(&mut self, pick: u8, errored: bool) -> Option<Pooled<u64>> {
        let mut conn = take(&mut self.in_use, pick)?;
        self.interrupted.remove(&conn.id());
        if errored {
            conn.mark_errored();
        }
        Some(conn)
    }

    /// A connection being established, or one abandoned, by `pick`.
    fn take_establishing(&mut self, pick: u8) -> Option<ConnectionId> {
        let n = self.pending.len() + self.aborted.len();
        if n == 0 {
            return None;
        }
        let i = usize::from(pick) % n;
        Some(if i < self.pending.len() {
            self.pending.swap_remove(i)
        } else {
            self.aborted.swap_remove(i - self.pending.len())
        })
    }

    fn served(&mut self, waiter: WaiterId) {
        let at = self.waiting.iter().position(|w| *w == waiter);
        let at = at.unwrap_or_else(|| panic!("{waiter} served or failed, but it does not wait"));
        self.waiting.swap_remove(at);
    }
}

/// The harness on cmap-core's virtual-time loop: every output checked
/// against the books as it comes, the books against the pool's counts
/// after every input.
impl VirtualDriver<u64> for Driver {
    type Error = Infallible;

    fn pool(&mut self) -> &mut Pool<u64> {
        &mut self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    /// Books a checkout's id or connection; inputs valid by the books are
    /// never refused, and the rest's refusals go to the transcript.
    fn answered(&mut self, answer: Result<Handled<u64>, HandleError<u64>>) -> Result<(), Infallible> {
        let kind = self.asking.take();
        self.transcript.push(format!("{answer:?}"));
        match answer {
            Ok(Handled::CheckOut(CheckOut::Ready(conn))) => self.in_use.push(conn),
            Ok(Handled::CheckOut(CheckOut::Later(id))) => self.waiting.push(id),
            Ok(_) => {}
            Err(e) => match kind {
                Some(InputKind::Ready | InputKind::Resize | InputKind::ForceClose) => {}
                _ => panic!("{kind:?}, valid by the books, refused: {e:?}"),
            },
        }
        Ok(())
    }

    /// Checks an output against the books.
    fn perform(&mut self, output: Output<u64>) -> Result<(), Infallible> {
        self.transcript.push(format!("{output:?}"));
        let Output::Action(action) = output else {
            return Ok(());
        };
        match action {
            Action::Establish { id } => {
                assert!(!self.pending.contains(&id), "{id} established twice");
                self.pending.push(id);
            }
            Action::AbortEstablish { id } => {
                let at = self.pending.iter().position(|p| *p == id);
                let at = at.unwrap_or_else(|| panic!("abort of {id}, which is not being established"));
                self.aborted.push(self.pending.swap_remove(at));
            }
            Action::Deliver { waiter, connection } => {
                self.served(waiter);
                self.in_use.push(connection);
            }
            Action::Fail { waiter, .. } => self.served(waiter),
            Action::Interrupt { id } => {
                assert!(
                    self.in_use.iter().any(|c| c.id() == id),
                    "interrupt of {id}, which is not in use"
                );
                self.interrupted.insert(id);
            }
            _ => {}
        }
        Ok(())
    }

    /// The core's invariants, and its counts against the driver's books.
    fn settled(&mut self) -> Result<(), Infallible> {
        self.pool.take_events(&mut self.events);
        for event in self.events.drain(..) {
            self.transcript.push(format!("apart: {event:?}"));
        }
        if let Err(broken) = self.pool.check_invariants() {
            panic!("invariant broken: {broken}");
        }
        let status = self.pool.status();
        assert_eq!(status.waiting, self.waiting.len(), "checkouts waiting");
        assert_eq!(
            status.pending,
            self.pending.len(),
            "connections being established"
        );
        let in_use = self
            .in_use
            .iter()
            .filter(|c| !self.interrupted.contains(&c.id()))
            .count();
        assert_eq!(status.in_use, in_use, "connections in use");
        Ok(())
    }
}

/// The harness's loop never fails but by a panic.
fn settle(result: Result<(), Infallible>) {
    match result {
        Ok(()) => {}
        Err(never) => match never {},
    }
}

/// Takes one element of `v` by `pick`, if there is one.
fn take<T>(v: &mut Vec<T>, pick: u8) -> Option<T> {
    (!v.is_empty()).then(|| v.swap_remove(usize::from(pick) % v.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The flags of a step.
    const OWN_DEADLINE: u8 = 1;
    const DIRECT: u8 = 2;
    const ERRORED: u8 = 1;
    const DIRECT_CHECK_IN: u8 = 4;
    const INTERRUPT: u8 = 1;

    /// Every kind of input at least once, through a small pool, so that
    /// the harness itself is exercised by `cargo test` in this crate.
    #[test]
    fn a_run_through_every_step_kind_replays() {
        let input = Input {
            options: Options {
                max_pool_size: 2,
                min_pool_size: 1,
                max_connecting: 1,
                wait_queue_timeout_ms: Some(50),
                max_idle_ms: Some(500),
                lifetime_ms: Some(1000),
                maintenance_ms: Some(100),
                keep_ready: false,
                keep_waiting: true,
                reconnect: true,
                seed: 7,
            },
            steps: vec![
                Step::input(InputKind::CheckOut, 0, 0, DIRECT),
                Step::input(InputKind::Established, 0, 0, 0),
                Step::input(InputKind::CheckOut, 0, 10, OWN_DEADLINE),
                Step::input(InputKind::EstablishFailed, 0, 0, 0),
                Step::Advance(20),
                Step::input(InputKind::CheckIn, 0, 0, DIRECT_CHECK_IN),
                Step::input(InputKind::CheckOut, 0, 0, 0),
                Step::input(InputKind::Cancel, 0, 0, 0),
                Step::input(InputKind::Clear, 0, 0, INTERRUPT),
                Step::input(InputKind::Ready, 0, 0, 0),
                Step::input(InputKind::Detach, 0, 0, 0),
                Step::input(InputKind::CheckOut, 0, 0, DIRECT),
                Step::input(InputKind::Established, 0, 0, 0),
                Step::input(InputKind::CheckIn, 0, 0, ERRORED),
                Step::input(InputKind::EventsApart, 0, 0, 1),
                Step::input(InputKind::EventsEnabled, 0, 0, 1),
                Step::input(InputKind::Timeout, 0, 0, 0),
                Step::input(InputKind::EventsEnabled, 0, 0, 0),
                Step::input(InputKind::Resize, 0, 0x0301, 0),
                Step::input(InputKind::ResetAfterFork, 0, 0, 0),
                Step::Advance(2000),
                Step::input(InputKind::CheckOut, 0, 0, DIRECT),
                Step::input(InputKind::Close, 0, 0, 0),
                Step::input(InputKind::ForceClose, 0, 0, 0),
            ],
        };
        for kind in InputKind::ALL {
            let drawn = input
                .steps
                .iter()
                .any(|s| matches!(s, Step::Input { kind: k, .. } if InputKind::ALL[usize::from(*k)] == kind));
            assert!(drawn, "the scripted run draws {kind:?}");
        }
        run(&input);
    }

    /// Random byte strings through the harness, as the fuzzer would feed
    /// it but without coverage guidance: a smoke test that runs anywhere.
    #[test]
    fn random_cases_replay() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut steps = 0;
        for _ in 0..3000 {
            let len = (next() % 2048) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if let Some(input) = Input::from_bytes(&bytes) {
                steps += input.steps.len().min(MAX_STEPS);
                run(&input);
            }
        }
        assert!(
            steps > 30_000,
            "the cases are long enough to matter: {steps} steps"
        );
    }
}
