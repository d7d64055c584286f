//! The flight recorder: random runs of the core, recorded through a small
//! ring (so that segments roll and the oldest are dropped), replay exactly
//! from their snapshot; a recording that was altered does not. The runs
//! are the testing kit's steps (`cmap_core::testing`), applied by its
//! `step` with its books, which check every output and the pool's counts
//! on the way.

mod support;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use cmap_core::testing::{self, Books, KeepsBooks, Step};
use cmap_core::virtual_time::{self, VirtualDriver};
use cmap_core::{HandleError, Handled, Input, InputKind, Output, Pool, PoolOptions, Recording, ReplayError};
use proptest::prelude::*;
use support::origin;

/// How often each kind of input comes; every kind of `InputKind::ALL`
/// but a close, which ends every run.
fn weight(kind: InputKind) -> u32 {
    match kind {
        InputKind::CheckOut | InputKind::CheckIn | InputKind::Established => 4,
        InputKind::Ready => 2,
        InputKind::Close => 0,
        _ => 1,
    }
}

/// A step of the testing kit: an input of any kind drawn by `weight`
/// (`testing::Step::input`), its arguments from the kit's books; or time
/// passing, up to 400 ms.
fn step() -> impl Strategy<Value = Step> {
    let inputs = InputKind::ALL.into_iter().filter(|k| weight(*k) > 0).map(|kind| {
        // Short deadlines mostly; any number for the sizes of a resize.
        let value = prop_oneof![3 => 0u16..300, 1 => any::<u16>()];
        let input = (any::<u8>(), value, any::<u8>())
            .prop_map(move |(pick, value, flags)| Step::input(kind, pick, value, flags));
        (weight(kind), input.boxed())
    });
    let wait = (0u16..400).prop_map(Step::Advance).boxed();
    proptest::strategy::Union::new_weighted(inputs.chain([(3, wait)]).collect())
}

/// A driver of the core on virtual time, with the flight recorder on,
/// that keeps the testing kit's books: every action is checked against
/// them, and they against the pool's counts after every input.
struct Driver {
    pool: Pool<u64>,
    now: Instant,
    books: Books,
    /// Events kept apart, taken after every input.
    events: Vec<cmap_core::Event>,
    /// `Deliver` actions performed (a direct check-in's hand-over is
    /// not one).
    delivered: usize,
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
            books: Books::default(),
            events: Vec::new(),
            delivered: 0,
        }
    }
}

/// The driver on cmap-core's virtual-time loop, its books kept by the kit.
impl VirtualDriver<u64> for Driver {
    type Error = Infallible;

    fn pool(&mut self) -> &mut Pool<u64> {
        &mut self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    fn answered(&mut self, answer: Result<Handled<u64>, HandleError<u64>>) -> Result<(), Infallible> {
        self.books.answered(answer);
        Ok(())
    }

    fn perform(&mut self, output: Output<u64>) -> Result<(), Infallible> {
        if let Output::Action(action) = output {
            self.delivered += usize::from(matches!(action, cmap_core::Action::Deliver { .. }));
            self.books.perform(action);
        }
        Ok(())
    }

    fn settled(&mut self) -> Result<(), Infallible> {
        self.pool.take_events(&mut self.events);
        self.events.clear();
        self.books.check(&self.pool);
        Ok(())
    }
}

impl KeepsBooks for Driver {
    fn books(&mut self) -> &mut Books {
        &mut self.books
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

/// Runs `steps` between a ready and a close, recorded through a ring of
/// `capacity` entries; returns the recording, the pool's counts at the end
/// and the `Deliver` actions the driver performed.
fn record(steps: &[Step], capacity: usize, opts: PoolOptions) -> (Recording, cmap_core::Status, usize) {
    let mut driver = Driver::new(opts, capacity);
    let Ok(()) = virtual_time::apply(&mut driver, Input::Ready);
    for next in steps {
        let Ok(()) = testing::step(&mut driver, *next);
    }
    let Ok(()) = virtual_time::apply(&mut driver, Input::Close);
    assert_eq!(driver.pool.recording_incident(), None);
    let recording = driver.pool.recording().expect("recording");
    (recording, driver.pool.status(), driver.delivered)
}

proptest! {
    /// Every recorded run replays with the same outputs, through a file,
    /// and ends in the same state.
    #[test]
    fn random_runs_replay_exactly(
        steps in proptest::collection::vec(step(), 1..250),
        capacity in prop_oneof![Just(32usize), Just(100), Just(100_000)],
        max in 1u32..5,
        min in 0u32..3,
        lifetime in any::<bool>(),
    ) {
        replays_exactly(&steps, capacity, options(max, min.min(max), lifetime))?;
    }
}

/// The property: `steps`, recorded through a ring of `capacity`, written
/// and read back, replay with the same outputs and end in the same state.
fn replays_exactly(steps: &[Step], capacity: usize, options: PoolOptions) -> Result<(), TestCaseError> {
    let (recording, status, _) = record(steps, capacity, options);
    let mut file = Vec::new();
    recording.write_to(&mut file).unwrap();
    let read = Recording::read_from(&file[..]).unwrap();
    prop_assert_eq!(&read, &recording);
    let replay = read
        .replay(origin())
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(replay.steps().len(), recording.inputs());
    prop_assert_eq!(replay.steps().last().map(|s| s.status), Some(status));
    if capacity == 100_000 {
        // A ring this large keeps the whole run, from its first input.
        prop_assert_eq!(replay.steps()[0].input.as_str(), "\"Ready\"");
    } else {
        prop_assert!(recording.inputs() + recording.outputs() <= capacity * 2);
    }
    Ok(())
}

/// The failure proptest once saved (its seed drew the driver's own `Op`s,
/// which the kit's steps replaced): events switched on and kept in the
/// stream, check-ins with nothing held, then a checkout, on a pool of one.
#[test]
fn the_saved_failure_stays_fixed() -> Result<(), TestCaseError> {
    let events = [
        Step::input(InputKind::EventsEnabled, 0, 0, 0),
        Step::input(InputKind::EventsApart, 0, 0, 0),
    ];
    let check_in = Step::input(InputKind::CheckIn, 0, 0, 0);
    let mut steps = events.to_vec();
    steps.extend([check_in; 3]);
    steps.extend(events);
    steps.extend([check_in, Step::input(InputKind::CheckOut, 0, 0, 0)]);
    replays_exactly(&steps, 100_000, options(1, 0, false))
}

/// A run with a bit of everything, for the tests that alter it.
fn busy_recording() -> Recording {
    // The kit's flags (`testing::Step::Input`): 1 a deadline of its own
    // (`value` ms) or an errored check-in, 2 a direct checkout, 4 a direct
    // check-in. An establishment failure's `value` 0 is a network error,
    // 2 another.
    let mut steps = Vec::new();
    for round in 0..20u16 {
        let direct = if round % 2 == 0 { 2 } else { 0 };
        steps.push(Step::input(InputKind::CheckOut, 0, 100, 1 | direct));
        if round % 5 != 3 {
            steps.push(Step::input(InputKind::Established, 0, 0, 0));
        } else {
            let network = if round % 2 == 0 { 0 } else { 2 };
            steps.push(Step::input(InputKind::EstablishFailed, 0, network, 0));
        }
        steps.push(Step::Advance(30));
        let errored = if round % 7 == 6 { 1 } else { 0 };
        let direct = if round % 2 == 1 { 4 } else { 0 };
        steps.push(Step::input(InputKind::CheckIn, 0, 0, errored | direct));
    }
    record(&steps, 100_000, options(3, 1, false)).0
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
    assert!(text.contains("\"version\":4"), "this crate writes version 4");
    // 2: before the establishment pace joined the pool's state; 3: before
    // its probe below the minimum.
    for found in [1, 2, 3, 99] {
        let other = text.replacen("\"version\":4", &format!("\"version\":{found}"), 1);
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

/// A check-in through `handle_check_in_direct` is `Input::CheckIn`: a
/// connection it hands straight to the oldest waiter is recorded as the
/// `Deliver` it stands for, under the check-in, and a replay, which
/// applies the input through `Pool::handle`, gives that very `Deliver`.
#[test]
fn a_check_in_handed_over_directly_replays_as_its_deliver() {
    let steps = [
        // One connection at most: the first checkout gets it by action,
        // the second waits for it.
        Step::input(InputKind::CheckOut, 0, 0, 0),
        Step::input(InputKind::Established, 0, 0, 0),
        Step::input(InputKind::CheckOut, 0, 0, 0),
        // Handed back directly: it goes to the waiting checkout.
        Step::input(InputKind::CheckIn, 0, 0, 4),
    ];
    let (recording, _, delivered) = record(&steps, 100_000, options(1, 0, false));
    assert_eq!(
        delivered, 1,
        "the second checkout was served by hand-over, not by action"
    );
    let replay = recording.replay(origin()).unwrap();
    let check_in = replay
        .steps()
        .iter()
        .find(|s| s.input.contains("CheckIn"))
        .expect("the check-in was recorded");
    let deliver = check_in
        .outputs
        .iter()
        .find(|o| o.contains("Deliver"))
        .unwrap_or_else(|| panic!("no Deliver under the check-in: {check_in:?}"));
    assert!(deliver.contains("WaiterId(2)"), "{deliver}");
}
