//! The reference model: the books it keeps on every connection and
//! checkout (`ConnModel`, `WaiterModel`, the step's `Failure`, `ResizeStep`
//! and `Arrival`), the simulation `Sim` that drives the pool beside them,
//! and the transitions of those books. The steps are in `steps.rs`, their
//! handlers in `commands/`, the
//! judging of outputs in `outputs.rs`, the after-step checks in
//! `checks.rs`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use cmap_core::{
    Action, ClosedReason, InputKind, Measure, Pool, PoolOptions, PoolState, Pooled, ServiceId, WaiterId,
};

use crate::steps::{Drawn, FailKind, Step};
use crate::support::Conn;
use crate::{Events, Opts};

/// Where a connection is, as the test sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CState {
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

/// How many connections the pool may establish at once, predicted from the
/// results and latencies of its connects alone: `maxConnecting`, or the
/// adaptive pace (`PoolOptionsBuilder::adaptive_connecting`), in the
/// model's own words:
///
/// - it starts at `min`;
/// - a connect that took at most twice the fastest recent one plus 10 ms
///   doubles it while it is under the doubling ceiling (at first `max`),
///   and from there adds one each time as many such connects as it came,
///   never past `max`;
/// - a slower connect, or a refusal with the backpressure labels, sets
///   the doubling ceiling to half of it (not under `min`) and it to `min`;
///   a clear sets both to `min`; either starts the count of connects
///   towards the next step afresh;
/// - after a refusal it is 1 instead of `min`, until a connect succeeds
///   at its usual latency, which brings it to `min` and nothing more;
/// - the fastest recent connect is the first one's latency, then after
///   each connect the smaller of that connect's and the previous figure
///   raised by 1/16 of itself (by 1 ms at least).
///
/// Whichever the pace, fixed or adaptive, the pool starts one connect at a
/// time (a probe) while the last establishment failed with a network error,
/// until one succeeds (`allowed`).
#[derive(Debug)]
pub(crate) struct PaceModel {
    pub(crate) limit: u32,
    /// The last establishment failed with a network error.
    pub(crate) probing: bool,
    ceiling: u32,
    /// Connects since the last step of one.
    since_step: u32,
    fastest: Option<Duration>,
    bounds: Option<(u32, u32)>,
}

impl PaceModel {
    pub(crate) fn new(opts: &Opts) -> PaceModel {
        let (limit, ceiling) = opts
            .adaptive
            .unwrap_or((opts.max_connecting, opts.max_connecting));
        PaceModel {
            limit,
            probing: false,
            ceiling,
            since_step: 0,
            fastest: None,
            bounds: opts.adaptive,
        }
    }

    /// How many may be pending before the pool starts another: the
    /// pace's limit, or one probe.
    pub(crate) fn allowed(&self) -> u32 {
        if self.probing {
            self.limit.min(1)
        } else {
            self.limit
        }
    }

    /// A pending connection's establishment ended: a failure with a
    /// network error brings the probe, anything else ends it.
    pub(crate) fn ended(&mut self, network_error: bool) {
        self.probing = network_error;
    }

    /// The most connections ever pending at once.
    pub(crate) fn most(&self) -> u32 {
        self.bounds.map_or(self.limit, |(_, max)| max)
    }

    pub(crate) fn established(&mut self, latency: Duration) {
        let Some((min, max)) = self.bounds else { return };
        let fastest = self.fastest.unwrap_or(latency);
        let raised = fastest + Duration::from_millis(1).max(fastest / 16);
        self.fastest = Some(if latency < raised { latency } else { raised });
        if latency > fastest * 2 + Duration::from_millis(10) {
            self.fall();
        } else if self.limit < min {
            self.limit = min;
        } else if self.limit < self.ceiling {
            self.limit = (self.limit * 2).min(self.ceiling).min(max);
        } else {
            self.since_step += 1;
            if self.since_step == self.limit {
                self.since_step = 0;
                self.limit = (self.limit + 1).min(max);
            }
        }
    }

    pub(crate) fn refused(&mut self) {
        if self.bounds.is_some() {
            self.fall();
            self.limit = 1;
        }
    }

    pub(crate) fn cleared(&mut self) {
        if let Some((min, _)) = self.bounds {
            self.fall();
            self.ceiling = min;
        }
    }

    fn fall(&mut self) {
        let (min, _) = self.bounds.expect("adaptive");
        self.ceiling = (self.limit / 2).max(min);
        self.limit = min;
        self.since_step = 0;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WState {
    Waiting,
    Delivered,
    Failed,
    Cancelled,
}

#[derive(Debug)]
pub(crate) struct ConnModel {
    pub(crate) state: CState,
    /// The pool must have emitted exactly one `ConnectionClosed` for it.
    pub(crate) closed_counted: bool,
    /// When its `Establish` came out.
    pub(crate) created_at: Instant,
    /// When it last became available.
    pub(crate) pooled_since: Instant,
    /// Its place in the available stack: the order in which connections
    /// last became available (the least recently used has the lowest).
    pub(crate) pooled_seq: u64,
    /// Its generation, by the model's own count of clears: the pool's when
    /// its `Establish` came out, or (load-balanced) its service's when it
    /// was established.
    pub(crate) generation: u32,
    /// Its service (load-balanced), once established.
    pub(crate) service: Option<ServiceId>,
    /// While pending: the checkout it was started for, as the spec's
    /// "create a connection for the wait queue" picks it (the first one in
    /// arrival order that none is being made for); `None` when it was
    /// started for minPoolSize or that checkout has gone.
    pub(crate) requester: Option<u64>,
}

/// What the events said about a connection.
#[derive(Debug, Default)]
pub(crate) struct ConnEvents {
    pub(crate) ready: bool,
    pub(crate) closed: u32,
    pub(crate) checked_out: bool,
    /// The duration of its latest `ConnectionCheckedOut`, until the
    /// `Deliver` it announces.
    pub(crate) checked_out_for: Option<Duration>,
}

#[derive(Debug)]
pub(crate) struct WaiterModel {
    /// The pool's clock when the checkout started.
    pub(crate) started: Instant,
    pub(crate) deadline: Option<Instant>,
    pub(crate) state: WState,
    /// The spec name of the error it failed with.
    pub(crate) error: Option<&'static str>,
    /// The pending connection started for it, if any.
    pub(crate) requested: Option<u64>,
}

/// An establishment failure reported this step, and what the model
/// predicts must follow (spec: "Establishing a Connection",
/// "Backpressure-enabled").
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) id: u64,
    pub(crate) kind: FailKind,
    /// The checkout that must fail at once with a `ConnectionError` for it
    /// (followed exactly only in `Sim::exact`).
    pub(crate) victim: Option<u64>,
    /// The checkout it was made for, which keeps waiting
    /// (`keep_waiting_on_overload` and a labelled failure).
    pub(crate) kept: Option<u64>,
    /// The pool's state before the step: a labelled failure leaves it.
    pub(crate) state_before: PoolState,
    /// The reconnect backoff holds new connections back for the rest of
    /// the step (a backoff that has not given up).
    pub(crate) backoff_holds: bool,
    /// The pool gives up reconnecting with this failure.
    pub(crate) gives_up: bool,
    /// When the pool next tries for waiting checkouts at the latest: the
    /// failure's instant plus the pause's bound (15 ms doubled per
    /// consecutive failure, capped by `max_delay_while_waiting` and by the
    /// full backoff's delay).
    pub(crate) retry_by: Option<Instant>,
    /// Its `ConnectionClosed` came (what follows it comes after the
    /// backoff was set).
    pub(crate) closed_seen: bool,
    /// How many checkouts failed with a `ConnectionError` this step.
    pub(crate) connection_errors: u32,
}

/// What the model predicts of this step's accepted resize.
#[derive(Debug)]
pub(crate) struct ResizeStep {
    pub(crate) min: u32,
    pub(crate) max: u32,
    /// The available connections it closes for the size (reason
    /// `Shrunk`), least recently used first, in the order their `Close`
    /// actions must come; and their `ConnectionClosed` events.
    pub(crate) closes: VecDeque<u64>,
    pub(crate) closed_events: VecDeque<u64>,
    /// Its `PoolResized` came.
    pub(crate) announced: bool,
    /// How many connections must be pending after it (growing starts
    /// them for waiters, and towards the new minPoolSize); `None` while a
    /// reconnect backoff may hold them back (its timing is not followed).
    pub(crate) pending_after: Option<usize>,
}

/// A connection arriving this step (checked in, or established), and what
/// the model predicts for it against the pool's size.
#[derive(Debug)]
pub(crate) struct Arrival {
    pub(crate) id: u64,
    /// Whether the pool holds more than maxPoolSize counting it: then it
    /// is closed with reason `Shrunk` and serves no waiter. `None` when the
    /// input lets a checkout's deadline pass: the pending connection
    /// abandoned for it may bring the pool back within its size first.
    pub(crate) over: Option<bool>,
    /// The model's count of delivered checkouts when the step began.
    pub(crate) delivers: u64,
    /// `Stats::returns_bad` before a check-in, and by how much it must
    /// grow (`None`: either way).
    pub(crate) returns_bad: Option<(u64, Option<u64>)>,
}

pub(crate) struct Sim {
    pub(crate) pool: Pool<Conn>,
    pub(crate) other: Pool<Conn>,
    pub(crate) opts: Opts,
    pub(crate) events: bool,
    /// Events are taken with `take_events`, apart from the actions.
    pub(crate) apart: bool,
    pub(crate) wait_queue_timeout: Option<Duration>,
    pub(crate) t0: Instant,
    /// The driver's clock.
    pub(crate) wall: Instant,
    /// The latest `now` the pool was given: its notion of the present.
    pub(crate) pool_now: Instant,
    pub(crate) held: Vec<Pooled<Conn>>,
    /// By connection id - 1.
    pub(crate) conns: Vec<ConnModel>,
    pub(crate) pending: BTreeSet<u64>,
    pub(crate) not_pending: Vec<u64>,
    pub(crate) pooled: usize,
    pub(crate) held_live: usize,
    /// By waiter id - 1.
    pub(crate) waiters: Vec<WaiterModel>,
    pub(crate) waiting: BTreeSet<u64>,
    pub(crate) deadlines: BTreeSet<(Instant, u64)>,
    pub(crate) resolved: Vec<u64>,
    /// A late connection handed in this step, which must be disposed of.
    pub(crate) expected_late: Option<u64>,
    /// A connection checked in this step, and whether it must be closed.
    pub(crate) check_in_verdict: Option<(u64, bool)>,
    /// A checkout of a paused or closed pool this step, and the error it
    /// must fail with at once.
    pub(crate) check_out_verdict: Option<(WaiterId, &'static str)>,
    /// A checkout served directly (`handle_check_out_direct`): judged as
    /// the `Deliver` it stands for, after the input's events.
    pub(crate) served_directly: Option<Action<Conn>>,
    pub(crate) touched: Vec<u64>,
    /// The pool's generation by the model's own count of clears (never
    /// read from the pool; compared with it after every step).
    pub(crate) generation: u32,
    /// The generation when this step began: a connection started in a step
    /// that clears was started before the clear (after it, the pool is
    /// paused and starts none).
    pub(crate) step_generation: u32,
    /// Load-balanced: each service's generation and connection count, as
    /// the spec's map keeps them (an entry goes with its last connection).
    pub(crate) services: BTreeMap<ServiceId, (u32, u32)>,
    /// `handle_close` was called.
    pub(crate) closed: bool,
    /// The pool's `now` when this step began.
    pub(crate) step_started: Instant,
    /// This step's clear, if it took effect: (interrupt, service).
    pub(crate) step_clear: Option<(bool, Option<ServiceId>)>,
    /// This step forces a closed pool's connections in use
    /// (`Input::ForceClose`).
    pub(crate) step_force_close: bool,
    /// Connections in use a force close interrupted (for the generator's
    /// coverage).
    pub(crate) forced: u64,
    /// The connection checked in this step, and whether it was errored.
    pub(crate) checking_in: Option<(u64, bool)>,
    /// The connection this step closes by its own input (detach, failed
    /// establishment) and the reason its `ConnectionClosed` must give.
    pub(crate) closing: Option<(u64, ClosedReason)>,
    /// The first event of this step that a clear causes (a stale close, a
    /// checkout failed as cleared), which must follow `PoolCleared`.
    pub(crate) step_caused: Option<String>,
    /// `PoolClosed` came this step: the closing is over.
    pub(crate) step_pool_closed: bool,
    /// The durations of `ConnectionCheckOutFailed` events not yet matched
    /// with their `Fail`.
    pub(crate) ev_fail_durations: VecDeque<Duration>,
    /// What `Stats::wait_time` must be: every delivered checkout's wait.
    pub(crate) wait_time: Duration,
    pub(crate) checkouts: u64,
    pub(crate) delivers: u64,
    pub(crate) fails: u64,
    pub(crate) cancels: u64,
    // From the events:
    pub(crate) ev_conns: Vec<ConnEvents>,
    pub(crate) ev_state: PoolState,
    pub(crate) ev_started: u64,
    pub(crate) ev_checked_out: u64,
    pub(crate) ev_failed: u64,
    /// Every output, for the determinism test.
    pub(crate) transcript: Option<Vec<String>>,
    /// Requesters are followed exactly: events come among the actions, in
    /// the order the pool made them, so the model sees where the time an
    /// input lets pass ends. Otherwise it cannot always tell what an
    /// `Establish` was started for, and checks only what holds whichever
    /// checkout it was.
    pub(crate) exact: bool,
    /// A checkout of this step not queued yet: the input first lets time
    /// pass, and what that starts comes before its
    /// `ConnectionCheckOutStarted`.
    pub(crate) unqueued: Option<u64>,
    /// The connection whose result this step reports, and its requester:
    /// still pending in the pool while the input lets time pass, until
    /// its `ConnectionReady` or `ConnectionClosed`.
    pub(crate) arriving: Option<(u64, Option<u64>)>,
    /// This step's establishment failure.
    pub(crate) failure: Option<Failure>,
    /// With a reconnect backoff: since when establishing has failed
    /// without a success (the pool gives up `give_up_after` from there).
    pub(crate) failing_since: Option<Instant>,
    /// Consecutive failures since the last success (with a reconnect
    /// backoff; giving up starts the count again).
    pub(crate) failures: u32,
    /// `ReconnectGaveUp` events this step.
    pub(crate) gave_up_events: u32,
    /// The measures the events judged since the last drain call for
    /// (`Sim::drain` checks the pool's against them).
    pub(crate) measured: Vec<Measure>,
    /// Checkouts that kept waiting after their connection failed with an
    /// overload (for the generator's coverage).
    pub(crate) kept_waiting: u64,
    /// Bumped each time a connection becomes available (`pooled_seq`).
    pub(crate) pooled_seq: u64,
    /// This step's accepted resize.
    pub(crate) resize: Option<ResizeStep>,
    /// This step's arriving connection, against the pool's size.
    pub(crate) arrival: Option<Arrival>,
    /// While the pool holds more than maxPoolSize (after a resize down):
    /// the most it may hold, which never grows until it is back within
    /// its size.
    pub(crate) shrink_bound: Option<usize>,
    /// Outputs (events and actions) of this step so far.
    pub(crate) step_outputs: u32,
    /// Connections closed for the size as they arrived (for the
    /// generator's coverage).
    pub(crate) shrunk_on_arrival: u64,
    /// The establishment pace the pool must keep.
    pub(crate) pace: PaceModel,
    /// The most connections that may be pending at any point of this step:
    /// the pace before the step's result moves it, or after, whichever is
    /// larger.
    pub(crate) pace_bound: u32,
    /// Pending connections when the step began.
    pub(crate) step_pending: usize,
    /// The kinds of input the pool was handed (for the generator's
    /// coverage).
    pub(crate) handled: BTreeSet<InputKind>,
}

impl Sim {
    pub(crate) fn new(opts: &Opts, t0: Instant, mode: Events, record: bool) -> Result<Sim, String> {
        let options = opts.build();
        let wait_queue_timeout = options.wait_queue_timeout();
        let mut pool = Pool::new(t0, "test:27017".parse().unwrap(), options);
        let events = mode != Events::Off;
        pool.set_events_enabled(events);
        pool.set_measures_enabled(true);
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
            step_force_close: false,
            forced: 0,
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
            failures: 0,
            gave_up_events: 0,
            measured: Vec::new(),
            kept_waiting: 0,
            pooled_seq: 0,
            resize: None,
            arrival: None,
            shrink_bound: None,
            step_outputs: 0,
            shrunk_on_arrival: 0,
            pace: PaceModel::new(opts),
            pace_bound: 0,
            step_pending: 0,
            handled: BTreeSet::new(),
        };
        if opts.start_ready {
            sim.step(&Step::Input(Drawn::of(InputKind::Ready)))
                .map_err(|e| format!("initial ready: {e}"))?;
        }
        Ok(sim)
    }

    pub(crate) fn log(&mut self, line: impl FnOnce() -> String) {
        if let Some(t) = &mut self.transcript {
            t.push(line());
        }
    }

    /// The pool's `now` moves to `now` if that is later.
    pub(crate) fn told(&mut self, now: Instant) {
        self.pool_now = self.pool_now.max(now);
    }

    /// A checkout served at once, or a check-in, that left no action
    /// never moves `poll_timeout` earlier than it was (`before`): drivers
    /// re-arm their timer after any other input only. (Vacuous while
    /// events share the stream: it then always holds output.)
    pub(crate) fn timer_not_moved_earlier(&self, before: Option<Instant>) -> Result<(), String> {
        let after = self.pool.poll_timeout();
        ensure!(
            self.pool.has_output() || after.is_none_or(|a| before.is_some_and(|b| a >= b)),
            "an input that left no action moved poll_timeout from {before:?} to {after:?}"
        );
        Ok(())
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.pool_now - self.t0
    }

    pub(crate) fn conn(&mut self, id: u64) -> Result<&mut ConnModel, String> {
        let index = usize::try_from(id).unwrap().wrapping_sub(1);
        self.conns
            .get_mut(index)
            .ok_or_else(|| format!("connection {id} was never issued"))
    }

    /// Moves connection `id` from one of `from` to `to`, keeping counts.
    pub(crate) fn move_conn(&mut self, id: u64, from: &[CState], to: CState) -> Result<(), String> {
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

    pub(crate) fn count_closed(&mut self, id: u64) -> Result<(), String> {
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

    pub(crate) fn new_waiter(&mut self, w: WaiterId, deadline: Option<Instant>) -> Result<(), String> {
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

    pub(crate) fn resolve(&mut self, w: WaiterId, to: WState) -> Result<(), String> {
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

    pub(crate) fn expect_immediate_failure(&mut self, before: PoolState, w: WaiterId) {
        self.check_out_verdict = match before {
            PoolState::Ready => None,
            PoolState::Paused => Some((w, "PoolClearedError")),
            PoolState::Closed => Some((w, "PoolClosedError")),
        };
    }

    /// Whether the pool's generation (its service's, load-balanced) has
    /// moved on since connection `id` was made, by the model's count.
    pub(crate) fn is_stale(&self, id: u64) -> bool {
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
    pub(crate) fn may_be_past_lifetime(&self, id: u64) -> bool {
        self.opts.lifetime.is_some_and(|(lifetime, jitter)| {
            let earliest = Duration::from_millis(lifetime).mul_f64(1.0 - jitter);
            let created = self.conns[id as usize - 1].created_at;
            self.pool_now + Duration::from_micros(1) >= created + earliest
        })
    }

    /// The reason connection `id` must be closed with now, by what the model
    /// knows of it (spec: "Closing a Connection", "Perishable"); `Lifetime`
    /// stands for "may be closed for its lifetime", which is jittered.
    pub(crate) fn expected_close(&self, id: u64) -> Result<ClosedReason, String> {
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
            // Forced by a closed pool (beyond the spec): closed as the
            // pool's.
            CState::Held { interrupted: false } if self.step_force_close => ClosedReason::PoolClosed,
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
    pub(crate) fn check_close_reason(&self, id: u64, reason: ClosedReason, what: &str) -> Result<(), String> {
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
    pub(crate) fn requester_of_new(&self) -> Result<Option<u64>, String> {
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
}
