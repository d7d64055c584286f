//! The flight recorder: random runs of the core, recorded through a small
//! ring (so that segments roll and the oldest are dropped), replay exactly
//! from their snapshot; a recording that was altered does not.

mod support;

use std::time::{Duration, Instant};

use cmap_core::virtual_time::{self, VirtualDriver};
use cmap_core::{
    Action, CheckOut, Clear, ConnectionId, EstablishError, EstablishErrorKind, HandleError, Handled, Input,
    InputKind, Output, Pool, PoolOptions, Pooled, Recording, ReplayError, UsageError, WaiterId,
};
use proptest::prelude::*;
use support::{origin, Conn};

/// One thing a driver may do: let time pass, or feed the pool an input
/// of `kind`, its arguments drawn from the driver's books by `pick` and
/// shaped by `value` (a deadline, sizes) and `flags`.
#[derive(Debug, Clone)]
enum Op {
    Input {
        kind: InputKind,
        pick: usize,
        value: u64,
        flags: u8,
    },
    Wait {
        ms: u64,
    },
}

// The flags of an input.
/// A checkout with a deadline of its own (`value` ms).
const DEADLINE: u8 = 1;
/// A checkout or check-in through its direct entry point: the recording
/// keeps a check-in's hand-over as the `Deliver` a replay makes.
const DIRECT: u8 = 2;
/// A check-in of a connection marked errored.
const ERRORED: u8 = 4;
/// A failed establishment with a network error.
const NETWORK: u8 = 8;
/// A clear that interrupts; events on; events apart.
const ON: u8 = 16;

/// How often each kind of input comes; a kind the test does not know
/// fails in `Driver::input`.
fn weight(kind: InputKind) -> u32 {
    match kind {
        InputKind::CheckOut | InputKind::CheckIn | InputKind::Established => 4,
        InputKind::Ready => 2,
        // The run ends with a close.
        InputKind::Close => 0,
        _ => 1,
    }
}

fn op() -> impl Strategy<Value = Op> {
    let inputs = InputKind::ALL.into_iter().filter(|k| weight(*k) > 0).map(|kind| {
        let flags = prop_oneof![3 => 0u8..32, 1 => Just(ON)];
        let op = (any::<usize>(), 0u64..300, flags).prop_map(move |(pick, value, flags)| Op::Input {
            kind,
            pick,
            value,
            flags,
        });
        (weight(kind), op.boxed())
    });
    let wait = (0u64..400).prop_map(|ms| Op::Wait { ms }).boxed();
    proptest::strategy::Union::new_weighted(inputs.chain([(3, wait)]).collect())
}

/// A driver of the core on virtual time that keeps what a real one keeps.
struct Driver {
    pool: Pool<Conn>,
    now: Instant,
    held: Vec<Pooled<Conn>>,
    pending: Vec<ConnectionId>,
    waiting: Vec<WaiterId>,
    events: Vec<cmap_core::Event>,
}

impl Driver {
    fn new(options: PoolOptions, capacity: usize) -> Driver {
        let now = origin();
        let mut pool = Pool::new(now, "db:27017".parse().unwrap(), options);
        while pool.poll_output().is_some() {}
        pool.start_recording(now, capacity);
        Driver {
            pool,
            now,
            held: Vec::new(),
            pending: Vec::new(),
            waiting: Vec::new(),
            events: Vec::new(),
        }
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Wait { ms } => {
                virtual_time::advance(self, self.now + Duration::from_millis(ms)).unwrap();
            }
            Op::Input {
                kind,
                pick,
                value,
                flags,
            } => {
                if kind == InputKind::CheckIn && flags & DIRECT != 0 {
                    if let Some(connection) = self.take_held(pick, flags) {
                        if let Some(handed) = self.pool.handle_check_in_direct(self.now, connection).unwrap()
                        {
                            self.held.push(handed.connection);
                            self.waiting.retain(|w| *w != handed.waiter);
                        }
                    }
                    virtual_time::drain(self).unwrap();
                } else if let Some(input) = self.input(kind, pick, value, flags) {
                    virtual_time::apply(self, input).unwrap();
                }
            }
        }
    }

    /// The input of `kind` with arguments from the books, if they hold
    /// something to pick.
    fn input(&mut self, kind: InputKind, pick: usize, value: u64, flags: u8) -> Option<Input<Conn>> {
        let at = |len: usize| (len > 0).then(|| pick % len);
        let on = flags & ON != 0;
        Some(match kind {
            InputKind::CheckOut => Input::CheckOut {
                deadline: (flags & DEADLINE != 0).then(|| self.now + Duration::from_millis(value)),
                direct: flags & DIRECT != 0,
            },
            InputKind::CheckIn => Input::CheckIn(self.take_held(pick, flags)?),
            InputKind::Detach => Input::Detach(self.take_held(pick, 0)?),
            InputKind::Established => {
                let id = self.pending.swap_remove(at(self.pending.len())?);
                Input::Established {
                    id,
                    connection: Conn(id.0),
                    service_id: None,
                }
            }
            InputKind::EstablishFailed => {
                let id = self.pending.swap_remove(at(self.pending.len())?);
                let kind = if flags & NETWORK != 0 {
                    EstablishErrorKind::Network
                } else {
                    EstablishErrorKind::Other
                };
                let cause = std::io::Error::other(format!("connection {id} refused"));
                Input::EstablishFailed {
                    id,
                    error: EstablishError::new(kind, cause),
                }
            }
            InputKind::Cancel => Input::Cancel(self.waiting.swap_remove(at(self.waiting.len())?)),
            InputKind::Clear => Input::Clear(Clear {
                interrupt_in_use: on,
                cause: Some("test".into()),
                ..Clear::default()
            }),
            InputKind::ResetAfterFork => Input::ResetAfterFork,
            InputKind::Ready => Input::Ready,
            InputKind::Close => Input::Close,
            InputKind::ForceClose => Input::ForceClose,
            InputKind::Resize => Input::Resize {
                min: (value % 3) as u32,
                max: (value / 3 % 6) as u32,
            },
            InputKind::Timeout => Input::Timeout,
            // Events on four times in five.
            InputKind::EventsEnabled => Input::EventsEnabled(on || !value.is_multiple_of(5)),
            InputKind::EventsApart => Input::EventsApart(on),
            other => panic!("a kind of input this test does not build: {other:?}"),
        })
    }

    /// A held connection, by `pick`, marked errored if `flags` say.
    fn take_held(&mut self, pick: usize, flags: u8) -> Option<Pooled<Conn>> {
        let len = self.held.len();
        let mut connection = (len > 0).then(|| self.held.swap_remove(pick % len))?;
        if flags & ERRORED != 0 {
            connection.mark_errored();
        }
        Some(connection)
    }
}

/// The driver on cmap-core's virtual-time loop.
impl VirtualDriver<Conn> for Driver {
    type Error = String;

    fn pool(&mut self) -> &mut Pool<Conn> {
        &mut self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    /// Books a checkout; a check-in, a detach or a clear of this pool is
    /// never refused (the rest may be, and the recording keeps that too).
    fn answered(&mut self, answer: Result<Handled<Conn>, HandleError<Conn>>) -> Result<(), String> {
        match answer {
            Ok(Handled::CheckOut(CheckOut::Ready(connection))) => self.held.push(connection),
            Ok(Handled::CheckOut(CheckOut::Later(waiter))) => self.waiting.push(waiter),
            Ok(_)
            | Err(HandleError::Usage(UsageError::UnknownConnection(_) | UsageError::UnknownWaiter(_))) => {}
            Err(HandleError::Usage(UsageError::InvalidSize(_) | UsageError::NotClosed)) => {}
            Err(e) => return Err(format!("refused: {e:?}")),
        }
        Ok(())
    }

    fn perform(&mut self, output: Output<Conn>) -> Result<(), String> {
        match output {
            Output::Action(Action::Establish { id }) => self.pending.push(id),
            Output::Action(Action::Deliver { waiter, connection }) => {
                self.waiting.retain(|w| *w != waiter);
                self.held.push(connection);
            }
            Output::Action(Action::Fail { waiter, .. }) => self.waiting.retain(|w| *w != waiter),
            Output::Action(_) | Output::Event(_) => {}
        }
        Ok(())
    }

    fn settled(&mut self) -> Result<(), String> {
        self.pool.take_events(&mut self.events);
        self.events.clear();
        Ok(())
    }
}

fn options(max: u32, min: u32, lifetime: bool) -> PoolOptions {
    let mut builder = PoolOptions::builder()
        .max_pool_size(max)
        .min_pool_size(min)
        .max_connecting(2)
        .max_idle_time(Duration::from_millis(500))
        .wait_queue_timeout(Duration::from_millis(200))
        .seed(7);
    if lifetime {
        builder = builder.max_lifetime(Duration::from_secs(2), 0.5);
    }
    builder.build().unwrap()
}

/// Runs `ops` recorded through a ring of `capacity` entries; returns the
/// recording and the pool's counts at the end.
fn record(ops: &[Op], capacity: usize, opts: PoolOptions) -> (Recording, cmap_core::Status) {
    let mut driver = Driver::new(opts, capacity);
    virtual_time::apply(&mut driver, Input::Ready).unwrap();
    for op in ops {
        driver.step(op);
    }
    virtual_time::apply(&mut driver, Input::Close).unwrap();
    assert_eq!(driver.pool.recording_incident(), None);
    (driver.pool.recording().expect("recording"), driver.pool.status())
}

proptest! {
    /// Every recorded run replays with the same outputs, through a file,
    /// and ends in the same state.
    #[test]
    fn random_runs_replay_exactly(
        ops in proptest::collection::vec(op(), 1..250),
        capacity in prop_oneof![Just(32usize), Just(100), Just(100_000)],
        max in 1u32..5,
        min in 0u32..3,
        lifetime in any::<bool>(),
    ) {
        let (recording, status) = record(&ops, capacity, options(max, min.min(max), lifetime));
        let mut file = Vec::new();
        recording.write_to(&mut file).unwrap();
        let read = Recording::read_from(&file[..]).unwrap();
        prop_assert_eq!(&read, &recording);
        let replay = read.replay(origin()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(replay.steps().len(), recording.inputs());
        prop_assert_eq!(replay.steps().last().map(|s| s.status), Some(status));
        if capacity == 100_000 {
            // A ring this large keeps the whole run, from its first input.
            prop_assert_eq!(replay.steps()[0].input.as_str(), "\"Ready\"");
        } else {
            prop_assert!(recording.inputs() + recording.outputs() <= capacity * 2);
        }
    }
}

/// A run with a bit of everything, for the tests that alter it.
fn busy_recording() -> Recording {
    let mut ops = Vec::new();
    let input = |kind, flags, value| Op::Input {
        kind,
        pick: 0,
        value,
        flags,
    };
    for round in 0..20u64 {
        let direct = if round % 2 == 0 { DIRECT } else { 0 };
        ops.push(input(InputKind::CheckOut, direct | DEADLINE, 100));
        let network = if round % 2 == 0 { NETWORK } else { 0 };
        if round % 5 != 3 {
            ops.push(input(InputKind::Established, 0, 0));
        } else {
            ops.push(input(InputKind::EstablishFailed, network, 0));
        }
        ops.push(Op::Wait { ms: 30 });
        let errored = if round % 7 == 6 { ERRORED } else { 0 };
        let direct = if round % 2 == 1 { DIRECT } else { 0 };
        ops.push(input(InputKind::CheckIn, errored | direct, 0));
    }
    record(&ops, 100_000, options(3, 1, false)).0
}

fn write(recording: &Recording) -> String {
    let mut file = Vec::new();
    recording.write_to(&mut file).unwrap();
    String::from_utf8(file).unwrap()
}

fn read(text: &str) -> Recording {
    Recording::read_from(text.as_bytes()).unwrap()
}

/// What replaying the busy recording says once the first `from` in its
/// file is replaced by `to` (which must change the file).
fn replay_altered(from: &str, to: &str) -> ReplayError {
    let text = write(&busy_recording());
    let altered = text.replacen(from, to, 1);
    assert_ne!(altered, text);
    read(&altered).replay(origin()).unwrap_err()
}

#[test]
fn an_altered_output_is_found() {
    let err = replay_altered("ConnectionId(2)", "ConnectionId(9)");
    assert!(matches!(err, ReplayError::Diverged { .. }), "{err}");
}

#[test]
fn an_altered_input_is_found() {
    // A connection checked in errored instead of healthy closes instead of
    // becoming available.
    let err = replay_altered("\"errored\":false", "\"errored\":true");
    assert!(matches!(err, ReplayError::Diverged { .. }), "{err}");
}

#[test]
fn a_missing_output_is_found() {
    let text = write(&busy_recording());
    let mut lines: Vec<&str> = text.lines().collect();
    let last_output = lines.iter().rposition(|l| l.starts_with("{\"output\"")).unwrap();
    lines.remove(last_output);
    let err = read(&lines.join("\n")).replay(origin()).unwrap_err();
    assert!(
        matches!(
            err,
            ReplayError::Diverged {
                expected: None,
                actual: Some(_),
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_replay_stops_at_the_instant_asked_and_describes_the_pool() {
    let recording = busy_recording();
    let all = recording.replay(origin()).unwrap();
    let middle = all.steps()[all.steps().len() / 2].at;
    let part = recording.replay_until(origin(), Some(middle)).unwrap();
    assert!(part.steps().len() < all.steps().len());
    assert!(part.steps().iter().all(|s| s.at <= middle));
    assert!(part.state().contains("generation"), "{}", part.state());
    assert!(all.to_string().lines().count() > all.steps().len());
}

#[test]
fn another_format_or_version_is_refused() {
    let text = write(&busy_recording());
    assert!(text.contains("\"version\":3"), "this crate writes version 3");
    // 2: before the establishment pace joined the pool's state.
    for found in [1, 2, 99] {
        let other = text.replacen("\"version\":3", &format!("\"version\":{found}"), 1);
        assert!(matches!(
            Recording::read_from(other.as_bytes()),
            Err(cmap_core::RecordingError::Version { found: f }) if f == found
        ));
    }
    assert!(matches!(
        Recording::read_from("{\"format\":\"other\"}\n".as_bytes()),
        Err(cmap_core::RecordingError::Format { line: 1, .. })
    ));
}

/// A checkout served at once returns its connection instead of an
/// output; the recording keeps it as `Served`, right after its input, and
/// a replay that served another connection is caught.
#[test]
fn a_checkout_served_at_once_is_recorded_with_its_connection() {
    let text = write(&busy_recording());
    let served: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("Served {"))
        .collect();
    assert!(!served.is_empty(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    for (n, _) in &served {
        assert!(lines[n - 1].contains("\"direct\":true"), "{}", lines[n - 1]);
    }
    let (n, line) = served[0];
    let altered = line.replace("connection: ConnectionId(", "connection: ConnectionId(9");
    let mut changed = lines.clone();
    changed[n] = &altered;
    let err = read(&changed.join("\n")).replay(origin()).unwrap_err();
    assert!(matches!(err, ReplayError::Diverged { .. }), "{err}");
}
