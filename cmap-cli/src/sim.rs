//! The virtual-time engine: runs one test against `cmap_core::Pool` with
//! simulated threads and the simulated endpoint, on a clock that only moves
//! when everything that can run at the current instant has run.
//!
//! Scheduling, in the manner of quinn-proto's test pair (`tests/util.rs`):
//!
//! 1. Named threads run first, in the order they were started, each until
//!    it blocks; only then does the main thread take its next operation. An
//!    operation the main thread hands to a named thread therefore runs
//!    before the main thread's next operation, as a real thread would start
//!    on it while the main thread moves on.
//! 2. When every thread is blocked, the engine takes the earliest scheduled
//!    item, moving the clock to it: first the core's `poll_timeout`, then
//!    establishments by (completion time, connection id), then threads whose
//!    `wait` or `waitForEvent` timeout ends. So at one instant the pool and
//!    the endpoint act before a waking thread looks, and a `waitForEvent`
//!    whose event arrives at its deadline succeeds. After each item, threads
//!    run again (step 1).
//! 3. An establishment with no failPoint delay completes at the instant it
//!    began, but as a scheduled item: after the input that started it has
//!    been drained and every thread has blocked, as a real connection
//!    attempt would finish after the caller moved on.
//! 4. The test ends at the instant the main thread has begun its last
//!    operation and is no longer blocked, or stops at its first error. What
//!    is due at that same instant still happens (the clock no longer moves):
//!    the observation is "every event up to that instant", rather than a cut
//!    through one instant that would depend on the order of rule 2.
//!
//! Outputs are drained after every input, and the pool's invariants checked
//! after each drain.
//!
//! A run that can make no progress (nothing runnable, nothing scheduled),
//! passes `MAX_VIRTUAL` of virtual time or `MAX_STEPS` steps fails with a
//! message naming what each thread waits for, rather than hanging.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cmap_core::virtual_time::{self, VirtualDriver};
use cmap_core::{
    Action, Clear, ConnectionId, EstablishError, Input, Output, Pool, PoolOptions, Pooled, WaiterId,
};
use serde_json::Value;

use crate::endpoint::{Endpoint, EndpointError};
use crate::format::{OpKind, Operation, TestFile};
use crate::observe::{event_json, RaisedError};
use crate::threads::{Block, Blocked, SimThread, MAIN};
use crate::trace::{millis, Trace};
use crate::verify::Observed;

/// More steps than any test needs by orders of magnitude: reaching it means
/// a livelock (something scheduled again and again at one instant).
const MAX_STEPS: u64 = 1_000_000;
/// The longest virtual time a test may take; reaching it means a thread
/// waits for something that never comes while periodic work keeps the
/// clock moving.
const MAX_VIRTUAL: Duration = Duration::from_secs(600);
/// The pool's address; any will do, events only need one.
const ADDRESS: &str = "localhost:27017";

/// The real instant virtual time starts from. The only clock read of the
/// engine: afterwards time only moves by adding durations.
#[allow(clippy::disallowed_methods)]
pub fn origin() -> Instant {
    Instant::now()
}

/// What the simulated endpoint hands out: only its id matters.
#[derive(Debug)]
pub struct SimConn(pub ConnectionId);

/// Runs `test` on virtual time. Returns what it observed, or why the run
/// itself failed, plus the trace lines (empty unless `trace`).
pub fn run(test: &TestFile, options: PoolOptions, trace: bool) -> (Result<Observed, String>, Vec<String>) {
    let mut sim = Sim::new(test, options, trace);
    let result = sim.drain().and_then(|()| sim.run_to_end()).map(|()| Observed {
        main_error: sim.threads[MAIN].error.as_ref().map(RaisedError::to_json),
        events: std::mem::take(&mut sim.events),
    });
    (result, sim.trace.into_lines())
}

/// An establishment in progress at the simulated endpoint.
struct Connecting {
    due: Instant,
    outcome: Result<(), EndpointError>,
}

struct Sim {
    origin: Instant,
    now: Instant,
    pool: Pool<SimConn>,
    endpoint: Endpoint,
    connecting: BTreeMap<ConnectionId, Connecting>,
    threads: Vec<SimThread>,
    /// Which thread each queued checkout belongs to.
    waiters: BTreeMap<WaiterId, usize>,
    /// Checked-out connections by label. One checked out without a label
    /// (or whose label is reused) is dropped: the pool counts it in use for
    /// good, as nothing can check it in.
    labels: BTreeMap<String, Pooled<SimConn>>,
    events: Vec<Value>,
    /// Events seen per type, for `waitForEvent` (which ignores `ignore`).
    seen: BTreeMap<&'static str, usize>,
    /// Who caused the outputs being drained: a thread, `timer`, `endpoint`.
    actor: String,
    trace: Trace,
    steps: u64,
}

/// The engine on cmap-core's virtual-time loop, for its drains: events
/// recorded, actions performed, the invariants checked after each input.
/// Its clock moves by its own schedule (`advance`), timers among the rest.
impl VirtualDriver<SimConn> for Sim {
    type Error = String;

    fn pool(&mut self) -> &mut Pool<SimConn> {
        &mut self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    fn perform(&mut self, output: Output<SimConn>) -> Result<(), String> {
        match output {
            Output::Event(event) => {
                let json = event_json(&event);
                *self.seen.entry(event.name()).or_default() += 1;
                self.note(|| format!("event {json}"));
                self.events.push(json);
                Ok(())
            }
            Output::Action(action) => self.carry_out(action),
        }
    }

    fn settled(&mut self) -> Result<(), String> {
        self.pool
            .check_invariants()
            .map_err(|e| format!("pool invariant broken: {e}"))
    }
}

impl Sim {
    fn new(test: &TestFile, options: PoolOptions, trace: bool) -> Sim {
        let origin = origin();
        let address = ADDRESS.parse().expect("a valid address");
        let mut main = SimThread::new("main");
        main.queue.extend(test.operations.iter().cloned());
        Sim {
            origin,
            now: origin,
            pool: Pool::new(origin, address, options),
            endpoint: Endpoint::new(test.fail_point.clone()),
            connecting: BTreeMap::new(),
            threads: vec![main],
            waiters: BTreeMap::new(),
            labels: BTreeMap::new(),
            events: Vec::new(),
            seen: BTreeMap::new(),
            actor: "main".into(),
            trace: Trace::new(origin, trace),
            steps: 0,
        }
    }

    fn run_to_end(&mut self) -> Result<(), String> {
        loop {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return Err(self.stuck(&format!("no end after {MAX_STEPS} steps")));
            }
            self.wake();
            if let Some(i) = (1..self.threads.len()).find(|&i| self.threads[i].runnable()) {
                self.step(i)?;
            } else if self.threads[MAIN].runnable() {
                self.step(MAIN)?;
            } else if !self.advance(self.threads[MAIN].finished())? {
                return Ok(());
            }
        }
    }

    /// Resumes threads whose condition holds now (time-outs aside, which
    /// are scheduled items).
    fn wake(&mut self) {
        for i in 0..self.threads.len() {
            let outcome = match self.threads[i].blocked.as_ref().map(|b| &b.on) {
                Some(Block::Event { event, count, .. }) if self.seen(event) >= *count => Some(None),
                Some(Block::Join { target }) if self.threads[*target].finished() => {
                    Some(self.threads[*target].error.clone())
                }
                _ => None,
            };
            if let Some(error) = outcome {
                self.actor = self.threads[i].name.clone();
                self.resume(i, error);
            }
        }
    }

    /// Begins thread `i`'s next operation.
    fn step(&mut self, i: usize) -> Result<(), String> {
        let op = self.threads[i]
            .queue
            .pop_front()
            .expect("a runnable thread has an operation");
        self.actor = self.threads[i].name.clone();
        if let (MAIN, Some(name)) = (i, &op.thread) {
            let target = self.thread_index(name)?;
            self.note(|| format!("hands `{op}` to {name}"));
            self.threads[target].queue.push_back(op);
            return Ok(());
        }
        self.note(|| format!("op {op}"));
        let text = op.to_string();
        let Operation { kind, .. } = op;
        match kind {
            OpKind::Start { target } => {
                if self.threads.iter().any(|t| t.name == target) {
                    return Err(format!("thread {target} is started twice"));
                }
                self.threads.push(SimThread::new(&target));
            }
            OpKind::Wait { ms } => {
                let until = self.after(ms)?;
                self.block(i, text, Block::Sleep { until });
            }
            OpKind::WaitForThread { target } => {
                let target = self.thread_index(&target)?;
                self.block(i, text, Block::Join { target });
            }
            OpKind::WaitForEvent {
                event,
                count,
                timeout_ms,
            } => {
                let deadline = timeout_ms.map(|ms| self.after(ms)).transpose()?;
                self.block(
                    i,
                    text,
                    Block::Event {
                        event,
                        count,
                        deadline,
                    },
                );
            }
            OpKind::CheckOut { label } => {
                let waiter = self.pool.handle_check_out(self.now);
                self.waiters.insert(waiter, i);
                self.block(i, text, Block::CheckOut { waiter, label });
                self.drain()?;
            }
            OpKind::CheckIn { connection } => {
                let conn = self.labels.remove(&connection).ok_or_else(|| {
                    format!("`{text}`: no checked-out connection is labelled {connection:?}")
                })?;
                self.pool
                    .handle_check_in(self.now, conn)
                    .map_err(|e| format!("`{text}` refused: {e}"))?;
                self.drain()?;
            }
            OpKind::Clear { interrupt_in_use } => {
                let clear = Clear {
                    interrupt_in_use,
                    ..Clear::default()
                };
                self.pool
                    .handle_clear(self.now, clear)
                    .map_err(|e| format!("`{text}` refused: {e}"))?;
                self.drain()?;
            }
            OpKind::Close => {
                self.pool.handle_close(self.now);
                self.drain()?;
            }
            OpKind::Ready => {
                // Readying a closed pool is refused by the core; to the test
                // it is an error raised by the operation.
                if let Err(e) = self.pool.handle_ready(self.now) {
                    self.resume(i, Some(RaisedError::usage(&e)));
                }
                self.drain()?;
            }
        }
        Ok(())
    }

    /// Moves the clock to the earliest scheduled item and handles it. Once
    /// the main thread has finished (`ending`), only items due at the
    /// current instant are handled; `false` means none is left.
    fn advance(&mut self, ending: bool) -> Result<bool, String> {
        let now = self.now;
        let timer = self.pool.poll_timeout().map(|t| t.max(now));
        let connect = self.connecting.iter().map(|(id, c)| (c.due.max(now), *id)).min();
        let wake = self
            .threads
            .iter()
            .filter_map(SimThread::wakes_at)
            .min()
            .map(|t| t.max(now));
        let next = [timer, connect.map(|(due, _)| due), wake]
            .into_iter()
            .flatten()
            .min();
        let next = match next {
            Some(next) if !ending || next == now => next,
            _ if ending => return Ok(false),
            _ => return Err(self.stuck("stalled: nothing can run and nothing is scheduled")),
        };
        if next.saturating_duration_since(self.origin) > MAX_VIRTUAL {
            return Err(self.stuck(&format!("passed {} of virtual time", millis(MAX_VIRTUAL))));
        }
        self.now = next;
        if timer == Some(next) {
            self.actor = "timer".into();
            self.note(|| "handle_timeout".into());
            return virtual_time::apply(self, Input::Timeout).map(|()| true);
        }
        if let Some((_, id)) = connect.filter(|(due, _)| *due == next) {
            return self.complete(id).map(|()| true);
        }
        for i in 0..self.threads.len() {
            if self.threads[i].wakes_at().is_some_and(|t| t <= next) {
                let error = match self.threads[i].blocked.as_ref().map(|b| &b.on) {
                    Some(Block::Event { event, count, .. }) => Some(RaisedError::wait_for_event_timeout(
                        event,
                        self.seen(event),
                        *count,
                    )),
                    _ => None,
                };
                self.actor = self.threads[i].name.clone();
                self.resume(i, error);
            }
        }
        Ok(true)
    }

    /// The endpoint finishes the handshake of `id`.
    fn complete(&mut self, id: ConnectionId) -> Result<(), String> {
        let Some(connecting) = self.connecting.remove(&id) else {
            return Ok(());
        };
        self.actor = "endpoint".into();
        let result = match connecting.outcome {
            Ok(()) => {
                self.note(|| format!("connection {id} established"));
                self.pool.handle_established(self.now, id, SimConn(id), None)
            }
            Err(error) => {
                self.note(|| format!("connection {id} failed: {} ({error})", error.type_name()));
                let error = EstablishError::new(error.kind(), error);
                self.pool.handle_establish_failed(self.now, id, error)
            }
        };
        result.map_err(|e| format!("the pool refused the outcome of connection {id}: {e}"))?;
        self.drain()
    }

    /// Drains the pool's outputs, recording events and performing actions
    /// (cmap-core's virtual-time loop), then checks the pool's invariants.
    fn drain(&mut self) -> Result<(), String> {
        virtual_time::drain(self)
    }

    fn carry_out(&mut self, action: Action<SimConn>) -> Result<(), String> {
        match action {
            Action::Establish { id } => {
                let handshake = self.endpoint.handshake();
                let due = self.now + handshake.delay;
                self.note(|| {
                    let outcome = match &handshake.outcome {
                        Ok(()) => "success".to_owned(),
                        Err(e) => e.type_name().to_owned(),
                    };
                    format!("establish {id}: {outcome} after {}", millis(handshake.delay))
                });
                self.connecting.insert(
                    id,
                    Connecting {
                        due,
                        outcome: handshake.outcome,
                    },
                );
            }
            Action::AbortEstablish { id } => {
                self.note(|| format!("abort establishing {id}"));
                self.connecting.remove(&id);
            }
            Action::Deliver { waiter, connection } => {
                let (i, label) = self.checkout_of(waiter)?;
                let name = &self.threads[i].name;
                let id = connection.id();
                self.trace.record(self.now, &self.actor, || {
                    format!("deliver connection {id} to {name}")
                });
                if let Some(label) = label {
                    self.labels.insert(label, connection);
                }
                self.resume(i, None);
            }
            Action::Fail { waiter, error } => {
                let (i, _) = self.checkout_of(waiter)?;
                let name = &self.threads[i].name;
                let kind = error.spec_name();
                self.trace.record(self.now, &self.actor, || {
                    format!("fail checkout of {name}: {kind}")
                });
                self.resume(i, Some(RaisedError::from_check_out(&error)));
            }
            Action::Close { id, reason, .. } => self.note(|| format!("close {id} ({})", reason.as_str())),
            Action::Interrupt { id } => self.note(|| format!("interrupt {id}")),
        }
        Ok(())
    }

    /// The thread waiting on checkout `waiter`, and the label it asked for.
    fn checkout_of(&mut self, waiter: WaiterId) -> Result<(usize, Option<String>), String> {
        let i = self
            .waiters
            .remove(&waiter)
            .ok_or_else(|| format!("an outcome for checkout {waiter}, which nobody waits for"))?;
        match self.threads[i].blocked.take().map(|b| b.on) {
            Some(Block::CheckOut { waiter: w, label }) if w == waiter => Ok((i, label)),
            _ => Err(format!(
                "{} got checkout {waiter} it was not waiting for",
                self.threads[i].name
            )),
        }
    }

    fn block(&mut self, i: usize, op: String, on: Block) {
        self.threads[i].blocked = Some(Blocked { on, op });
    }

    fn resume(&mut self, i: usize, error: Option<RaisedError>) {
        let name = &self.threads[i].name;
        self.trace.record(self.now, &self.actor, || match &error {
            Some(e) => format!("{name} raises {}: {}", e.kind, e.message),
            None => format!("{name} resumes"),
        });
        self.threads[i].resume(error);
    }

    fn thread_index(&self, name: &str) -> Result<usize, String> {
        self.threads
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| format!("thread {name} was not started"))
    }

    fn seen(&self, event: &str) -> usize {
        self.seen.get(event).copied().unwrap_or(0)
    }

    fn after(&self, ms: u64) -> Result<Instant, String> {
        self.now
            .checked_add(Duration::from_millis(ms))
            .ok_or_else(|| format!("{ms}ms is too far in the future"))
    }

    fn note(&mut self, what: impl FnOnce() -> String) {
        self.trace.record(self.now, &self.actor, what);
    }

    /// Why the run cannot go on, with what every thread waits for.
    fn stuck(&self, why: &str) -> String {
        let states: Vec<String> = self.threads.iter().map(SimThread::describe).collect();
        let at = millis(self.now.saturating_duration_since(self.origin));
        format!("{why} at {at}; {}", states.join("; "))
    }
}
