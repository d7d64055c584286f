//! Property tests: random command sequences drive the pool through every
//! input, and a reference model kept here checks every output and the
//! pool's counts after every step.
//!
//! After every step: `check_invariants`; total <= maxPoolSize (or, after a
//! resize down, no more than the resize left nor than any step since, with
//! nothing available) and pending <= maxConnecting; `status()` equals the model's counts (every connection
//! pending, available, held by the test or closed, exactly once); waiters
//! served in arrival order, never after their deadline, never timed out
//! before it, never left queued past it, and `poll_timeout` no later than
//! the earliest deadline nor in the past after the timer fired; ids 1, 2,
//! 3... never reused; a delivered connection is established, not in use,
//! not closed, not stale, not idle too long, not past its lifetime; events
//! well formed and in step with the actions. After the sequence, a driver
//! that does its part (checks in, establishes, fires timers) gets every
//! waiter an outcome.
//!
//! The model keeps its own generations: it counts the clears (and the
//! establishment errors that clear: only those of the current generation),
//! records each connection's generation when its `Establish` comes out (in
//! load-balanced mode, its service's when established), and judges
//! staleness from that record, never from the pool's. On that basis it
//! also checks: the pool's generation equals its count; a delivered
//! connection carries the generation it was created in; every
//! `ConnectionClosed` and `Close` gives the expected reason (error, stale,
//! idle, poolClosed, detached, lifetime when it may have ended; an
//! interrupted connection is reported stale); `PoolCleared` comes before
//! the stale closes and cleared checkouts it causes, and `PoolClosed` after
//! the closes and failures of the close; an interrupting clear leaves no
//! in-use (or, non-load-balanced, pending) connection of a generation it
//! ended uninterrupted; `Establish` comes only while waiters outnumber
//! pending connections or below minPoolSize; checkout durations (events
//! and `Stats::wait_time`) run from the checkout's start.
//!
//! Establishment failures come in three kinds (network, authentication,
//! other), and the options turn `keep_waiting_on_overload` and a reconnect
//! backoff on and off. The model follows which checkout each connection was
//! started for (the first queued one, in arrival order, that none is being
//! made for; none when it is for minPoolSize), and from that alone predicts
//! each failure's outcome (spec: "Backpressure-enabled", "Establishing a
//! Connection"): an unlabelled failure of the current generation clears the
//! pool under `EstablishFailure::ClearPool`, a labelled (network) one never
//! does and leaves the pool's state as it was; the connection closes with
//! reason `error` and its `ConnectionClosed` carries the establishment
//! error (no other close carries one); the checkout it was made for fails
//! at once with a `ConnectionError` for it, or, with
//! `keep_waiting_on_overload` and a labelled failure, is still waiting
//! after the step (and later fails only at its deadline, as any waiter);
//! no other checkout fails with it, and none fails as cleared in a step
//! that clears nothing; `SystemOverloadedError` and `RetryableError` are on
//! the error of the `Fail`, its `ConnectionCheckOutFailed` and the
//! `ConnectionClosed` for a network failure and on none for the others. The
//! backoff's timing is jittered; the model checks that one that holds
//! starts no connection in the rest of the failing step, that a ready pool
//! with more checkouts waiting than connections pending then wakes no
//! later than the pause's bound (15 ms doubled per consecutive failure,
//! counted again from the last success or give-up, capped by
//! `max_delay_while_waiting` and the full delay), and that
//! `ReconnectGaveUp` comes exactly with the failure at which
//! `give_up_after` has passed since the first failure without a success.
//! No `Establish` at any point of an input goes beyond maxConnecting, nor
//! beyond one probe while the last establishment failed with a network
//! error (either pace; `Stats::connecting_limit` says 1 meanwhile).
//!
//! With an adaptive establishment pace (`adaptive_connecting`, in 30% of
//! the cases), the model predicts the pace from the connects' latencies
//! (on the pool's clock), labelled refusals and clears alone (`PaceModel`), and
//! checks after every step that `Stats::connecting_limit` is exactly that,
//! that no `Establish` goes beyond the pace of its moment (before or after
//! the step's result moved it), that pending connections never exceed the
//! pace's maximum, and that a step which added pending connections left no
//! more than the pace allowed.
//! Requesters are followed exactly with events merged among the actions
//! (`Sim::exact`); with events off or apart, the model checks what holds
//! whichever checkout a connection was for.
//!
//! Resizing (`handle_resize`, beyond the spec) changes the model's own
//! minPoolSize and maxPoolSize, which every check above follows, and the
//! pool's options must say the same after every step. From its books alone
//! (which includes the order in which connections became available) the
//! model predicts a resize: refused on a closed pool or with min above a
//! non-zero max, and then no output and no change; otherwise
//! `PoolResized` first, then exactly the least recently used available
//! connections above the new maximum closed with reason `Shrunk`, in that
//! order, and, growing, as many connections started as waiters, the new
//! sizes and maxConnecting allow (then towards the new minimum with a
//! maintenance interval) unless a reconnect backoff may hold. A connection
//! checked in or established while the pool holds more than maxPoolSize
//! counting it is closed with reason `Shrunk` (whatever else it is, bar a
//! closed pool), no checkout is served in that step, and a check-in
//! closed so does not count in `returns_bad`; no other close says
//! `Shrunk`.
//!
//! A force close (`handle_force_close`, beyond the spec) is refused until
//! the pool is closed; then it interrupts exactly the connections in use
//! not interrupted yet, each closed with reason `poolClosed` and counted
//! in its answer, and disposed of (reason `stale`) when it comes back.
//!
//! `PROPTEST_CASES` sets the number of cases (256 by default; CI runs
//! 10,000: about 3 s each in release, 15 s in debug, on 2 cores).
//!
//! The test binary's layout: this file holds the generated options
//! (`Opts`), the run of one sequence and the proptest entry points;
//! `steps.rs` the generated steps: `cmap_core::Input`s drawn by kind from
//! `InputKind::ALL`, and the driver's own behaviours that are not inputs
//! (its clock, another pool, late results); `model.rs` the reference model
//! and its books (`Sim`); `commands/` one handler per kind of input and
//! per behaviour, which `Sim::step` dispatches to, applying each input
//! through `Pool::handle`; `outputs.rs` the judging of each output as it
//! comes; `checks.rs` the checks after every step; `saved.rs` the
//! failures found in the past, as steps. New failures are saved to
//! `properties.proptest-regressions` beside this file (see `config`).

#[path = "../support.rs"]
mod support;

/// `ensure!(condition, format...)`: return the formatted error unless the
/// condition holds. Defined before the modules so that they all see it.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

mod checks;
mod commands;
mod model;
mod outputs;
mod saved;
mod steps;

use std::time::{Duration, Instant};

use cmap_core::{AdaptiveConnecting, EstablishFailure, InputKind, PoolOptions, Reconnect};
use model::Sim;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use steps::{step, Drawn, Step, DIRECT};
use support::origin;

/// Connections handed in as late results carry this mark, so that their
/// disposal is told apart from the closing of the pool's own connection.
const LATE: u64 = 1 << 40;

// ----- generated input --------------------------------------------------

/// Pool options, kept as plain data so that proptest can print and shrink
/// them.
#[derive(Debug, Clone)]
struct Opts {
    max_pool_size: u32,
    min_pool_size: u32,
    max_connecting: u32,
    /// An adaptive establishment pace (min, max) instead of
    /// `max_connecting`.
    adaptive: Option<(u32, u32)>,
    wait_queue_timeout_ms: Option<u64>,
    max_idle_ms: Option<u64>,
    maintenance_ms: Option<u64>,
    lifetime: Option<(u64, f64)>,
    keep_ready: bool,
    /// `keep_waiting_on_overload`.
    keep_waiting: bool,
    /// (initial delay, max delay, give up after, max delay while
    /// waiting), in ms.
    reconnect: Option<(u64, u64, Option<u64>, u64)>,
    load_balanced: bool,
    seed: u64,
    start_ready: bool,
}

impl Opts {
    fn build(&self) -> PoolOptions {
        let ms = Duration::from_millis;
        let mut b = PoolOptions::builder()
            .max_pool_size(self.max_pool_size)
            .min_pool_size(self.min_pool_size)
            .max_connecting(self.max_connecting)
            .adaptive_connecting(self.adaptive.map(|(min, max)| AdaptiveConnecting { min, max }))
            .maintenance_interval(self.maintenance_ms.map(ms))
            .load_balanced(self.load_balanced)
            .seed(self.seed)
            .establish_failure(if self.keep_ready {
                EstablishFailure::KeepReady
            } else {
                EstablishFailure::ClearPool
            })
            .keep_waiting_on_overload(self.keep_waiting)
            .reconnect(self.reconnect.map(|(initial, max, give_up, waiting)| Reconnect {
                initial_delay: ms(initial),
                max_delay: ms(max),
                give_up_after: give_up.map(ms),
                max_delay_while_waiting: ms(waiting),
            }));
        if let Some(t) = self.wait_queue_timeout_ms {
            b = b.wait_queue_timeout(ms(t));
        }
        if let Some(t) = self.max_idle_ms {
            b = b.max_idle_time(ms(t));
        }
        if let Some((lifetime, jitter)) = self.lifetime {
            b = b.max_lifetime(ms(lifetime), jitter);
        }
        b.build().expect("generated options are valid")
    }
}

fn opts() -> impl Strategy<Value = Opts> {
    (0..=6u32)
        .prop_flat_map(|max| {
            let min = if max == 0 { 0..=3 } else { 0..=max };
            (
                (
                    Just(max),
                    min,
                    1..=3u32,
                    prop::option::weighted(0.3, (1..=2u32, 0..=4u32).prop_map(|(lo, up)| (lo, lo + up))),
                ),
                (
                    prop::option::weighted(0.6, 1..=500u64),
                    prop::option::weighted(0.4, 1..=1500u64),
                    prop::option::weighted(0.6, 1..=1000u64),
                    prop::option::weighted(0.15, (1..=3000u64, 0.0..=1.0f64)),
                ),
                (
                    any::<bool>(),
                    any::<bool>(),
                    prop::option::weighted(
                        0.4,
                        (1..=200u64, 0..=1800u64, prop::option::of(1..=1000u64), 1..=50u64)
                            .prop_map(|(i, extra, g, w)| (i, i + extra, g, w)),
                    ),
                    prop::bool::weighted(0.12),
                    any::<u64>(),
                    prop::bool::weighted(0.8),
                ),
            )
        })
        .prop_map(
            |(
                (max, min, mc, adaptive),
                (wq, idle, maint, lifetime),
                (keep, keep_waiting, reconnect, lb, seed, ready),
            )| Opts {
                max_pool_size: max,
                min_pool_size: min,
                max_connecting: mc,
                adaptive,
                wait_queue_timeout_ms: wq,
                max_idle_ms: idle,
                maintenance_ms: maint,
                lifetime,
                keep_ready: keep,
                keep_waiting,
                reconnect,
                load_balanced: lb,
                seed,
                start_ready: ready,
            },
        )
}

/// How the simulated driver gets events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Events {
    /// Not built.
    Off,
    /// In the output stream, among the actions.
    Merged,
    /// Kept apart, taken after each input with `take_events`.
    Apart,
}

/// Runs `steps`, checking after every step; the error names the step.
fn run(opts: &Opts, steps: &[Step], t0: Instant, mode: Events, record: bool) -> Result<Sim, String> {
    let mut sim = Sim::new(opts, t0, mode, record)?;
    for (i, step) in steps.iter().enumerate() {
        sim.step(step)
            .map_err(|e| format!("step {i} {step:?} at +{:?}: {e}", sim.elapsed()))?;
    }
    // Then a driver that does its part: every connection held goes back,
    // every establishment succeeds, every timer fires. Nobody may be left
    // waiting for good. Timers may be due every millisecond (a short
    // maintenance interval) while a reconnect backoff of up to 2 s holds the
    // queue back, so this driver sleeps at least 5 ms, and the bound is in
    // virtual time: any backoff or deadline the options allow is over by
    // then.
    let start = sim.wall;
    let mut steps = 0usize;
    while !(sim.waiting.is_empty() && sim.held.is_empty() && sim.pending.is_empty()) {
        let step = if !sim.held.is_empty() {
            // Half of them through `handle_check_in_direct`.
            let direct = if steps.is_multiple_of(2) { DIRECT } else { 0 };
            Step::Input(Drawn {
                flags: direct,
                ..Drawn::of(InputKind::CheckIn)
            })
        } else if !sim.pending.is_empty() {
            Step::Input(Drawn::of(InputKind::Established))
        } else if let Some(t) = sim.pool.poll_timeout() {
            if t.saturating_duration_since(sim.wall) < Duration::from_millis(5) {
                Step::Advance { ms: 5 }
            } else {
                Step::FireTimer { early: false }
            }
        } else {
            return Err(format!(
                "waiters {:?} wait with nothing held, pending or scheduled: {:?}",
                sim.waiting,
                sim.pool.status()
            ));
        };
        sim.step(&step)
            .map_err(|e| format!("winding down, {step:?} at +{:?}: {e}", sim.elapsed()))?;
        steps += 1;
        if sim.wall - start > Duration::from_secs(30) || steps > 100_000 {
            return Err(format!(
                "waiters {:?} are never served: {:?}",
                sim.waiting,
                sim.pool.status()
            ));
        }
    }
    Ok(sim)
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        // ChaCha, the default, takes most of the time of an unoptimized
        // build; these cases need variety, not cryptographic quality.
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        // Saved failures stay beside this file under their old name. The
        // default would look for a `lib.rs` or `main.rs` above the source
        // (this very `main.rs`) and use `tests/proptest-regressions/main.txt`.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/properties/properties.proptest-regressions"
        )))),
        ..ProptestConfig::with_cases(cases)
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn pool_matches_the_model(opts in opts(), steps in prop::collection::vec(step(), 0..=200)) {
        if let Err(e) = run(&opts, &steps, origin(), Events::Merged, false) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn same_commands_same_outputs(opts in opts(), steps in prop::collection::vec(step(), 0..=200)) {
        same_outputs(&opts, &steps)?;
    }
}

/// The same inputs give the same outputs, whatever the absolute time;
/// with events off, the same actions (and the loud `ReconnectGaveUp`);
/// with events kept apart, the same events and the same actions, each in
/// the same order.
fn same_outputs(opts: &Opts, steps: &[Step]) -> Result<(), TestCaseError> {
    let t0 = origin();
    let first = run(opts, steps, t0, Events::Merged, true).map_err(TestCaseError::fail)?;
    let later = t0 + Duration::from_secs(3600);
    let second = run(opts, steps, later, Events::Merged, true).map_err(TestCaseError::fail)?;
    let quiet = run(opts, steps, t0, Events::Off, true).map_err(TestCaseError::fail)?;
    let apart = run(opts, steps, t0, Events::Apart, true).map_err(TestCaseError::fail)?;
    let first = first.transcript.unwrap();
    prop_assert_eq!(&first, &second.transcript.unwrap());
    let quiet_part = |l: &&String| !l.starts_with("Event(") || l.starts_with("Event(ReconnectGaveUp");
    let actions: Vec<&String> = first.iter().filter(quiet_part).collect();
    let quiet = quiet.transcript.unwrap();
    prop_assert_eq!(actions, quiet.iter().collect::<Vec<_>>());
    let apart = apart.transcript.unwrap();
    let (events, actions): (Vec<&String>, Vec<&String>) = first.iter().partition(|l| l.starts_with("Event("));
    let (apart_events, apart_actions): (Vec<&String>, Vec<&String>) =
        apart.iter().partition(|l| l.starts_with("Event("));
    prop_assert_eq!(events, apart_events);
    prop_assert_eq!(actions, apart_actions);
    Ok(())
}

/// The generator is worth its cases only if it reaches every kind of
/// outcome; this counts them over a fixed-seed sample.
#[test]
fn generator_reaches_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{RngSeed, TestRunner};

    let config = ProptestConfig {
        rng_seed: RngSeed::Fixed(7),
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = (opts(), prop::collection::vec(step(), 0..=200));
    let needles = [
        "Deliver",
        "Fail { waiter: WaiterId(",
        "WaitQueueTimeout",
        "PoolCleared {",
        "PoolClosed {",
        "ConnectionError {",
        "Interrupt {",
        "AbortEstablish",
        "reason: Idle",
        "reason: Stale",
        "reason: Error",
        "reason: Lifetime",
        "reason: PoolClosed",
        "reason: Detached",
        "ReconnectGaveUp",
        "-> Ok(())",
        "-> Err(UnknownWaiter",
        "-> Err(UnknownConnection",
        "-> Err(ClearMode",
        "-> Err(PoolClosed",
        "late result",
        "Network -> Ok",
        "Authentication -> Ok",
        "Other -> Ok",
        "source: EstablishError { kind: Network",
        "source: EstablishError { kind: Authentication",
        "PoolResized {",
        "reason: Shrunk",
        "-> Err(InvalidSize",
        "-> Err(ResizeClosed",
        "-> Err(NotClosed",
    ];
    let mut counts = vec![0usize; needles.len()];
    let mut kept_waiting = 0;
    let mut shrunk_on_arrival = 0;
    let mut forced = 0;
    let mut handled = std::collections::BTreeSet::new();
    for _ in 0..300 {
        let (opts, steps) = strategy.new_tree(&mut runner).unwrap().current();
        let sim = run(&opts, &steps, origin(), Events::Merged, true).unwrap();
        kept_waiting += sim.kept_waiting;
        shrunk_on_arrival += sim.shrunk_on_arrival;
        forced += sim.forced;
        handled.extend(sim.handled);
        for line in sim.transcript.unwrap() {
            for (n, needle) in needles.iter().enumerate() {
                counts[n] += usize::from(line.contains(needle));
            }
        }
    }
    let report: Vec<String> = needles
        .iter()
        .zip(&counts)
        .map(|(n, c)| format!("{n}: {c}"))
        .collect();
    eprintln!("{}", report.join("\n"));
    eprintln!("checkouts that kept waiting on an overload: {kept_waiting}");
    eprintln!("connections closed for the size as they arrived: {shrunk_on_arrival}");
    eprintln!("connections in use interrupted by a force close: {forced}");
    for (needle, count) in needles.iter().zip(&counts) {
        assert!(*count > 0, "no `{needle}` in 300 cases:\n{}", report.join("\n"));
    }
    assert!(
        kept_waiting > 0,
        "no checkout kept waiting on an overload in 300 cases"
    );
    assert!(
        shrunk_on_arrival > 0,
        "no connection closed for the size as it arrived in 300 cases"
    );
    assert!(
        forced > 0,
        "no connection in use forced by a force close in 300 cases"
    );
    // Every kind of input drawn reached the pool.
    for kind in InputKind::ALL {
        let aside = steps::SET_ASIDE.iter().any(|(k, _)| *k == kind);
        assert!(aside || handled.contains(&kind), "no {kind:?} in 300 cases");
    }
}
