//! The harness of the `commands` fuzz target: a random pool configuration
//! and a random sequence of inputs (check out, check in, detach, connect
//! results, clear, ready, close, cancel, timers, fork, resize) on virtual
//! time, fed to `cmap_core::Pool` by a minimal driver that keeps its own
//! books.
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
use cmap_core::{
    Action, Address, CheckOut, Clear, ConnectionId, EstablishError, EstablishErrorKind, EstablishFailure,
    HandOver, Output, Pool, PoolOptions, Pooled, Reconnect, Recording, WaiterId,
};

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

/// One input of the driver.
#[derive(Arbitrary, Debug, Clone)]
pub enum Step {
    /// Time passes; the timer fires at every deadline on the way.
    Advance(u16),
    /// A checkout, with its own timeout, through either entry point.
    CheckOut {
        /// Its timeout (`None`: the pool's).
        timeout_ms: Option<u16>,
        /// Through `handle_check_out_direct` instead of `_until`.
        direct: bool,
    },
    /// Check in one of the connections in use, through either entry point.
    CheckIn {
        /// Which one.
        pick: u8,
        /// Marked errored first.
        errored: bool,
        /// Through `handle_check_in_direct`, whose hand-over is checked as
        /// the `Deliver` it stands for.
        direct: bool,
    },
    /// Detach one of the connections in use.
    Detach {
        /// Which one.
        pick: u8,
    },
    /// A connection being established (or one abandoned) is ready.
    Established {
        /// Which one.
        pick: u8,
    },
    /// A connection being established (or one abandoned) failed.
    EstablishFailed {
        /// Which one.
        pick: u8,
        /// How.
        kind: Kind,
    },
    /// Clear the pool.
    Clear {
        /// With `interruptInUseConnections`.
        interrupt: bool,
    },
    /// Mark the pool ready.
    Ready,
    /// Close the pool.
    Close,
    /// Withdraw a waiting checkout.
    Cancel {
        /// Which one.
        pick: u8,
    },
    /// A spurious timer wake-up.
    Timeout,
    /// New minPoolSize and maxPoolSize (possibly invalid: refused).
    Resize {
        /// minPoolSize.
        min: u8,
        /// maxPoolSize (0: no limit).
        max: u8,
    },
    /// The process forked.
    ResetAfterFork,
}

/// The kind of an establishment failure.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Kind {
    /// Refused, reset, timed out: labelled.
    Network,
    /// Credentials refused.
    Authentication,
    /// Anything else.
    Other,
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
        }
    }

    fn run(mut self, steps: &[Step], record: bool) -> (Vec<String>, Option<Recording>) {
        self.drain();
        if record {
            self.pool.start_recording(self.now, RING);
        }
        for step in steps {
            self.transcript.push(format!("> {step:?}"));
            self.step(step);
            self.drain();
            self.check();
        }
        (self.transcript, self.pool.recording())
    }

    fn step(&mut self, step: &Step) {
        let now = self.now;
        match *step {
            Step::Advance(ms) => self.advance(Duration::from_millis(u64::from(ms))),
            Step::CheckOut { timeout_ms, direct } => {
                let deadline = timeout_ms.map(|ms| now + Duration::from_millis(u64::from(ms)));
                let deadline = deadline.or_else(|| self.pool.options().wait_queue_timeout().map(|t| now + t));
                if direct {
                    match self.pool.handle_check_out_direct(now, deadline) {
                        CheckOut::Ready(conn) => self.in_use.push(conn),
                        CheckOut::Later(id) => self.waiting.push(id),
                    }
                } else {
                    let id = self.pool.handle_check_out_until(now, deadline);
                    self.waiting.push(id);
                }
            }
            Step::CheckIn {
                pick,
                errored,
                direct,
            } => {
                if let Some(mut conn) = take(&mut self.in_use, pick) {
                    self.interrupted.remove(&conn.id());
                    if errored {
                        conn.mark_errored();
                    }
                    let refused = if direct {
                        match self.pool.handle_check_in_direct(now, conn) {
                            Ok(Some(HandOver { waiter, connection })) => {
                                self.served(waiter);
                                self.in_use.push(connection);
                                false
                            }
                            Ok(None) => false,
                            Err(_) => true,
                        }
                    } else {
                        self.pool.handle_check_in(now, conn).is_err()
                    };
                    assert!(!refused, "a connection of this pool was refused at check-in");
                }
            }
            Step::Detach { pick } => {
                if let Some(conn) = take(&mut self.in_use, pick) {
                    self.interrupted.remove(&conn.id());
                    assert!(self.pool.handle_detach(now, conn).is_ok(), "detach refused");
                }
            }
            Step::Established { pick } => {
                if let Some(id) = self.take_establishing(pick) {
                    self.connections_made += 1;
                    let made = self.connections_made;
                    let result = self.pool.handle_established(now, id, made, None);
                    assert!(result.is_ok(), "established {id} refused: {result:?}");
                }
            }
            Step::EstablishFailed { pick, kind } => {
                if let Some(id) = self.take_establishing(pick) {
                    let kind = match kind {
                        Kind::Network => EstablishErrorKind::Network,
                        Kind::Authentication => EstablishErrorKind::Authentication,
                        Kind::Other => EstablishErrorKind::Other,
                    };
                    let error = EstablishError::new(kind, std::io::Error::other("fuzzed failure"));
                    let result = self.pool.handle_establish_failed(now, id, error);
                    assert!(result.is_ok(), "failure of {id} refused: {result:?}");
                }
            }
            Step::Clear { interrupt } => {
                let clear = Clear {
                    interrupt_in_use: interrupt,
                    ..Clear::default()
                };
                let result = self.pool.handle_clear(now, clear);
                self.transcript.push(format!("{result:?}"));
            }
            Step::Ready => {
                let result = self.pool.handle_ready(now);
                self.transcript.push(format!("{result:?}"));
            }
            Step::Close => self.pool.handle_close(now),
            Step::Cancel { pick } => {
                if let Some(id) = take(&mut self.waiting, pick) {
                    let result = self.pool.handle_cancel(now, id);
                    assert!(
                        result.is_ok(),
                        "a waiting checkout could not be cancelled: {result:?}"
                    );
                }
            }
            Step::Timeout => self.timeout(now),
            Step::Resize { min, max } => {
                let result = self
                    .pool
                    .handle_resize(now, u32::from(min % 5), u32::from(max % 9));
                self.transcript.push(format!("{result:?}"));
            }
            Step::ResetAfterFork => self.pool.handle_reset_after_fork(now),
        }
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

    /// Moves the clock by `by`, firing the timer at every deadline on the
    /// way, as a driver whose sleep wakes on time does.
    fn advance(&mut self, by: Duration) {
        let until = self.now + by;
        while let Some(deadline) = self.pool.poll_timeout().filter(|d| *d <= until) {
            self.now = self.now.max(deadline);
            self.timeout(self.now);
            self.drain();
        }
        self.now = until;
    }

    fn timeout(&mut self, now: Instant) {
        self.pool.handle_timeout(now);
        if let Some(next) = self.pool.poll_timeout() {
            assert!(next > now, "handle_timeout({now:?}) left a deadline that is due");
        }
    }

    /// Drains every output, checking each against the books.
    fn drain(&mut self) {
        while let Some(output) = self.pool.poll_output() {
            self.transcript.push(format!("{output:?}"));
            let Output::Action(action) = output else { continue };
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
        }
    }

    fn served(&mut self, waiter: WaiterId) {
        let at = self.waiting.iter().position(|w| *w == waiter);
        let at = at.unwrap_or_else(|| panic!("{waiter} served or failed, but it does not wait"));
        self.waiting.swap_remove(at);
    }

    /// The core's invariants, and its counts against the driver's books.
    fn check(&self) {
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
    }
}

/// Takes one element of `v` by `pick`, if there is one.
fn take<T>(v: &mut Vec<T>, pick: u8) -> Option<T> {
    (!v.is_empty()).then(|| v.swap_remove(usize::from(pick) % v.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every step kind once, through a small pool, so that the harness
    /// itself is exercised by `cargo test` in this crate.
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
                Step::CheckOut {
                    timeout_ms: None,
                    direct: true,
                },
                Step::Established { pick: 0 },
                Step::CheckOut {
                    timeout_ms: Some(10),
                    direct: false,
                },
                Step::EstablishFailed {
                    pick: 0,
                    kind: Kind::Network,
                },
                Step::Advance(20),
                Step::CheckIn {
                    pick: 0,
                    errored: false,
                    direct: true,
                },
                Step::CheckOut {
                    timeout_ms: None,
                    direct: false,
                },
                Step::Cancel { pick: 0 },
                Step::Clear { interrupt: true },
                Step::Ready,
                Step::Detach { pick: 0 },
                Step::Timeout,
                Step::ResetAfterFork,
                Step::Advance(2000),
                Step::Close,
            ],
        };
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
