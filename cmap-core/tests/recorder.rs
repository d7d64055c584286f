//! The flight recorder: random runs of the core, recorded through a small
//! ring (so that segments roll and the oldest are dropped), replay exactly
//! from their snapshot; a recording that was altered does not.

mod support;

use std::time::{Duration, Instant};

use cmap_core::{
    Action, CheckOut, Clear, ConnectionId, EstablishError, EstablishErrorKind, Output, Pool, PoolOptions,
    Pooled, Recording, ReplayError, WaiterId,
};
use proptest::prelude::*;
use support::{origin, Conn};

/// One thing a driver may do.
#[derive(Debug, Clone)]
enum Op {
    CheckOut {
        direct: bool,
        deadline_ms: Option<u64>,
    },
    /// `direct`: through `handle_check_in_direct`, whose hand-over the
    /// recording must keep as the `Deliver` a replay makes.
    CheckIn {
        pick: usize,
        errored: bool,
        direct: bool,
    },
    Detach {
        pick: usize,
    },
    Establish {
        pick: usize,
        ok: bool,
        network: bool,
    },
    Cancel {
        pick: usize,
    },
    Clear {
        interrupt: bool,
    },
    Ready,
    Resize {
        min: u32,
        max: u32,
    },
    Events {
        enabled: bool,
        apart: bool,
    },
    Wait {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), proptest::option::of(0u64..300)).prop_map(|(direct, deadline_ms)| Op::CheckOut { direct, deadline_ms }),
        4 => (any::<usize>(), proptest::bool::weighted(0.1), any::<bool>()).prop_map(|(pick, errored, direct)| Op::CheckIn { pick, errored, direct }),
        1 => any::<usize>().prop_map(|pick| Op::Detach { pick }),
        4 => (any::<usize>(), proptest::bool::weighted(0.8), any::<bool>()).prop_map(|(pick, ok, network)| Op::Establish { pick, ok, network }),
        1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        1 => any::<bool>().prop_map(|interrupt| Op::Clear { interrupt }),
        2 => Just(Op::Ready),
        1 => (0u32..3, 0u32..6).prop_map(|(min, max)| Op::Resize { min, max }),
        1 => (proptest::bool::weighted(0.8), any::<bool>()).prop_map(|(enabled, apart)| Op::Events { enabled, apart }),
        3 => (0u64..400).prop_map(|ms| Op::Wait { ms }),
    ]
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

    fn drain(&mut self) {
        while let Some(output) = self.pool.poll_output() {
            match output {
                Output::Action(Action::Establish { id }) => self.pending.push(id),
                Output::Action(Action::AbortEstablish { .. }) => {}
                Output::Action(Action::Deliver { waiter, connection }) => {
                    self.waiting.retain(|w| *w != waiter);
                    self.held.push(connection);
                }
                Output::Action(Action::Fail { waiter, .. }) => self.waiting.retain(|w| *w != waiter),
                Output::Action(_) | Output::Event(_) => {}
            }
        }
        self.pool.take_events(&mut self.events);
        self.events.clear();
    }

    fn step(&mut self, op: &Op) {
        let now = self.now;
        let pick = |len: usize, at: usize| (len > 0).then(|| at % len);
        match *op {
            Op::CheckOut { direct, deadline_ms } => {
                let deadline = deadline_ms.map(|ms| now + Duration::from_millis(ms));
                if direct {
                    match self.pool.handle_check_out_direct(now, deadline) {
                        CheckOut::Ready(connection) => self.held.push(connection),
                        CheckOut::Later(waiter) => self.waiting.push(waiter),
                    }
                } else {
                    let waiter = self.pool.handle_check_out_until(now, deadline);
                    self.waiting.push(waiter);
                }
            }
            Op::CheckIn {
                pick: at,
                errored,
                direct,
            } => {
                if let Some(i) = pick(self.held.len(), at) {
                    let mut connection = self.held.swap_remove(i);
                    if errored {
                        connection.mark_errored();
                    }
                    if direct {
                        if let Some(handed) = self.pool.handle_check_in_direct(now, connection).unwrap() {
                            self.held.push(handed.connection);
                            self.waiting.retain(|w| *w != handed.waiter);
                        }
                    } else {
                        self.pool.handle_check_in(now, connection).unwrap();
                    }
                }
            }
            Op::Detach { pick: at } => {
                if let Some(i) = pick(self.held.len(), at) {
                    let connection = self.held.swap_remove(i);
                    self.pool.handle_detach(now, connection).unwrap();
                }
            }
            Op::Establish {
                pick: at,
                ok,
                network,
            } => {
                if let Some(i) = pick(self.pending.len(), at) {
                    let id = self.pending.swap_remove(i);
                    if ok {
                        let _ = self.pool.handle_established(now, id, Conn(id.0), None);
                    } else {
                        let kind = if network {
                            EstablishErrorKind::Network
                        } else {
                            EstablishErrorKind::Other
                        };
                        let cause = std::io::Error::other(format!("connection {id} refused"));
                        let _ = self
                            .pool
                            .handle_establish_failed(now, id, EstablishError::new(kind, cause));
                    }
                }
            }
            Op::Cancel { pick: at } => {
                if let Some(i) = pick(self.waiting.len(), at) {
                    let waiter = self.waiting.swap_remove(i);
                    let _ = self.pool.handle_cancel(now, waiter);
                }
            }
            Op::Clear { interrupt } => {
                let clear = Clear {
                    interrupt_in_use: interrupt,
                    cause: Some("test".into()),
                    ..Clear::default()
                };
                self.pool.handle_clear(now, clear).unwrap();
            }
            Op::Ready => self.pool.handle_ready(now).unwrap(),
            Op::Resize { min, max } => {
                let _ = self.pool.handle_resize(now, min, max);
            }
            Op::Events { enabled, apart } => {
                self.pool.set_events_enabled(enabled);
                self.pool.set_events_apart(apart);
            }
            Op::Wait { ms } => {
                self.now += Duration::from_millis(ms);
                if self.pool.poll_timeout().is_some_and(|t| t <= self.now) {
                    self.pool.handle_timeout(self.now);
                }
            }
        }
        self.drain();
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
    driver.pool.handle_ready(driver.now).unwrap();
    driver.drain();
    for op in ops {
        driver.step(op);
    }
    driver.pool.handle_close(driver.now);
    driver.drain();
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
    for round in 0..20u64 {
        ops.push(Op::CheckOut {
            direct: round % 2 == 0,
            deadline_ms: Some(100),
        });
        ops.push(Op::Establish {
            pick: 0,
            ok: round % 5 != 3,
            network: round % 2 == 0,
        });
        ops.push(Op::Wait { ms: 30 });
        ops.push(Op::CheckIn {
            pick: 0,
            errored: round % 7 == 6,
            direct: round % 2 == 1,
        });
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
