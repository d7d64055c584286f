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
//! backoff's timing is jittered and not followed; the model checks that
//! one that holds starts no connection in the rest of the failing step,
//! and that `ReconnectGaveUp` comes exactly with the failure at which
//! `give_up_after` has passed since the first failure without a success.
//! No `Establish` at any point of an input goes beyond maxConnecting.
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
//! `PROPTEST_CASES` sets the number of cases (256 by default; CI runs
//! 10,000: about 3 s each in release, 15 s in debug, on 2 cores).

mod support;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_core::{
    Action, CheckOut, CheckOutError, Clear, ClosedReason, ConnectionId, EstablishError, EstablishErrorKind,
    EstablishFailure, Event, OptionsError, Output, Pool, PoolOptions, PoolState, Pooled, Reconnect,
    ServiceId, UsageError, WaiterId,
};
use proptest::prelude::*;
use support::{fail_establish, fail_establish_with, origin, Conn};

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
                (Just(max), min, 1..=3u32),
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
                (max, min, mc),
                (wq, idle, maint, lifetime),
                (keep, keep_waiting, reconnect, lb, seed, ready),
            )| Opts {
                max_pool_size: max,
                min_pool_size: min,
                max_connecting: mc,
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

/// Which existing checkout a cancel names.
#[derive(Debug, Clone, Copy)]
enum CancelTarget {
    /// One still queued.
    Waiting,
    /// One already served, failed or cancelled.
    Resolved,
    /// An id never issued.
    Unknown,
}

/// The kind of an establishment failure (spec: "Establishing a
/// Connection").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailKind {
    /// A network error or timeout: labelled `SystemOverloadedError` and
    /// `RetryableError`; never clears the pool.
    Network,
    /// The authentication step failed: unlabelled.
    Authentication,
    /// DNS, TLS validation, an error reply to `hello`: unlabelled.
    Other,
}

impl FailKind {
    fn kind(self) -> EstablishErrorKind {
        match self {
            FailKind::Network => EstablishErrorKind::Network,
            FailKind::Authentication => EstablishErrorKind::Authentication,
            FailKind::Other => EstablishErrorKind::Other,
        }
    }

    fn labelled(self) -> bool {
        self == FailKind::Network
    }
}

/// One input. `pick`s choose among what exists at that point (modulo its
/// count); a pick with nothing to choose from does nothing.
#[derive(Debug, Clone)]
enum Cmd {
    /// `handle_check_out` with the options' timeout, passing a `now` that
    /// is `stale_ms` behind the clock (a caller that read the clock before
    /// taking the lock).
    CheckOut {
        stale_ms: u64,
    },
    /// `handle_check_out_until` (or, `direct`, `handle_check_out_direct`)
    /// with a deadline `offset_ms` from now (may be in the past), or none.
    CheckOutUntil {
        offset_ms: Option<i64>,
        direct: bool,
    },
    CheckIn {
        pick: usize,
        errored: bool,
    },
    Detach {
        pick: usize,
    },
    /// Check in (or detach) a held connection to another pool: refused.
    WrongPool {
        pick: usize,
        detach: bool,
    },
    Established {
        pick: usize,
        service: u8,
    },
    EstablishFailed {
        pick: usize,
        kind: FailKind,
    },
    /// A result for a connection that is not pending (aborted, or already
    /// reported).
    LateResult {
        pick: usize,
        ok: bool,
    },
    /// A result for an id never issued.
    UnknownResult {
        ahead: u64,
        ok: bool,
    },
    Cancel {
        pick: usize,
        target: CancelTarget,
    },
    Clear {
        interrupt: bool,
        service: u8,
        wrong_mode: bool,
    },
    Ready,
    Close,
    /// Time passes and the timer fires.
    Advance {
        ms: u64,
    },
    /// A tiny step, to land right at or beside deadlines.
    Nudge {
        ns: u64,
    },
    /// The driver's timer fires at `poll_timeout` (or 1 ns before it).
    FireTimer {
        early: bool,
    },
    /// The clock moves without the timer firing; the next input is late.
    Jump {
        ms: u64,
    },
    /// A spurious timer call with an old `now`.
    StaleTimeout {
        ms: u64,
    },
    /// The clock moves to `offset_ns` from the instant the connection made
    /// available last reaches `maxIdleTimeMS`, and a checkout follows: the
    /// idle rule's boundary, which whole milliseconds seldom hit.
    AtIdleEdge {
        offset_ns: i64,
    },
    /// `handle_resize` to these sizes (0: no limit); refused when `min`
    /// exceeds a non-zero `max`, or once the pool is closed.
    Resize {
        min: u32,
        max: u32,
    },
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let pick = any::<usize>();
    prop_oneof![
        40 => prop_oneof![9 => Just(0u64), 1 => 0..=5u64].prop_map(|stale_ms| Cmd::CheckOut { stale_ms }),
        15 => (prop::option::weighted(0.85, -100..=600i64), any::<bool>())
            .prop_map(|(offset_ms, direct)| Cmd::CheckOutUntil { offset_ms, direct }),
        36 => (pick, prop::bool::weighted(0.2)).prop_map(|(pick, errored)| Cmd::CheckIn { pick, errored }),
        5 => pick.prop_map(|pick| Cmd::Detach { pick }),
        2 => (pick, any::<bool>()).prop_map(|(pick, detach)| Cmd::WrongPool { pick, detach }),
        36 => (pick, 0..3u8).prop_map(|(pick, service)| Cmd::Established { pick, service }),
        8 => (
            pick,
            prop_oneof![
                3 => Just(FailKind::Network),
                1 => Just(FailKind::Authentication),
                1 => Just(FailKind::Other)
            ]
        )
            .prop_map(|(pick, kind)| Cmd::EstablishFailed { pick, kind }),
        8 => (pick, any::<bool>()).prop_map(|(pick, ok)| Cmd::LateResult { pick, ok }),
        2 => (0..3u64, any::<bool>()).prop_map(|(ahead, ok)| Cmd::UnknownResult { ahead, ok }),
        15 => (
            pick,
            prop_oneof![
                3 => Just(CancelTarget::Waiting),
                2 => Just(CancelTarget::Resolved),
                1 => Just(CancelTarget::Unknown)
            ]
        )
            .prop_map(|(pick, target)| Cmd::Cancel { pick, target }),
        6 => (any::<bool>(), 0..3u8, prop::bool::weighted(0.05))
            .prop_map(|(interrupt, service, wrong_mode)| Cmd::Clear { interrupt, service, wrong_mode }),
        20 => Just(Cmd::Ready),
        1 => Just(Cmd::Close),
        25 => (0..2000u64).prop_map(|ms| Cmd::Advance { ms }),
        8 => (0..1_000_000u64).prop_map(|ns| Cmd::Nudge { ns }),
        25 => any::<bool>().prop_map(|early| Cmd::FireTimer { early }),
        8 => (0..600u64).prop_map(|ms| Cmd::Jump { ms }),
        3 => (0..50u64).prop_map(|ms| Cmd::StaleTimeout { ms }),
        4 => (-1..=1i64).prop_map(|offset_ns| Cmd::AtIdleEdge { offset_ns }),
        8 => (0..=4u32, 0..=6u32).prop_map(|(min, max)| Cmd::Resize { min, max }),
    ]
}

// ----- the reference model ----------------------------------------------

/// Where a connection is, as the test sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CState {
    /// Being established (its `Establish` is out, no result reported).
    Pending,
    /// Abandoned by the pool (`AbortEstablish`): counted closed.
    Abandoned,
    /// Owned by the pool: available, or being checked in this step.
    Pooled,
    /// Checked out and held by the test.
    Held { interrupted: bool },
    /// An interrupted connection checked in: must be disposed this step.
    Disposing,
    /// Gone: closed, failed or detached.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WState {
    Waiting,
    Delivered,
    Failed,
    Cancelled,
}

#[derive(Debug)]
struct ConnModel {
    state: CState,
    /// The pool must have emitted exactly one `ConnectionClosed` for it.
    closed_counted: bool,
    /// When its `Establish` came out.
    created_at: Instant,
    /// When it last became available.
    pooled_since: Instant,
    /// Its place in the available stack: the order in which connections
    /// last became available (the least recently used has the lowest).
    pooled_seq: u64,
    /// Its generation, by the model's own count of clears: the pool's when
    /// its `Establish` came out, or (load-balanced) its service's when it
    /// was established.
    generation: u32,
    /// Its service (load-balanced), once established.
    service: Option<ServiceId>,
    /// While pending: the checkout it was started for, as the spec's
    /// "create a connection for the wait queue" picks it (the first one in
    /// arrival order that none is being made for); `None` when it was
    /// started for minPoolSize or that checkout has gone.
    requester: Option<u64>,
}

/// What the events said about a connection.
#[derive(Debug, Default)]
struct ConnEvents {
    ready: bool,
    closed: u32,
    checked_out: bool,
    /// The duration of its latest `ConnectionCheckedOut`, until the
    /// `Deliver` it announces.
    checked_out_for: Option<Duration>,
}

#[derive(Debug)]
struct WaiterModel {
    /// The pool's clock when the checkout started.
    started: Instant,
    deadline: Option<Instant>,
    state: WState,
    /// The spec name of the error it failed with.
    error: Option<&'static str>,
    /// The pending connection started for it, if any.
    requested: Option<u64>,
}

/// An establishment failure reported this step, and what the model
/// predicts must follow (spec: "Establishing a Connection",
/// "Backpressure-enabled").
#[derive(Debug)]
struct Failure {
    id: u64,
    kind: FailKind,
    /// The checkout that must fail at once with a `ConnectionError` for it
    /// (followed exactly only in `Sim::exact`).
    victim: Option<u64>,
    /// The checkout it was made for, which keeps waiting
    /// (`keep_waiting_on_overload` and a labelled failure).
    kept: Option<u64>,
    /// The pool's state before the step: a labelled failure leaves it.
    state_before: PoolState,
    /// The reconnect backoff holds new connections back for the rest of
    /// the step (a backoff that has not given up).
    backoff_holds: bool,
    /// The pool gives up reconnecting with this failure.
    gives_up: bool,
    /// Its `ConnectionClosed` came (what follows it comes after the
    /// backoff was set).
    closed_seen: bool,
    /// How many checkouts failed with a `ConnectionError` this step.
    connection_errors: u32,
}

/// What the model predicts of this step's accepted resize.
#[derive(Debug)]
struct ResizeStep {
    min: u32,
    max: u32,
    /// The available connections it closes for the size (reason
    /// `Shrunk`), least recently used first, in the order their `Close`
    /// actions must come; and their `ConnectionClosed` events.
    closes: VecDeque<u64>,
    closed_events: VecDeque<u64>,
    /// Its `PoolResized` came.
    announced: bool,
    /// How many connections must be pending after it (growing starts
    /// them for waiters, and towards the new minPoolSize); `None` while a
    /// reconnect backoff may hold them back (its timing is not followed).
    pending_after: Option<usize>,
}

/// A connection arriving this step (checked in, or established), and what
/// the model predicts for it against the pool's size.
#[derive(Debug)]
struct Arrival {
    id: u64,
    /// Whether the pool holds more than maxPoolSize counting it: then it
    /// is closed with reason `Shrunk` and serves no waiter. `None` when the
    /// input lets a checkout's deadline pass: the pending connection
    /// abandoned for it may bring the pool back within its size first.
    over: Option<bool>,
    /// The model's count of delivered checkouts when the step began.
    delivers: u64,
    /// `Stats::returns_bad` before a check-in, and by how much it must
    /// grow (`None`: either way).
    returns_bad: Option<(u64, Option<u64>)>,
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

struct Sim {
    pool: Pool<Conn>,
    other: Pool<Conn>,
    opts: Opts,
    events: bool,
    /// Events are taken with `take_events`, apart from the actions.
    apart: bool,
    wait_queue_timeout: Option<Duration>,
    t0: Instant,
    /// The driver's clock.
    wall: Instant,
    /// The latest `now` the pool was given: its notion of the present.
    pool_now: Instant,
    held: Vec<Pooled<Conn>>,
    /// By connection id - 1.
    conns: Vec<ConnModel>,
    pending: BTreeSet<u64>,
    not_pending: Vec<u64>,
    pooled: usize,
    held_live: usize,
    /// By waiter id - 1.
    waiters: Vec<WaiterModel>,
    waiting: BTreeSet<u64>,
    deadlines: BTreeSet<(Instant, u64)>,
    resolved: Vec<u64>,
    /// A late connection handed in this step, which must be disposed of.
    expected_late: Option<u64>,
    /// A connection checked in this step, and whether it must be closed.
    check_in_verdict: Option<(u64, bool)>,
    /// A checkout of a paused or closed pool this step, and the error it
    /// must fail with at once.
    check_out_verdict: Option<(WaiterId, &'static str)>,
    /// A checkout served directly (`handle_check_out_direct`): judged as
    /// the `Deliver` it stands for, after the input's events.
    served_directly: Option<Action<Conn>>,
    touched: Vec<u64>,
    /// The pool's generation by the model's own count of clears (never
    /// read from the pool; compared with it after every step).
    generation: u32,
    /// The generation when this step began: a connection started in a step
    /// that clears was started before the clear (after it, the pool is
    /// paused and starts none).
    step_generation: u32,
    /// Load-balanced: each service's generation and connection count, as
    /// the spec's map keeps them (an entry goes with its last connection).
    services: BTreeMap<ServiceId, (u32, u32)>,
    /// `handle_close` was called.
    closed: bool,
    /// The pool's `now` when this step began.
    step_started: Instant,
    /// This step's clear, if it took effect: (interrupt, service).
    step_clear: Option<(bool, Option<ServiceId>)>,
    /// The connection checked in this step, and whether it was errored.
    checking_in: Option<(u64, bool)>,
    /// The connection this step closes by its own input (detach, failed
    /// establishment) and the reason its `ConnectionClosed` must give.
    closing: Option<(u64, ClosedReason)>,
    /// The first event of this step that a clear causes (a stale close, a
    /// checkout failed as cleared), which must follow `PoolCleared`.
    step_caused: Option<String>,
    /// `PoolClosed` came this step: the closing is over.
    step_pool_closed: bool,
    /// The durations of `ConnectionCheckOutFailed` events not yet matched
    /// with their `Fail`.
    ev_fail_durations: VecDeque<Duration>,
    /// What `Stats::wait_time` must be: every delivered checkout's wait.
    wait_time: Duration,
    checkouts: u64,
    delivers: u64,
    fails: u64,
    cancels: u64,
    // From the events:
    ev_conns: Vec<ConnEvents>,
    ev_state: PoolState,
    ev_started: u64,
    ev_checked_out: u64,
    ev_failed: u64,
    /// Every output, for the determinism test.
    transcript: Option<Vec<String>>,
    /// Requesters are followed exactly: events come among the actions, in
    /// the order the pool made them, so the model sees where the time an
    /// input lets pass ends. Otherwise it cannot always tell what an
    /// `Establish` was started for, and checks only what holds whichever
    /// checkout it was.
    exact: bool,
    /// A checkout of this step not queued yet: the input first lets time
    /// pass, and what that starts comes before its
    /// `ConnectionCheckOutStarted`.
    unqueued: Option<u64>,
    /// The connection whose result this step reports, and its requester:
    /// still pending in the pool while the input lets time pass, until
    /// its `ConnectionReady` or `ConnectionClosed`.
    arriving: Option<(u64, Option<u64>)>,
    /// This step's establishment failure.
    failure: Option<Failure>,
    /// With a reconnect backoff: since when establishing has failed
    /// without a success (the pool gives up `give_up_after` from there).
    failing_since: Option<Instant>,
    /// `ReconnectGaveUp` events this step.
    gave_up_events: u32,
    /// Checkouts that kept waiting after their connection failed with an
    /// overload (for the generator's coverage).
    kept_waiting: u64,
    /// Bumped each time a connection becomes available (`pooled_seq`).
    pooled_seq: u64,
    /// This step's accepted resize.
    resize: Option<ResizeStep>,
    /// This step's arriving connection, against the pool's size.
    arrival: Option<Arrival>,
    /// While the pool holds more than maxPoolSize (after a resize down):
    /// the most it may hold, which never grows until it is back within
    /// its size.
    shrink_bound: Option<usize>,
    /// Outputs (events and actions) of this step so far.
    step_outputs: u32,
    /// Connections closed for the size as they arrived (for the
    /// generator's coverage).
    shrunk_on_arrival: u64,
}

impl Sim {
    fn new(opts: &Opts, t0: Instant, mode: Events, record: bool) -> Result<Sim, String> {
        let options = opts.build();
        let wait_queue_timeout = options.wait_queue_timeout();
        let mut pool = Pool::new(t0, "test:27017".parse().unwrap(), options);
        let events = mode != Events::Off;
        pool.set_events_enabled(events);
        let created = std::iter::from_fn(|| pool.poll_output()).count();
        ensure!(created <= 1, "a new pool emits only PoolCreated");
        pool.set_events_apart(mode == Events::Apart);
        let mut other = Pool::new(t0, "other:27017".parse().unwrap(), PoolOptions::default());
        while other.poll_output().is_some() {}
        let mut sim = Sim {
            pool,
            other,
            opts: opts.clone(),
            events,
            apart: mode == Events::Apart,
            wait_queue_timeout,
            t0,
            wall: t0,
            pool_now: t0,
            held: Vec::new(),
            conns: Vec::new(),
            pending: BTreeSet::new(),
            not_pending: Vec::new(),
            pooled: 0,
            held_live: 0,
            waiters: Vec::new(),
            waiting: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            resolved: Vec::new(),
            expected_late: None,
            check_in_verdict: None,
            check_out_verdict: None,
            served_directly: None,
            touched: Vec::new(),
            generation: 0,
            step_generation: 0,
            services: BTreeMap::new(),
            closed: false,
            step_started: t0,
            step_clear: None,
            checking_in: None,
            closing: None,
            step_caused: None,
            step_pool_closed: false,
            ev_fail_durations: VecDeque::new(),
            wait_time: Duration::ZERO,
            checkouts: 0,
            delivers: 0,
            fails: 0,
            cancels: 0,
            ev_conns: Vec::new(),
            ev_state: PoolState::Paused,
            ev_started: 0,
            ev_checked_out: 0,
            ev_failed: 0,
            transcript: record.then(Vec::new),
            exact: mode == Events::Merged,
            unqueued: None,
            arriving: None,
            failure: None,
            failing_since: None,
            gave_up_events: 0,
            kept_waiting: 0,
            pooled_seq: 0,
            resize: None,
            arrival: None,
            shrink_bound: None,
            step_outputs: 0,
            shrunk_on_arrival: 0,
        };
        if opts.start_ready {
            sim.step(&Cmd::Ready).map_err(|e| format!("initial ready: {e}"))?;
        }
        Ok(sim)
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        if let Some(t) = &mut self.transcript {
            t.push(line());
        }
    }

    /// The pool's `now` moves to `now` if that is later.
    fn told(&mut self, now: Instant) {
        self.pool_now = self.pool_now.max(now);
    }

    fn elapsed(&self) -> Duration {
        self.pool_now - self.t0
    }

    // ----- model transitions ---------------------------------------------

    fn conn(&mut self, id: u64) -> Result<&mut ConnModel, String> {
        let index = usize::try_from(id).unwrap().wrapping_sub(1);
        self.conns
            .get_mut(index)
            .ok_or_else(|| format!("connection {id} was never issued"))
    }

    /// Moves connection `id` from one of `from` to `to`, keeping counts.
    fn move_conn(&mut self, id: u64, from: &[CState], to: CState) -> Result<(), String> {
        // Inputs that make a connection available run at the clock's time.
        let since = self.pool_now.max(self.wall);
        if to == CState::Pooled {
            self.pooled_seq += 1;
        }
        let seq = self.pooled_seq;
        let c = self.conn(id)?;
        let was = c.state;
        ensure!(
            from.contains(&was),
            "connection {id} is {was:?}, expected one of {from:?} before becoming {to:?}"
        );
        c.state = to;
        if to == CState::Pooled {
            c.pooled_since = since;
            c.pooled_seq = seq;
        }
        let requester = c.requester.take();
        let counts = |s: CState| match s {
            CState::Pooled => (1, 0),
            CState::Held { interrupted: false } => (0, 1),
            _ => (0, 0),
        };
        let (p0, h0) = counts(was);
        let (p1, h1) = counts(to);
        self.pooled = self.pooled + p1 - p0;
        self.held_live = self.held_live + h1 - h0;
        if was == CState::Pending {
            self.pending.remove(&id);
            self.not_pending.push(id);
            // Its checkout no longer has a connection being made for it.
            if let Some(w) = requester {
                let waiter = &mut self.waiters[w as usize - 1];
                if waiter.requested == Some(id) {
                    waiter.requested = None;
                }
            }
        }
        self.touched.push(id);
        Ok(())
    }

    fn count_closed(&mut self, id: u64) -> Result<(), String> {
        let c = self.conn(id)?;
        ensure!(!c.closed_counted, "connection {id} is closed twice");
        c.closed_counted = true;
        // Spec: a service's entry goes once its connection count is 0.
        if let Some(service) = c.service {
            let entry = self
                .services
                .get_mut(&service)
                .expect("a service of a live connection");
            entry.1 -= 1;
            if entry.1 == 0 {
                self.services.remove(&service);
            }
        }
        Ok(())
    }

    fn new_waiter(&mut self, w: WaiterId, deadline: Option<Instant>) -> Result<(), String> {
        ensure!(
            w.0 == self.waiters.len() as u64 + 1,
            "waiter id {w} after {} (ids are 1, 2, 3...)",
            self.waiters.len()
        );
        self.checkouts += 1;
        self.waiters.push(WaiterModel {
            started: self.pool_now,
            deadline,
            state: WState::Waiting,
            error: None,
            requested: None,
        });
        self.waiting.insert(w.0);
        if let Some(d) = deadline {
            self.deadlines.insert((d, w.0));
        }
        Ok(())
    }

    fn resolve(&mut self, w: WaiterId, to: WState) -> Result<(), String> {
        let index = usize::try_from(w.0).unwrap().wrapping_sub(1);
        let Some(waiter) = self.waiters.get_mut(index) else {
            return Err(format!("outcome for waiter {w}, which was never issued"));
        };
        ensure!(
            waiter.state == WState::Waiting,
            "waiter {w} is {:?} and gets {to:?}",
            waiter.state
        );
        waiter.state = to;
        // The connection started for it no longer has a requester.
        if let Some(id) = waiter.requested.take() {
            let c = &mut self.conns[id as usize - 1];
            if c.requester == Some(w.0) {
                c.requester = None;
            }
        }
        self.waiting.remove(&w.0);
        if let Some(d) = waiter.deadline {
            self.deadlines.remove(&(d, w.0));
        }
        self.resolved.push(w.0);
        Ok(())
    }

    fn expect_immediate_failure(&mut self, before: PoolState, w: WaiterId) {
        self.check_out_verdict = match before {
            PoolState::Ready => None,
            PoolState::Paused => Some((w, "PoolClearedError")),
            PoolState::Closed => Some((w, "PoolClosedError")),
        };
    }

    /// Whether the pool's generation (its service's, load-balanced) has
    /// moved on since connection `id` was made, by the model's count.
    fn is_stale(&self, id: u64) -> bool {
        let c = &self.conns[id as usize - 1];
        match c.service {
            Some(service) if self.opts.load_balanced => self
                .services
                .get(&service)
                .is_some_and(|&(generation, _)| generation != c.generation),
            _ => c.generation != self.generation,
        }
    }

    /// Whether connection `id`'s lifetime may have ended by now: it is
    /// jittered, so only its earliest possible end is known.
    fn may_be_past_lifetime(&self, id: u64) -> bool {
        self.opts.lifetime.is_some_and(|(lifetime, jitter)| {
            let earliest = Duration::from_millis(lifetime).mul_f64(1.0 - jitter);
            let created = self.conns[id as usize - 1].created_at;
            self.pool_now + Duration::from_micros(1) >= created + earliest
        })
    }

    /// The reason connection `id` must be closed with now, by what the model
    /// knows of it (spec: "Closing a Connection", "Perishable"); `Lifetime`
    /// stands for "may be closed for its lifetime", which is jittered.
    fn expected_close(&self, id: u64) -> Result<ClosedReason, String> {
        if let Some((closing, reason)) = self.closing {
            if closing == id {
                return Ok(reason);
            }
        }
        // A connection started and closed within this step, whose
        // `Establish` the model has not seen yet (events kept apart).
        // A pending connection is abandoned by a close, by an interrupting
        // clear (stale), or because the checkout it was made for timed out
        // and nobody else needs it (error).
        let abandoned = if self.closed {
            ClosedReason::PoolClosed
        } else if self.step_clear.is_some_and(|(interrupt, _)| interrupt) {
            ClosedReason::Stale
        } else {
            ClosedReason::Error
        };
        let Some(c) = self.conns.get((id as usize).wrapping_sub(1)) else {
            return Ok(abandoned);
        };
        let reason = match c.state {
            CState::Pending => abandoned,
            // Interrupted (or disposed of after it): the core reports it as
            // stale, the spec's reason for a clear.
            CState::Held { .. } | CState::Disposing => ClosedReason::Stale,
            CState::Pooled if self.closed => ClosedReason::PoolClosed,
            CState::Pooled => {
                let checked_in = self.checking_in.filter(|&(c, _)| c == id);
                let idle = || {
                    checked_in.is_none()
                        && self
                            .opts
                            .max_idle_ms
                            .is_some_and(|max| self.pool_now - c.pooled_since > Duration::from_millis(max))
                };
                if checked_in.is_some_and(|(_, errored)| errored) {
                    ClosedReason::Error
                } else if self.is_stale(id) {
                    ClosedReason::Stale
                } else if idle() {
                    ClosedReason::Idle
                } else if self.may_be_past_lifetime(id) {
                    ClosedReason::Lifetime
                } else {
                    return Err(format!(
                        "connection {id} is closed but is neither errored, stale, idle nor past its lifetime"
                    ));
                }
            }
            other => return Err(format!("connection {id} is closed while {other:?}")),
        };
        Ok(reason)
    }

    /// Checks the reason a connection was closed with.
    fn check_close_reason(&self, id: u64, reason: ClosedReason, what: &str) -> Result<(), String> {
        let expected = self.expected_close(id)?;
        // A close (or a clear) also lets time pass first: a checkout whose
        // deadline that passes may abandon its pending connection (error).
        let pending = self
            .conns
            .get((id as usize).wrapping_sub(1))
            .is_none_or(|c| c.state == CState::Pending);
        let expired = self.waiters.iter().any(|w| {
            w.deadline
                .is_some_and(|d| d > self.step_started && d <= self.pool_now)
        });
        if pending && expired && reason == ClosedReason::Error {
            return Ok(());
        }
        ensure!(
            reason == expected,
            "{what} of connection {id} says {reason:?}, expected {expected:?}"
        );
        Ok(())
    }

    /// The checkout a connection just started is for (spec: a connection
    /// is created for the wait queue while its checkouts outnumber the
    /// connections being made): the first queued one, in arrival order,
    /// that none is being made for. `None` when it is for minPoolSize.
    fn requester_of_new(&self) -> Result<Option<u64>, String> {
        let queued = || self.waiting.iter().copied().filter(|&w| Some(w) != self.unqueued);
        let pending = self.pending.len() + usize::from(self.arriving.is_some());
        if queued().count() <= pending {
            return Ok(None);
        }
        let busy = self.arriving.and_then(|(_, w)| w);
        let first = queued().find(|&w| self.waiters[w as usize - 1].requested.is_none() && Some(w) != busy);
        ensure!(
            !self.exact || first.is_some(),
            "a connection for the queue while every queued checkout has one being made"
        );
        Ok(first)
    }

    // ----- one step -------------------------------------------------------

    fn step(&mut self, cmd: &Cmd) -> Result<(), String> {
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
        let mut fired = false;
        let now = self.wall;
        match *cmd {
            Cmd::CheckOut { stale_ms } => {
                let at = now.checked_sub(Duration::from_millis(stale_ms)).unwrap_or(now);
                let before = self.pool.state();
                let w = self.pool.handle_check_out(at);
                self.told(at);
                self.expect_immediate_failure(before, w);
                let deadline = self.wait_queue_timeout.and_then(|t| at.checked_add(t));
                self.log(|| format!("check out -> {w}"));
                self.new_waiter(w, deadline)?;
                self.unqueued = Some(w.0);
            }
            Cmd::CheckOutUntil { offset_ms, direct } => {
                let deadline = offset_ms.and_then(|o| {
                    let d = Duration::from_millis(o.unsigned_abs());
                    if o >= 0 {
                        now.checked_add(d)
                    } else {
                        now.checked_sub(d)
                    }
                });
                let before = self.pool.state();
                let w = if direct {
                    match self.pool.handle_check_out_direct(now, deadline) {
                        CheckOut::Later(w) => w,
                        CheckOut::Ready(connection) => {
                            // The id it used is the next one.
                            let waiter = WaiterId(self.waiters.len() as u64 + 1);
                            self.served_directly = Some(Action::Deliver { waiter, connection });
                            waiter
                        }
                    }
                } else {
                    self.pool.handle_check_out_until(now, deadline)
                };
                self.told(now);
                self.expect_immediate_failure(before, w);
                self.log(|| format!("check out until {offset_ms:?} (direct: {direct}) -> {w}"));
                self.new_waiter(w, deadline)?;
                self.unqueued = Some(w.0);
            }
            Cmd::CheckIn { pick, errored } => {
                if self.held.is_empty() {
                    return self.after(false);
                }
                let mut c = self.held.swap_remove(pick % self.held.len());
                if errored {
                    c.mark_errored();
                }
                let id = c.id().0;
                let interrupted = self.conn(id)?.state == CState::Held { interrupted: true };
                let over = if interrupted {
                    Some(false)
                } else {
                    self.over_size_with_arrival(now)
                };
                let to = if interrupted {
                    CState::Disposing
                } else {
                    CState::Pooled
                };
                self.move_conn(id, &[CState::Held { interrupted }], to)?;
                self.checking_in = Some((id, errored));
                // Spec: closed when perished or the pool is closed, made
                // available otherwise; beyond it, closed while the pool
                // holds more than maxPoolSize. (A lifetime is jittered: a
                // connection otherwise fit is not judged.)
                let perished = errored || self.closed || self.is_stale(id);
                let must_close = perished || over == Some(true);
                if !interrupted && (must_close || (over == Some(false) && self.opts.lifetime.is_none())) {
                    self.check_in_verdict = Some((id, must_close));
                }
                // Counted bad only when closed as errored, not for the size.
                let bad = if interrupted || self.closed || !errored {
                    Some(0)
                } else {
                    over.map(|over| u64::from(!over))
                };
                self.arrival = Some(Arrival {
                    id,
                    over,
                    delivers: self.delivers,
                    returns_bad: Some((self.pool.stats().returns_bad, bad)),
                });
                let r = self.pool.handle_check_in(now, c);
                self.told(now);
                self.log(|| format!("check in {id} errored={errored} -> {}", r.is_ok()));
                ensure!(r.is_ok(), "check in of {id} refused: {r:?}");
            }
            Cmd::Detach { pick } => {
                if self.held.is_empty() {
                    return self.after(false);
                }
                let c = self.held.swap_remove(pick % self.held.len());
                let id = c.id().0;
                let interrupted = self.conn(id)?.state == CState::Held { interrupted: true };
                self.move_conn(id, &[CState::Held { interrupted }], CState::Closed)?;
                self.closing = Some((id, ClosedReason::Detached));
                if !interrupted {
                    self.count_closed(id)?;
                }
                let r = self.pool.handle_detach(now, c);
                self.told(now);
                self.log(|| format!("detach {id} -> {}", r.is_ok()));
                match r {
                    Ok(conn) => ensure!(conn == Conn(id), "detach of {id} gave back {conn:?}"),
                    Err(e) => return Err(format!("detach of {id} refused: {e:?}")),
                }
            }
            Cmd::WrongPool { pick, detach } => {
                if self.held.is_empty() {
                    return self.after(false);
                }
                let index = pick % self.held.len();
                let c = self.held.swap_remove(index);
                let id = c.id();
                let back = if detach {
                    self.other.handle_detach(now, c).map(|_| ()).err()
                } else {
                    self.other.handle_check_in(now, c).err()
                };
                ensure!(
                    self.other.poll_output().is_none(),
                    "a refused connection made outputs"
                );
                let Some(err) = back else {
                    return Err(format!("another pool accepted connection {id}"));
                };
                let c = err.into_connection();
                ensure!(c.id() == id, "a refused connection came back as another");
                self.held.push(c);
                self.log(|| format!("wrong pool {id} detach={detach}"));
            }
            Cmd::Established { pick, service } => {
                let Some(&id) = self.pending.iter().nth(pick % self.pending.len().max(1)) else {
                    return self.after(false);
                };
                self.arriving = Some((id, self.conn(id)?.requester));
                self.arrival = Some(Arrival {
                    id,
                    over: self.over_size_with_arrival(now),
                    delivers: self.delivers,
                    returns_bad: None,
                });
                // A success resets the reconnect backoff.
                self.failing_since = None;
                self.move_conn(id, &[CState::Pending], CState::Pooled)?;
                let sid = self.opts.load_balanced.then_some(ServiceId([service; 12]));
                if let Some(sid) = sid {
                    // Spec ("Load Balancer Mode"): the connection takes its
                    // service's generation, and counts in its entry.
                    let entry = self.services.entry(sid).or_default();
                    entry.1 += 1;
                    let generation = entry.0;
                    let c = self.conn(id)?;
                    c.generation = generation;
                    c.service = Some(sid);
                }
                let r = self.pool.handle_established(now, ConnectionId(id), Conn(id), sid);
                self.told(now);
                self.log(|| format!("established {id} -> {r:?}"));
                ensure!(r.is_ok(), "established {id}: {r:?}");
            }
            Cmd::EstablishFailed { pick, kind } => return self.establish_failed(now, pick, kind),
            Cmd::Resize { min, max } => return self.resize(min, max),
            Cmd::LateResult { pick, ok } => {
                if self.not_pending.is_empty() {
                    return self.after(false);
                }
                // Mostly the most recently abandoned or reported ones.
                let n = self.not_pending.len();
                let id = self.not_pending[n - 1 - pick % n.min(4)];
                let r = if ok {
                    self.expected_late = Some(id);
                    self.pool
                        .handle_established(now, ConnectionId(id), Conn(LATE + id), None)
                } else {
                    fail_establish(&mut self.pool, now, ConnectionId(id))
                };
                self.told(now);
                self.log(|| format!("late result {id} ok={ok} -> {r:?}"));
                ensure!(r.is_ok(), "late result for {id}: {r:?}");
            }
            Cmd::UnknownResult { ahead, ok } => {
                // Beyond what this very call may start (up to maxConnecting,
                // if a backoff ends as it advances the clock).
                let id = ConnectionId(if ahead == 0 {
                    0
                } else {
                    self.conns.len() as u64 + u64::from(self.opts.max_connecting) + ahead
                });
                let r = if ok {
                    self.pool.handle_established(now, id, Conn(LATE + id.0), None)
                } else {
                    fail_establish(&mut self.pool, now, id)
                };
                self.told(now);
                self.log(|| format!("unknown result {id} -> {r:?}"));
                ensure!(
                    r == Err(UsageError::UnknownConnection(id)),
                    "result for unknown {id}: {r:?}"
                );
            }
            Cmd::Cancel { pick, target } => {
                let w = match target {
                    CancelTarget::Waiting => {
                        self.waiting.iter().nth(pick % self.waiting.len().max(1)).copied()
                    }
                    CancelTarget::Resolved => {
                        let n = self.resolved.len();
                        (n > 0).then(|| self.resolved[n - 1 - pick % n.min(8)])
                    }
                    CancelTarget::Unknown => Some(self.waiters.len() as u64 + 1 + (pick % 3) as u64),
                };
                let Some(w) = w.map(WaiterId) else {
                    return self.after(false);
                };
                // A waiter whose deadline the late `now` passes times out in
                // this very call, before the cancel looks for it.
                let cancellable = self.waiting.contains(&w.0)
                    && self.waiters[w.0 as usize - 1]
                        .deadline
                        .is_none_or(|d| d > now.max(self.pool_now));
                let r = self.pool.handle_cancel(now, w);
                self.told(now);
                self.log(|| format!("cancel {w} -> {r:?}"));
                if cancellable {
                    ensure!(r.is_ok(), "cancel of queued {w}: {r:?}");
                    // What the call did before it withdrew the checkout (a
                    // backoff that ended may have started a connection for
                    // it) comes out first.
                    self.drain()?;
                    self.resolve(w, WState::Cancelled)?;
                    self.cancels += 1;
                } else {
                    ensure!(
                        r == Err(UsageError::UnknownWaiter(w)),
                        "cancel of {w}, not queued: {r:?}"
                    );
                }
            }
            Cmd::Clear {
                interrupt,
                service,
                wrong_mode,
            } => {
                let lb = self.opts.load_balanced;
                let with_service = lb != wrong_mode;
                let clear = Clear {
                    interrupt_in_use: interrupt,
                    service_id: with_service.then_some(ServiceId([service; 12])),
                    cause: (service == 1).then(|| Arc::from("monitor said so")),
                };
                let r = self.pool.handle_clear(now, clear);
                self.told(now);
                if !wrong_mode && !self.closed {
                    if lb {
                        let sid = ServiceId([service; 12]);
                        // Only a service the pool knows has a generation.
                        if let Some(entry) = self.services.get_mut(&sid) {
                            entry.0 += 1;
                            self.step_clear = Some((interrupt, Some(sid)));
                        }
                    } else {
                        self.generation += 1;
                        self.step_clear = Some((interrupt, None));
                    }
                }
                self.log(|| format!("clear interrupt={interrupt} service={with_service} -> {r:?}"));
                if wrong_mode {
                    ensure!(
                        matches!(r, Err(UsageError::ClearMode(_))),
                        "clear in the wrong mode: {r:?}"
                    );
                } else {
                    ensure!(r.is_ok(), "clear: {r:?}");
                }
            }
            Cmd::Ready => {
                let closed = self.pool.state() == PoolState::Closed;
                let r = self.pool.handle_ready(now);
                self.told(now);
                self.log(|| format!("ready -> {r:?}"));
                if closed {
                    ensure!(r == Err(UsageError::PoolClosed), "ready on a closed pool: {r:?}");
                } else {
                    ensure!(r.is_ok(), "ready: {r:?}");
                }
            }
            Cmd::Close => {
                self.closed = true;
                self.pool.handle_close(now);
                self.told(now);
                self.log(|| "close".to_owned());
            }
            Cmd::Advance { ms } => {
                self.wall += Duration::from_millis(ms);
                fired = self.fire(self.wall);
            }
            Cmd::Nudge { ns } => {
                self.wall += Duration::from_nanos(ns);
                fired = self.fire(self.wall);
            }
            Cmd::FireTimer { early } => {
                let at = self.pool.poll_timeout().unwrap_or(self.wall);
                let at = if early {
                    at.checked_sub(Duration::from_nanos(1)).unwrap_or(at)
                } else {
                    at
                };
                self.wall = self.wall.max(at);
                fired = self.fire(self.wall);
            }
            Cmd::Jump { ms } => {
                self.wall += Duration::from_millis(ms);
                self.log(|| format!("jump {ms}"));
            }
            Cmd::AtIdleEdge { offset_ns } => {
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
                return self.step(&Cmd::CheckOut { stale_ms: 0 });
            }
            Cmd::StaleTimeout { ms } => {
                let at = self
                    .wall
                    .checked_sub(Duration::from_millis(ms))
                    .unwrap_or(self.wall);
                fired = self.fire(at);
            }
        }
        self.after(fired)
    }

    /// `Cmd::Resize`, at the driver's clock when letting time pass does
    /// nothing there (no deadline passes, no reconnect backoff may end),
    /// and at the pool's own time otherwise: all it does is the resize's
    /// own. Predicts from the model alone
    /// whether it is refused (then nothing happens: no output, the sizes
    /// stay), which available connections it closes for the size (the
    /// least recently used above the new maximum, with reason `Shrunk`,
    /// after its `PoolResized`), and how many it starts growing; checked
    /// as the outputs come (`on_event`, `on_action`, `sized_close`) and
    /// after the step.
    fn resize(&mut self, min: u32, max: u32) -> Result<(), String> {
        let quiet = self.deadlines.first().is_none_or(|&(d, _)| d > self.wall)
            && (self.opts.reconnect.is_none() || self.failing_since.is_none());
        let now = if quiet { self.wall } else { self.pool_now };
        let expected = if self.closed {
            Err(UsageError::ResizeClosed)
        } else if max > 0 && min > max {
            Err(UsageError::InvalidSize(OptionsError::MinExceedsMax { min, max }))
        } else {
            Ok(())
        };
        if expected.is_ok() {
            self.opts.min_pool_size = min;
            self.opts.max_pool_size = max;
            let total = self.pending.len() + self.pooled + self.held_live;
            let excess = if max == 0 {
                0
            } else {
                total.saturating_sub(max as usize)
            };
            let mut idle: Vec<(u64, u64)> = self
                .conns
                .iter()
                .zip(1u64..)
                .filter(|(c, _)| c.state == CState::Pooled)
                .map(|(c, id)| (c.pooled_seq, id))
                .collect();
            idle.sort_unstable();
            let closes: VecDeque<u64> = idle.iter().take(excess).map(|&(_, id)| id).collect();
            let left = total - closes.len();
            self.shrink_bound = (max > 0 && left > max as usize).then_some(left);
            self.resize = Some(ResizeStep {
                min,
                max,
                closed_events: if self.events {
                    closes.clone()
                } else {
                    VecDeque::new()
                },
                closes,
                announced: false,
                pending_after: self.pending_after_resize(left),
            });
        }
        let r = self.pool.handle_resize(now, min, max);
        self.told(now);
        self.log(|| format!("resize min={min} max={max} -> {r:?}"));
        ensure!(
            r == expected,
            "resize to ({min}, {max}): {r:?}, expected {expected:?}"
        );
        self.after(false)?;
        let Some(step) = self.resize.take() else {
            ensure!(
                self.step_outputs == 0,
                "a refused resize made {} outputs",
                self.step_outputs
            );
            return Ok(());
        };
        ensure!(
            step.closes.is_empty() && step.closed_events.is_empty(),
            "the resize to ({min}, {max}) left {:?} open (Close) and {:?} (ConnectionClosed), the least recently used available above it",
            step.closes,
            step.closed_events
        );
        ensure!(
            !self.events || step.announced,
            "a resize to ({min}, {max}) without PoolResized"
        );
        if let Some(n) = step.pending_after {
            ensure!(
                self.pending.len() == n,
                "a resize to ({min}, {max}) leaves {} pending, expected {n} ({} waiting)",
                self.pending.len(),
                self.waiting.len()
            );
        }
        Ok(())
    }

    /// How many connections are pending after a resize that leaves `total`:
    /// a ready pool starts connections for the waiters that outnumber the
    /// pending ones, then (with a maintenance interval) towards
    /// minPoolSize, within maxConnecting and maxPoolSize. `None` while a
    /// reconnect backoff may hold them back.
    fn pending_after_resize(&self, mut total: usize) -> Option<usize> {
        let mut pending = self.pending.len();
        if self.pool.state() != PoolState::Ready {
            return Some(pending);
        }
        if self.opts.reconnect.is_some() && self.failing_since.is_some() {
            return None;
        }
        let max = self.opts.max_pool_size as usize;
        let max_connecting = self.opts.max_connecting as usize;
        let room = |total: usize, pending: usize| (max == 0 || total < max) && pending < max_connecting;
        while self.waiting.len() > pending && room(total, pending) {
            total += 1;
            pending += 1;
        }
        if self.opts.maintenance_ms.is_some() {
            while total < self.opts.min_pool_size as usize && room(total, pending) {
                total += 1;
                pending += 1;
            }
        }
        Some(pending)
    }

    /// Whether a connection arriving now (checked in, or established)
    /// finds the pool above maxPoolSize counting it, as a resize down
    /// leaves it until enough connections are gone (see `Arrival::over`).
    /// Asked before the connection moves in the model's books.
    fn over_size_with_arrival(&self, now: Instant) -> Option<bool> {
        let max = self.opts.max_pool_size as usize;
        let total = self.pending.len() + self.pooled + self.held_live;
        if self.closed || max == 0 || total <= max {
            return Some(false);
        }
        let at = now.max(self.pool_now);
        let expires = self.deadlines.first().is_some_and(|&(d, _)| d <= at);
        (!expires).then_some(true)
    }

    /// A close for the pool's size (reason `Shrunk`): only the least
    /// recently used available connections a resize closes, in that
    /// order, and a connection that arrives while the pool holds more than
    /// maxPoolSize. Says whether connection `id`'s close (its `Close`, or
    /// with `event` its `ConnectionClosed`) was one; its reason is checked
    /// here then, and by `check_close_reason` otherwise.
    fn sized_close(&mut self, id: u64, reason: ClosedReason, event: bool) -> Result<bool, String> {
        let what = if event { "ConnectionClosed" } else { "Close" };
        if let Some(step) = &mut self.resize {
            let closes = if event {
                &mut step.closed_events
            } else {
                &mut step.closes
            };
            if let Some(next) = closes.pop_front() {
                ensure!(
                    next == id && reason == ClosedReason::Shrunk,
                    "{what} of connection {id} ({reason:?}) while the resize must close {next} (Shrunk), the least recently used available one"
                );
                return Ok(true);
            }
        }
        if let Some(a) = self.arrival.as_ref().filter(|a| a.id == id) {
            match a.over {
                Some(true) => {
                    ensure!(
                        reason == ClosedReason::Shrunk,
                        "{what} of connection {id}, arriving above maxPoolSize {}, says {reason:?}",
                        self.opts.max_pool_size
                    );
                }
                None if reason == ClosedReason::Shrunk => {}
                _ => {
                    ensure!(
                        reason != ClosedReason::Shrunk,
                        "{what} of connection {id} says Shrunk, but it arrives within maxPoolSize {}",
                        self.opts.max_pool_size
                    );
                    return Ok(false);
                }
            }
            if !event {
                self.shrunk_on_arrival += 1;
            }
            return Ok(true);
        }
        ensure!(
            reason != ClosedReason::Shrunk,
            "{what} of connection {id} says Shrunk, which the model does not expect"
        );
        Ok(false)
    }

    /// `Cmd::EstablishFailed`: predicts, from the model alone, whether the
    /// pool is cleared, which checkout fails with the failure or keeps
    /// waiting, and whether the reconnect backoff holds or gives up; the
    /// outputs are checked against that as they come (`on_action`,
    /// `on_event`) and after the step (`check_failure`).
    fn establish_failed(&mut self, now: Instant, pick: usize, kind: FailKind) -> Result<(), String> {
        let Some(&id) = self.pending.iter().nth(pick % self.pending.len().max(1)) else {
            return self.after(false);
        };
        // The pool's clock once this input has moved it.
        let at = now.max(self.pool_now);
        let (generation, requester) = {
            let c = self.conn(id)?;
            (c.generation, c.requester)
        };
        // SDAM's reaction clears the pool, unless the error is labelled
        // (spec: "Backpressure-enabled": SDAM ignores it) or the connection
        // is of a generation already cleared (spec: "the generation of the
        // pool when this Connection was created").
        let clears = !kind.labelled()
            && !self.opts.keep_ready
            && !self.opts.load_balanced
            && !self.closed
            && generation == self.generation;
        // The checkout it was made for, unless its deadline passes as this
        // input lets time pass (it times out first, and forgets it).
        let requester = requester.filter(|&w| self.waiters[w as usize - 1].deadline.is_none_or(|d| d > at));
        let keeps_waiting = kind.labelled() && self.opts.keep_waiting;
        let (victim, kept) = if keeps_waiting {
            (None, requester)
        } else {
            (requester, None)
        };
        // The reconnect backoff (its timing is jittered: only whether it
        // holds at all, and when it gives up, are followed).
        let mut gives_up = false;
        if let Some((_, _, give_up, _)) = self.opts.reconnect {
            let since = *self.failing_since.get_or_insert(at);
            gives_up = give_up.is_some_and(|g| at - since >= Duration::from_millis(g));
            if gives_up {
                self.failing_since = None;
            }
        }
        self.failure = Some(Failure {
            id,
            kind,
            victim,
            kept,
            state_before: self.pool.state(),
            backoff_holds: self.opts.reconnect.is_some() && !gives_up,
            gives_up,
            closed_seen: false,
            connection_errors: 0,
        });
        self.arriving = Some((id, requester));
        self.move_conn(id, &[CState::Pending], CState::Closed)?;
        self.closing = Some((id, ClosedReason::Error));
        self.count_closed(id)?;
        if clears {
            self.generation += 1;
        }
        let r = fail_establish_with(&mut self.pool, now, ConnectionId(id), kind.kind());
        self.told(now);
        self.log(|| format!("establish failed {id} {kind:?} -> {r:?}"));
        ensure!(r.is_ok(), "establish failed {id}: {r:?}");
        self.after(false)?;
        self.check_failure()
    }

    /// After an establishment failure's step: the pool is not paused by a
    /// labelled failure; exactly the predicted checkout failed with it (at
    /// most one, and none that keeps waiting, when requesters are not
    /// followed exactly); the one that keeps waiting still waits; the pool
    /// gave up reconnecting exactly when predicted.
    fn check_failure(&mut self) -> Result<(), String> {
        let Some(f) = self.failure.take() else {
            return Ok(());
        };
        let state = self.pool.state();
        if f.kind.labelled() {
            ensure!(
                state == f.state_before,
                "a labelled failure of connection {} left the pool {state:?}, was {:?}",
                f.id,
                f.state_before
            );
        }
        if self.exact {
            let expected = u32::from(f.victim.is_some());
            ensure!(
                f.connection_errors == expected,
                "failure of connection {} ({:?}) failed {} checkouts with it, expected {expected} ({:?})",
                f.id,
                f.kind,
                f.connection_errors,
                f.victim
            );
            if let Some(w) = f.kept {
                self.kept_waiting += 1;
                let waiter = &self.waiters[w as usize - 1];
                ensure!(
                    waiter.state == WState::Waiting,
                    "waiter {w}, whose connection {} failed with an overload, is {:?} {:?}, not waiting",
                    f.id,
                    waiter.state,
                    waiter.error
                );
            }
        } else {
            let most = u32::from(!(f.kind.labelled() && self.opts.keep_waiting));
            ensure!(
                f.connection_errors <= most,
                "failure of connection {} ({:?}) failed {} checkouts with it",
                f.id,
                f.kind,
                f.connection_errors
            );
        }
        ensure!(
            self.gave_up_events == u32::from(f.gives_up),
            "{} ReconnectGaveUp after failure of connection {}, expected {}",
            self.gave_up_events,
            f.id,
            f.gives_up
        );
        Ok(())
    }

    /// Checks the error a checkout failed with (its `Fail` or
    /// `ConnectionCheckOutFailed`): a `ConnectionError` only for this
    /// step's failure, naming its connection, with the labels of its kind.
    fn check_checkout_error(&self, error: &CheckOutError, what: &str) -> Result<(), String> {
        let CheckOutError::ConnectionError {
            connection_id,
            source,
            ..
        } = error
        else {
            ensure!(error.labels().is_empty(), "{what}: {error:?} carries labels");
            return Ok(());
        };
        let Some(f) = &self.failure else {
            return Err(format!(
                "{what}: a ConnectionError with no failure reported: {error:?}"
            ));
        };
        ensure!(
            connection_id.0 == f.id,
            "{what}: a ConnectionError for {connection_id}, but {} failed",
            f.id
        );
        check_labels(source, f.kind, what)?;
        let labelled = f.kind.labelled();
        ensure!(
            error.has_label("SystemOverloadedError") == labelled
                && error.has_label("RetryableError") == labelled
                && error.is_retryable() == labelled
                && error.labels() == source.labels(),
            "{what}: a {:?} failure gives a checkout error labelled {:?} (retryable: {})",
            f.kind,
            error.labels(),
            error.is_retryable()
        );
        Ok(())
    }

    fn fire(&mut self, at: Instant) -> bool {
        self.pool.handle_timeout(at);
        self.told(at);
        let elapsed = self.elapsed();
        self.log(|| format!("timeout at +{elapsed:?}"));
        true
    }

    fn after(&mut self, fired: bool) -> Result<(), String> {
        self.drain()?;
        if let Some(delivered) = self.served_directly.take() {
            self.log(|| format!("directly: {delivered:?}"));
            self.on_action(delivered)?;
        }
        self.check(fired)
    }

    // ----- outputs ----------------------------------------------------------

    fn drain(&mut self) -> Result<(), String> {
        if self.apart {
            // This input's events first, then its actions.
            let mut events = Vec::new();
            self.pool.take_events(&mut events);
            ensure!(self.pool.pending_events() == 0, "events left behind");
            for e in events {
                self.step_outputs += 1;
                self.log(|| format!("{:?}", Output::<Conn>::Event(e.clone())));
                self.on_event(&e)?;
            }
        }
        while let Some(out) = support::next_output(&mut self.pool)? {
            ensure!(
                !(self.apart && matches!(out, Output::Event(_))),
                "an event in the stream while events are kept apart: {out:?}"
            );
            self.step_outputs += 1;
            self.log(|| format!("{out:?}"));
            match out {
                Output::Event(e) => self.on_event(&e)?,
                Output::Action(a) => self.on_action(a)?,
            }
        }
        Ok(())
    }

    fn on_action(&mut self, action: Action<Conn>) -> Result<(), String> {
        // A resize lets no time pass (`Sim::resize`): it closes for the
        // size and starts connections, nothing else.
        ensure!(
            self.resize.is_none() || matches!(action, Action::Establish { .. } | Action::Close { .. }),
            "a resize makes {action:?}"
        );
        match action {
            Action::Establish { id } => {
                let id = id.0;
                ensure!(
                    id == self.conns.len() as u64 + 1,
                    "Establish {id} after {} (ids are 1, 2, 3...)",
                    self.conns.len()
                );
                // Right after its ConnectionCreated; with events apart, the
                // input's events all come before its actions.
                let created = self.ev_conns.len() as u64;
                ensure!(
                    !self.events || created == id || (self.apart && created > id),
                    "Establish {id} without its ConnectionCreated"
                );
                let total = self.pending.len() + self.pooled + self.held_live;
                let max = self.opts.max_pool_size as usize;
                ensure!(
                    max == 0 || total < max,
                    "Establish {id} with {total} connections of {max}"
                );
                // Spec: no more than maxConnecting at once, at any point of
                // an input (a connection whose result is being reported is
                // still pending while the input lets time pass).
                let connecting = self.pending.len() + usize::from(self.exact && self.arriving.is_some());
                ensure!(
                    connecting < self.opts.max_connecting as usize,
                    "Establish {id} with {connecting} connections being made (maxConnecting {})",
                    self.opts.max_connecting
                );
                // Spec: a connection is started for a checkout only while
                // checkouts outnumber the connections being established
                // (each of which will serve one), or to populate the pool
                // to minPoolSize.
                let (waiting, pending) = (self.waiting.len(), self.pending.len());
                ensure!(
                    waiting > pending || total < self.opts.min_pool_size as usize,
                    "Establish {id} with {waiting} waiting, {pending} pending and {total} connections (min {})",
                    self.opts.min_pool_size
                );
                if let Some(f) = self.failure.as_ref().filter(|_| self.exact) {
                    // After the failure's ConnectionClosed, what the input
                    // does comes after its reaction: the backoff.
                    ensure!(
                        !(f.closed_seen && f.backoff_holds),
                        "Establish {id} right after connection {} failed, while the reconnect backoff holds",
                        f.id
                    );
                }
                let requester = self.requester_of_new()?;
                if let Some(w) = requester {
                    self.waiters[w as usize - 1].requested = Some(id);
                }
                self.conns.push(ConnModel {
                    state: CState::Pending,
                    closed_counted: false,
                    created_at: self.pool_now,
                    pooled_since: self.pool_now,
                    pooled_seq: 0,
                    generation: self.step_generation,
                    service: None,
                    requester,
                });
                self.pending.insert(id);
                self.touched.push(id);
            }
            Action::AbortEstablish { id } => {
                self.move_conn(id.0, &[CState::Pending], CState::Abandoned)?;
                self.count_closed(id.0)?;
            }
            Action::Deliver { waiter, connection } => {
                let id = connection.id().0;
                let first = self.waiting.first().copied();
                ensure!(
                    first == Some(waiter.0),
                    "waiter {waiter} served while {first:?} waits longer"
                );
                let deadline = self.waiters[waiter.0 as usize - 1].deadline;
                ensure!(
                    deadline.is_none_or(|d| self.pool_now <= d),
                    "waiter {waiter} served {:?} after its deadline",
                    self.pool_now - deadline.unwrap()
                );
                self.resolve(waiter, WState::Delivered)?;
                ensure!(*connection == Conn(id), "connection {id} is {:?}", *connection);
                ensure!(!connection.is_errored(), "connection {id} is handed out errored");
                let model = &self.conns[id as usize - 1];
                ensure!(
                    (connection.generation(), connection.service_id()) == (model.generation, model.service),
                    "connection {id} is handed out as of generation {} ({:?}), created in {} ({:?})",
                    connection.generation(),
                    connection.service_id(),
                    model.generation,
                    model.service
                );
                ensure!(!self.is_stale(id), "connection {id} is handed out stale");
                // Spec: the wait runs from the start of the checkout.
                let waited = self.pool_now - self.waiters[waiter.0 as usize - 1].started;
                self.wait_time += waited;
                if self.events {
                    let reported = self.ev_conns[id as usize - 1].checked_out_for.take();
                    ensure!(
                        reported == Some(waited),
                        "ConnectionCheckedOut {id} says it took {reported:?}, but waiter {waiter} waited {waited:?}"
                    );
                }
                ensure!(
                    connection.created_at() == model.created_at,
                    "connection {id} was created at another instant"
                );
                if let Some(max) = self.opts.max_idle_ms.map(Duration::from_millis) {
                    let idle = self.pool_now - model.pooled_since;
                    ensure!(idle <= max, "connection {id} is handed out idle for {idle:?}");
                }
                if let Some((lifetime, _)) = self.opts.lifetime {
                    let end = model.created_at + Duration::from_millis(lifetime);
                    ensure!(
                        self.pool_now < end,
                        "connection {id} is handed out past its lifetime"
                    );
                }
                if self.events {
                    let ev = &self.ev_conns[id as usize - 1];
                    ensure!(ev.checked_out, "Deliver of {id} without ConnectionCheckedOut");
                }
                self.move_conn(id, &[CState::Pooled], CState::Held { interrupted: false })?;
                self.held.push(connection);
                self.delivers += 1;
            }
            Action::Fail { waiter, error } => {
                self.check_checkout_error(&error, "Fail")?;
                if let (CheckOutError::ConnectionError { .. }, Some(f)) = (&error, &mut self.failure) {
                    f.connection_errors += 1;
                    ensure!(
                        !self.exact || f.victim == Some(waiter.0),
                        "waiter {waiter} fails with the failure of connection {} ({:?}); the model expects {:?} to",
                        f.id,
                        f.kind,
                        f.victim
                    );
                }
                let deadline = self
                    .waiters
                    .get((waiter.0 as usize).wrapping_sub(1))
                    .and_then(|w| w.deadline);
                if let CheckOutError::WaitQueueTimeout { .. } = error {
                    ensure!(
                        deadline.is_some_and(|d| d <= self.pool_now),
                        "waiter {waiter} timed out before its deadline {deadline:?} (now +{:?})",
                        self.elapsed()
                    );
                }
                self.resolve(waiter, WState::Failed)?;
                if self.events {
                    let waited = self.pool_now - self.waiters[waiter.0 as usize - 1].started;
                    let reported = self.ev_fail_durations.pop_front();
                    ensure!(
                        reported == Some(waited),
                        "ConnectionCheckOutFailed for {waiter} says it took {reported:?}, but it waited {waited:?}"
                    );
                }
                // A queued checkout fails as cleared only by a clear of this
                // step (a checkout of a paused pool is judged on its own:
                // `check_out_verdict`); a labelled failure clears nothing.
                if let CheckOutError::PoolCleared { .. } = error {
                    let immediate = self.check_out_verdict.is_some_and(|(w, _)| w == waiter);
                    ensure!(
                        immediate || self.generation != self.step_generation,
                        "waiter {waiter} fails as cleared in a step that clears nothing"
                    );
                }
                self.waiters[waiter.0 as usize - 1].error = Some(error.spec_name());
                self.fails += 1;
            }
            Action::Close {
                id,
                connection,
                reason,
            } => {
                let id = id.0;
                if connection.0 >= LATE {
                    ensure!(
                        self.expected_late == Some(id) && connection.0 == LATE + id,
                        "unexpected disposal of late {connection:?} as {id}"
                    );
                    let expected = if self.closed {
                        ClosedReason::PoolClosed
                    } else {
                        ClosedReason::Stale
                    };
                    ensure!(
                        reason == expected,
                        "late connection {id} disposed of as {reason:?}, expected {expected:?}"
                    );
                    self.expected_late = None;
                } else {
                    ensure!(
                        connection == Conn(id),
                        "Close {id} of {connection:?} ({reason:?})"
                    );
                    if !self.sized_close(id, reason, false)? {
                        self.check_close_reason(id, reason, "Close")?;
                    }
                    let was = self.conn(id)?.state;
                    self.move_conn(id, &[CState::Pooled, CState::Disposing], CState::Closed)?;
                    if was == CState::Pooled {
                        self.count_closed(id)?;
                    }
                }
            }
            Action::Interrupt { id } => {
                // Only by an interrupting clear, and only connections of a
                // generation it ended (of its service, load-balanced).
                let Some((true, service)) = self.step_clear else {
                    return Err(format!(
                        "connection {id} is interrupted without an interrupting clear"
                    ));
                };
                let c = self.conn(id.0)?;
                ensure!(
                    service.is_none() || c.service == service,
                    "connection {id} of {:?} is interrupted by a clear of {service:?}",
                    c.service
                );
                ensure!(
                    self.is_stale(id.0),
                    "connection {id} of the current generation {} is interrupted",
                    self.conns[id.0 as usize - 1].generation
                );
                self.move_conn(
                    id.0,
                    &[CState::Held { interrupted: false }],
                    CState::Held { interrupted: true },
                )?;
                self.count_closed(id.0)?;
            }
            other => return Err(format!("unknown action {other:?}")),
        }
        Ok(())
    }

    fn ev_conn(&mut self, id: ConnectionId, what: &str) -> Result<&mut ConnEvents, String> {
        let n = self.ev_conns.len();
        self.ev_conns
            .get_mut((id.0 as usize).wrapping_sub(1))
            .ok_or_else(|| format!("{what} for connection {id}, but only {n} were created"))
    }

    fn on_event(&mut self, e: &Event) -> Result<(), String> {
        // ReconnectGaveUp is loud by design: it comes even with events off.
        ensure!(
            self.events || matches!(e, Event::ReconnectGaveUp { .. }),
            "an event while events are off: {e:?}"
        );
        ensure!(
            self.resize.is_none()
                || matches!(
                    e,
                    Event::PoolResized { .. }
                        | Event::ConnectionClosed { .. }
                        | Event::ConnectionCreated { .. }
                ),
            "a resize emits {e:?}"
        );
        match e {
            Event::PoolCreated { .. } => return Err("a second ConnectionPoolCreated".into()),
            Event::PoolResized {
                min_pool_size,
                max_pool_size,
                ..
            } => {
                let sizes = (*min_pool_size, *max_pool_size);
                let Some(step) = &mut self.resize else {
                    return Err(format!("PoolResized {sizes:?} without a resize accepted"));
                };
                ensure!(
                    sizes == (step.min, step.max) && !step.announced,
                    "PoolResized {sizes:?} for a resize to {:?} (announced already: {})",
                    (step.min, step.max),
                    step.announced
                );
                // First: before the closes it causes.
                ensure!(
                    self.step_outputs == 1,
                    "PoolResized after {} outputs of its resize",
                    self.step_outputs - 1
                );
                step.announced = true;
            }
            Event::PoolReady { .. } => {
                ensure!(
                    self.ev_state == PoolState::Paused,
                    "PoolReady while {:?}",
                    self.ev_state
                );
                self.ev_state = PoolState::Ready;
            }
            Event::PoolCleared { service_id, .. } => {
                // Spec: the event comes once the generation moved, before
                // what the clear does (interrupts, failed waiters).
                if let Some(caused) = self.step_caused.take() {
                    return Err(format!("{caused} before the PoolCleared that causes it"));
                }
                if self.opts.load_balanced {
                    ensure!(service_id.is_some(), "a load-balanced clear without a service");
                } else {
                    ensure!(
                        self.ev_state == PoolState::Ready && service_id.is_none(),
                        "PoolCleared {service_id:?} while {:?}",
                        self.ev_state
                    );
                    self.ev_state = PoolState::Paused;
                }
            }
            Event::PoolClosed { .. } => {
                ensure!(self.ev_state != PoolState::Closed, "PoolClosed twice");
                self.ev_state = PoolState::Closed;
                self.step_pool_closed = true;
            }
            Event::ConnectionCreated { connection_id, .. } => {
                ensure!(
                    connection_id.0 == self.ev_conns.len() as u64 + 1,
                    "ConnectionCreated {connection_id} after {}",
                    self.ev_conns.len()
                );
                ensure!(
                    self.ev_state == PoolState::Ready,
                    "ConnectionCreated while {:?}",
                    self.ev_state
                );
                self.ev_conns.push(ConnEvents::default());
            }
            Event::ConnectionReady { connection_id, .. } => {
                if self.arriving.is_some_and(|(id, _)| id == connection_id.0) {
                    self.arriving = None;
                }
                let c = self.ev_conn(*connection_id, "ConnectionReady")?;
                ensure!(
                    !c.ready && c.closed == 0,
                    "ConnectionReady {connection_id} again or after Closed"
                );
                c.ready = true;
            }
            Event::ConnectionClosed {
                connection_id,
                reason,
                error,
                ..
            } => {
                if self.arriving.is_some_and(|(id, _)| id == connection_id.0) {
                    self.arriving = None;
                }
                // The establishment error, with its labels, only for the
                // connection whose establishment failed.
                match (&mut self.failure, error) {
                    (Some(f), Some(error)) if f.id == connection_id.0 => {
                        check_labels(error, f.kind, "ConnectionClosed")?;
                        f.closed_seen = true;
                    }
                    (Some(f), None) if f.id == connection_id.0 => {
                        return Err(format!("ConnectionClosed {connection_id} without its error"));
                    }
                    (_, None) => {}
                    (_, Some(error)) => {
                        return Err(format!(
                            "ConnectionClosed {connection_id} with an error: {error:?}"
                        ));
                    }
                }
                let c = self.ev_conn(*connection_id, "ConnectionClosed")?;
                ensure!(c.closed == 0, "ConnectionClosed {connection_id} twice");
                c.closed += 1;
                if !self.sized_close(connection_id.0, *reason, true)? {
                    self.check_close_reason(connection_id.0, *reason, "ConnectionClosed")?;
                }
                // Spec ("Closing a Connection Pool"): the pool closes its
                // connections, then emits PoolClosed.
                ensure!(
                    !self.step_pool_closed,
                    "ConnectionClosed {connection_id} after PoolClosed"
                );
                if *reason == ClosedReason::Stale && self.step_caused.is_none() {
                    self.step_caused = Some(format!("ConnectionClosed {connection_id} (stale)"));
                }
            }
            Event::ConnectionCheckedOut {
                connection_id,
                duration,
                ..
            } => {
                let c = self.ev_conn(*connection_id, "ConnectionCheckedOut")?;
                ensure!(
                    c.ready && c.closed == 0 && !c.checked_out,
                    "ConnectionCheckedOut {connection_id}: {c:?}"
                );
                c.checked_out = true;
                c.checked_out_for = Some(*duration);
                self.ev_checked_out += 1;
            }
            Event::ConnectionCheckedIn { connection_id, .. } => {
                let c = self.ev_conn(*connection_id, "ConnectionCheckedIn")?;
                ensure!(
                    c.checked_out,
                    "ConnectionCheckedIn {connection_id} not checked out"
                );
                c.checked_out = false;
            }
            Event::ConnectionCheckOutStarted { .. } => {
                self.ev_started += 1;
                // What the checkout does from here on, it does queued.
                self.unqueued = None;
            }
            Event::ConnectionCheckOutFailed { error, duration, .. } => {
                self.check_checkout_error(error, "ConnectionCheckOutFailed")?;
                self.ev_failed += 1;
                self.ev_fail_durations.push_back(*duration);
                ensure!(
                    !self.step_pool_closed,
                    "ConnectionCheckOutFailed after PoolClosed"
                );
                if matches!(**error, CheckOutError::PoolCleared { .. }) && self.step_caused.is_none() {
                    self.step_caused = Some("a checkout failed as cleared".to_owned());
                }
            }
            Event::ReconnectGaveUp { last_error, .. } => {
                self.gave_up_events += 1;
                let Some(f) = &self.failure else {
                    return Err("ReconnectGaveUp without a failure".to_owned());
                };
                check_labels(last_error, f.kind, "ReconnectGaveUp")?;
            }
            other => return Err(format!("unknown event {other:?}")),
        }
        ensure!(
            self.ev_started >= self.ev_checked_out + self.ev_failed,
            "{} checkouts started, {} checked out, {} failed",
            self.ev_started,
            self.ev_checked_out,
            self.ev_failed
        );
        Ok(())
    }

    // ----- after every step -------------------------------------------------

    fn check(&mut self, fired: bool) -> Result<(), String> {
        self.pool.check_invariants()?;
        ensure!(
            self.pool.generation() == self.generation,
            "the pool is at generation {}, the model counts {}",
            self.pool.generation(),
            self.generation
        );
        ensure!(
            self.ev_fail_durations.is_empty(),
            "ConnectionCheckOutFailed without its Fail"
        );
        let wait_time = self.pool.stats().wait_time;
        ensure!(
            wait_time == self.wait_time,
            "wait time {wait_time:?}, but checkouts waited {:?}",
            self.wait_time
        );
        if let Some((true, service)) = self.step_clear {
            // Spec: an interrupting clear interrupts every in-use connection
            // of a generation up to the one it ended (of its service,
            // load-balanced); non-load-balanced, it abandons pending ones.
            for (i, c) in self.conns.iter().enumerate() {
                let id = i as u64 + 1;
                let live = match c.state {
                    CState::Held { interrupted: false } => true,
                    CState::Pending => service.is_none(),
                    _ => false,
                };
                ensure!(
                    !(live && (service.is_none() || c.service == service) && self.is_stale(id)),
                    "connection {id} of generation {} is {:?} after an interrupting clear",
                    c.generation,
                    c.state
                );
            }
        }
        ensure!(
            self.expected_late.is_none(),
            "late connection {:?} was not disposed of",
            self.expected_late
        );
        if let Some((id, must_close)) = self.check_in_verdict.take() {
            let state = self.conns[id as usize - 1].state;
            if must_close {
                ensure!(
                    state == CState::Closed,
                    "perished connection {id} checked in is {state:?}"
                );
            } else {
                ensure!(
                    matches!(state, CState::Pooled | CState::Held { .. }),
                    "connection {id} checked in is {state:?}, not available"
                );
            }
        }
        if let Some((w, error)) = self.check_out_verdict.take() {
            let got = &self.waiters[w.0 as usize - 1];
            ensure!(
                got.state == WState::Failed && got.error == Some(error),
                "checkout {w} got {:?} {:?}, not {error}",
                got.state,
                got.error
            );
        }
        for i in 0..self.touched.len() {
            let id = self.touched[i];
            let c = &self.conns[id as usize - 1];
            ensure!(
                c.state != CState::Disposing,
                "interrupted connection {id} was not disposed of"
            );
            if self.events {
                let closed = self.ev_conns[id as usize - 1].closed == 1;
                ensure!(
                    closed == c.closed_counted,
                    "connection {id} is {:?} but ConnectionClosed {}",
                    c.state,
                    if closed { "was emitted" } else { "is missing" }
                );
            }
        }
        if let Some(a) = self.arrival.take() {
            if a.over == Some(true) {
                let state = self.conns[a.id as usize - 1].state;
                ensure!(
                    state == CState::Closed,
                    "connection {} arrived above maxPoolSize {} and is {state:?}",
                    a.id,
                    self.opts.max_pool_size
                );
                ensure!(
                    self.delivers == a.delivers,
                    "connection {} arrived above maxPoolSize {}, yet a waiter was served",
                    a.id,
                    self.opts.max_pool_size
                );
            }
            if let Some((before, Some(grows))) = a.returns_bad {
                let bad = self.pool.stats().returns_bad;
                ensure!(
                    bad == before + grows,
                    "returns_bad went from {before} to {bad} as connection {} came back (over maxPoolSize: {:?})",
                    a.id,
                    a.over
                );
            }
        }
        let s = self.pool.status();
        let o = &self.opts;
        let sizes = (
            self.pool.options().min_pool_size(),
            self.pool.options().max_pool_size(),
        );
        ensure!(
            sizes == (o.min_pool_size, o.max_pool_size),
            "the pool's (minPoolSize, maxPoolSize) are {sizes:?}, the model's {:?}",
            (o.min_pool_size, o.max_pool_size)
        );
        // Above maxPoolSize only after a resize down, never above the total
        // it left nor above the total of any step since, and with nothing
        // available.
        let max = o.max_pool_size as usize;
        if max == 0 || s.total <= max {
            self.shrink_bound = None;
        } else {
            ensure!(
                self.shrink_bound.is_some_and(|bound| s.total <= bound) && s.available == 0,
                "total {} > maxPoolSize {max} ({} available; at most {:?} after the resize down)",
                s.total,
                s.available,
                self.shrink_bound
            );
            self.shrink_bound = Some(s.total);
        }
        let o = &self.opts;
        ensure!(
            s.pending <= o.max_connecting as usize,
            "pending {} > maxConnecting {}",
            s.pending,
            o.max_connecting
        );
        let held_all = self.held.len();
        ensure!(
            (s.pending, s.available, s.in_use, s.waiting)
                == (
                    self.pending.len(),
                    self.pooled,
                    self.held_live,
                    self.waiting.len()
                ),
            "pool counts (pending, available, in use, waiting) {:?}, model {:?} ({held_all} held)",
            (s.pending, s.available, s.in_use, s.waiting),
            (
                self.pending.len(),
                self.pooled,
                self.held_live,
                self.waiting.len()
            )
        );
        ensure!(
            s.total == s.pending + s.available + s.in_use,
            "total is not the sum: {s:?}"
        );
        ensure!(
            self.checkouts == self.delivers + self.fails + self.cancels + self.waiting.len() as u64,
            "{} checkouts: {} served, {} failed, {} cancelled, {} waiting",
            self.checkouts,
            self.delivers,
            self.fails,
            self.cancels,
            self.waiting.len()
        );
        if let Some(&(d, w)) = self.deadlines.first() {
            ensure!(d > self.pool_now, "waiter {w} is still queued past its deadline");
            let t = self.pool.poll_timeout();
            ensure!(
                t.is_some_and(|t| t <= d),
                "poll_timeout {t:?} is after waiter {w}'s deadline"
            );
        }
        if s.state == PoolState::Closed {
            ensure!(
                s.pending + s.available + s.waiting == 0,
                "closed pool holds {s:?}"
            );
        }
        if fired {
            // A driver sleeps until poll_timeout: one in the past after the
            // timer fired would make it spin.
            let t = self.pool.poll_timeout();
            ensure!(
                t.is_none_or(|t| t > self.pool_now),
                "poll_timeout is {:?} in the past right after handle_timeout",
                self.pool_now - t.unwrap()
            );
        }
        if self.events {
            ensure!(
                s.state == self.ev_state,
                "state {:?}, events say {:?}",
                s.state,
                self.ev_state
            );
            ensure!(
                (self.ev_started, self.ev_checked_out, self.ev_failed)
                    == (self.checkouts, self.delivers, self.fails),
                "events (started, checked out, failed) {:?}, outputs {:?}",
                (self.ev_started, self.ev_checked_out, self.ev_failed),
                (self.checkouts, self.delivers, self.fails)
            );
        }
        Ok(())
    }
}

/// An establishment error (of a `ConnectionClosed`, a checkout's
/// `ConnectionError`, a `ReconnectGaveUp`) is of the kind reported, with
/// its labels: `SystemOverloadedError` and `RetryableError` for a network
/// failure, none for the others.
fn check_labels(error: &EstablishError, kind: FailKind, what: &str) -> Result<(), String> {
    let labelled = kind.labelled();
    ensure!(
        error.kind() == kind.kind()
            && error.has_label("SystemOverloadedError") == labelled
            && error.has_label("RetryableError") == labelled
            && error.is_overload() == labelled
            && error.is_retryable() == labelled,
        "{what}: a {kind:?} failure reported as {error:?}"
    );
    Ok(())
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

/// Runs `cmds`, checking after every step; the error names the step.
fn run(opts: &Opts, cmds: &[Cmd], t0: Instant, mode: Events, record: bool) -> Result<Sim, String> {
    let mut sim = Sim::new(opts, t0, mode, record)?;
    for (i, cmd) in cmds.iter().enumerate() {
        sim.step(cmd)
            .map_err(|e| format!("step {i} {cmd:?} at +{:?}: {e}", sim.elapsed()))?;
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
        let cmd = if !sim.held.is_empty() {
            Cmd::CheckIn {
                pick: 0,
                errored: false,
            }
        } else if !sim.pending.is_empty() {
            Cmd::Established { pick: 0, service: 0 }
        } else if let Some(t) = sim.pool.poll_timeout() {
            if t.saturating_duration_since(sim.wall) < Duration::from_millis(5) {
                Cmd::Advance { ms: 5 }
            } else {
                Cmd::FireTimer { early: false }
            }
        } else {
            return Err(format!(
                "waiters {:?} wait with nothing held, pending or scheduled: {:?}",
                sim.waiting,
                sim.pool.status()
            ));
        };
        sim.step(&cmd)
            .map_err(|e| format!("winding down, {cmd:?} at +{:?}: {e}", sim.elapsed()))?;
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
        ..ProptestConfig::with_cases(cases)
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn pool_matches_the_model(opts in opts(), cmds in prop::collection::vec(cmd(), 0..=200)) {
        if let Err(e) = run(&opts, &cmds, origin(), Events::Merged, false) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// The same inputs give the same outputs, whatever the absolute time;
    /// with events off, the same actions (and the loud `ReconnectGaveUp`);
    /// with events kept apart, the same events and the same actions, each
    /// in the same order.
    #[test]
    fn same_commands_same_outputs(opts in opts(), cmds in prop::collection::vec(cmd(), 0..=200)) {
        let t0 = origin();
        let first = run(&opts, &cmds, t0, Events::Merged, true).map_err(TestCaseError::fail)?;
        let later = t0 + Duration::from_secs(3600);
        let second = run(&opts, &cmds, later, Events::Merged, true).map_err(TestCaseError::fail)?;
        let quiet = run(&opts, &cmds, t0, Events::Off, true).map_err(TestCaseError::fail)?;
        let apart = run(&opts, &cmds, t0, Events::Apart, true).map_err(TestCaseError::fail)?;
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
    }
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
    let strategy = (opts(), prop::collection::vec(cmd(), 0..=200));
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
    ];
    let mut counts = vec![0usize; needles.len()];
    let mut kept_waiting = 0;
    let mut shrunk_on_arrival = 0;
    for _ in 0..300 {
        let (opts, cmds) = strategy.new_tree(&mut runner).unwrap().current();
        let sim = run(&opts, &cmds, origin(), Events::Merged, true).unwrap();
        kept_waiting += sim.kept_waiting;
        shrunk_on_arrival += sim.shrunk_on_arrival;
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
}
