//! The real-time engine (`--adapter`): replays a CMAP test against a
//! driver's pool ([`Driver`]: every cmap-async runtime adapter, and
//! cmap-local) in real time, with real threads.
//!
//! What is shared with the virtual-time engine: the parsed test
//! (`format.rs`), its options (`pool_options.rs`, so
//! `backgroundThreadIntervalMS` is the core's maintenance interval), the
//! endpoint that decides each handshake (`endpoint.rs`, applied by
//! [`SimManager`](crate::adapter::SimManager)), the JSON of events and errors (`observe.rs`) and the
//! assertions (`verify.rs`). What differs is only how the operations are
//! driven:
//!
//! - The pool is the driver's, built from a [`PoolSpec`]: the test's
//!   options exactly (the core's defaults, no reconnect backoff), paused
//!   (the test's `ready` readies it), no connect timeout (the endpoint
//!   alone decides how long a handshake takes), and an event callback
//!   given before it is built, so `ConnectionPoolCreated` is seen.
//! - `blockTimeMS` is a real sleep on the runtime inside `connect()`; when
//!   the pool aborts an establishment (a clear that interrupts, a close)
//!   it drops that future and the sleep with it.
//! - Each named thread is an OS thread running its operations in order; a
//!   checkout blocks in [`DriverPool::check_out`] (for a cmap-async
//!   adapter, `pool.get()` under `Adapter::block_on`). `wait`
//!   sleeps, `waitForEvent` waits on the events the callback records.
//! - The virtual engine's rule 1 holds: when the main thread hands an
//!   operation to a thread, it goes on only once that thread has *begun*
//!   it: a checkout queued in the pool (its future polled once) or served,
//!   a `wait` or `waitForEvent` waiting, any other operation done. If the
//!   thread is still blocked on an earlier operation, the new one waits in
//!   its queue and the main thread goes on, as there.
//! - A thread stops at its first error; `waitForThread` re-raises it.
//! - Every wait is bounded: [`HANDOFF_LIMIT`] for a thread to begin an
//!   operation, [`WAIT_LIMIT`] for a `waitForEvent` without a timeout of
//!   its own or a `waitForThread`. Reaching one fails the run with what
//!   every thread is doing.
//! - The run ends when the main thread has begun its last operation and is
//!   no longer blocked, or at its first error. The events seen by then are
//!   checked; if they do not match yet, the engine waits for more while
//!   they keep coming (at most [`SETTLE_QUIET`] between two,
//!   [`SETTLE_LIMIT`] in all), since events later than the end can only be
//!   appended (the checks are a prefix match), standing in for the virtual
//!   engine's "what is due at the last instant still happens".
//! - Then the pool is closed, which ends every thread still blocked, and
//!   the threads are joined.
//!
//! Real time is read here (and only in the real-time modules): the clippy
//! ban on `Instant::now` protects the virtual engine.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::Scope;
use std::time::{Duration, Instant};

use cmap_async::{Address, Event, PoolOptions};
use serde_json::Value;

use crate::driver::{Driver, DriverPool, PoolSpec};
use crate::endpoint::Endpoint;
use crate::format::{OpKind, Operation, TestFile};
use crate::observe::{event_json, RaisedError};
use crate::trace::{millis, Trace};
use crate::verify::{verify, Observed};

/// The pool's address, as in the virtual engine.
const ADDRESS: (&str, u16) = ("localhost", 27017);
/// How long a thread may take to begin an operation handed to it.
pub const HANDOFF_LIMIT: Duration = Duration::from_secs(5);
/// How long a `waitForEvent` without a timeout, or a `waitForThread`, may
/// wait (the unified format's limit for both).
pub const WAIT_LIMIT: Duration = Duration::from_secs(10);
/// After the end, the longest gap between two events while waiting for
/// the events to match.
pub const SETTLE_QUIET: Duration = Duration::from_millis(100);
/// After the end, the longest wait in all for the events to match.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(2);

/// The real clock.
#[allow(clippy::disallowed_methods)] // real time is this engine's point
pub(crate) fn now() -> Instant {
    Instant::now()
}

/// `now() + d`, saturating far in the future.
pub(crate) fn after(d: Duration) -> Instant {
    let start = now();
    start
        .checked_add(d)
        .unwrap_or(start + Duration::from_secs(86_400))
}

/// Runs `test` in real time on `driver`. Returns what it observed, or why
/// the run itself failed, plus the trace lines (empty unless `trace`),
/// whose times are real.
pub fn run<D: Driver>(
    driver: &D,
    test: &TestFile,
    options: PoolOptions,
    trace: bool,
) -> (Result<Observed, String>, Vec<String>) {
    let board = Arc::new(Board::new(trace));
    let endpoint = Arc::new(Mutex::new(Endpoint::new(test.fail_point.clone())));
    let events = board.clone();
    let built = driver.build(PoolSpec {
        address: Address::new(ADDRESS.0, ADDRESS.1),
        options,
        connect_timeout: None,
        endpoint,
        on_event: Arc::new(move |event| events.event(event)),
    });
    let pool = match built {
        Ok(pool) => pool,
        Err(e) => return (Err(e), Vec::new()),
    };
    let run = Run {
        pool,
        board: board.clone(),
        conns: Mutex::new(Conns {
            labels: BTreeMap::new(),
            kept: Vec::new(),
        }),
    };
    let result = std::thread::scope(|scope| {
        let result = run
            .main_thread(scope, test)
            .and_then(|main_error| run.settle(test, main_error));
        run.teardown();
        result
    });
    // Checked out until now; the pool is closed, so they close.
    let conns = std::mem::replace(
        &mut *lock(&run.conns),
        Conns {
            labels: BTreeMap::new(),
            kept: Vec::new(),
        },
    );
    drop(conns);
    let lines = std::mem::replace(&mut lock(&board.state).trace, Trace::new(board.origin, false));
    (result, lines.into_lines())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the threads and the event callback share.
struct Board {
    origin: Instant,
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    events: Vec<Value>,
    /// Events seen per type, for `waitForEvent` (which ignores `ignore`).
    seen: BTreeMap<&'static str, usize>,
    threads: BTreeMap<String, Worker>,
    /// Why the run failed, from any thread.
    failure: Option<String>,
    /// The run is over: waits end, threads stop.
    ending: bool,
    trace: Trace,
}

/// One named thread, as the others see it.
struct Worker {
    /// Its queue; dropped at the end, which ends the thread.
    sender: Option<Sender<Operation>>,
    /// Operations handed to it, begun, and done (`done <= begun <= handed`).
    handed: u64,
    begun: u64,
    done: u64,
    /// The operation it is on, for messages.
    current: Option<String>,
    /// Its first error.
    error: Option<RaisedError>,
}

/// How a bounded wait ended.
enum Waited<T> {
    Ready(T),
    TimedOut,
    /// The run is over, or failed.
    Ending,
}

impl Board {
    fn new(trace: bool) -> Board {
        let origin = now();
        Board {
            origin,
            state: Mutex::new(State {
                events: Vec::new(),
                seen: BTreeMap::new(),
                threads: BTreeMap::new(),
                failure: None,
                ending: false,
                trace: Trace::new(origin, trace),
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The pool's event callback.
    fn event(&self, event: &Event) {
        let json = event_json(event);
        let mut st = self.lock();
        *st.seen.entry(event.name()).or_default() += 1;
        st.trace.record(now(), "pool", || format!("event {json}"));
        st.events.push(json);
        drop(st);
        self.changed.notify_all();
    }

    fn note(&self, actor: &str, what: impl FnOnce() -> String) {
        self.lock().trace.record(now(), actor, what);
    }

    /// Waits until `ready` gives a value, `deadline` passes, or the run
    /// ends or fails.
    fn wait_for<T>(&self, deadline: Instant, mut ready: impl FnMut(&State) -> Option<T>) -> Waited<T> {
        let mut st = self.lock();
        loop {
            if let Some(value) = ready(&st) {
                return Waited::Ready(value);
            }
            if st.ending || st.failure.is_some() {
                return Waited::Ending;
            }
            let left = deadline.saturating_duration_since(now());
            if left.is_zero() {
                return Waited::TimedOut;
            }
            st = self
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl State {
    fn seen(&self, event: &str) -> usize {
        self.seen.get(event).copied().unwrap_or(0)
    }

    /// What every thread is doing, for messages about a stuck run.
    fn describe(&self) -> String {
        let threads: Vec<String> = self
            .threads
            .iter()
            .map(|(name, w)| {
                let doing = match (&w.current, &w.error) {
                    (Some(op), _) => format!("on `{op}`"),
                    (None, Some(e)) => format!("stopped by {}", e.kind),
                    (None, None) => "idle".to_owned(),
                };
                format!("{name} {doing} ({} of {} done)", w.done, w.handed)
            })
            .collect();
        let seen: Vec<String> = self.seen.iter().map(|(e, n)| format!("{e} x{n}")).collect();
        format!(
            "threads: [{}]; events seen: [{}]",
            threads.join("; "),
            seen.join(", ")
        )
    }
}

/// Checked-out connections by label, and those the test can no longer
/// check in (no label, or a label reused): kept checked out to the end, as
/// the virtual engine counts them in use for good (dropping a guard would
/// check it in).
struct Conns<C> {
    labels: BTreeMap<String, C>,
    kept: Vec<C>,
}

struct Run<P: DriverPool> {
    pool: P,
    board: Arc<Board>,
    conns: Mutex<Conns<P::Conn>>,
}

/// Marks the operation of a named thread begun, once.
struct Begun<'a> {
    board: &'a Board,
    thread: Option<&'a str>,
    marked: Cell<bool>,
}

impl Begun<'_> {
    fn mark(&self) {
        if self.marked.replace(true) {
            return;
        }
        let Some(name) = self.thread else { return };
        if let Some(w) = self.board.lock().threads.get_mut(name) {
            w.begun += 1;
        }
        self.board.changed.notify_all();
    }
}

impl<P: DriverPool> Run<P> {
    /// Runs the main thread's operations. Returns its error, if it raised
    /// one (it stops there), or why the run failed.
    fn main_thread<'scope>(
        &'scope self,
        scope: &'scope Scope<'scope, '_>,
        test: &TestFile,
    ) -> Result<Option<RaisedError>, String> {
        let main = Begun {
            board: &self.board,
            thread: None,
            marked: Cell::new(false),
        };
        for op in &test.operations {
            let raised = match &op.thread {
                Some(name) => {
                    self.hand(name, op)?;
                    None
                }
                None => {
                    self.board.note("main", || format!("op {op}"));
                    self.execute(scope, "main", op, &main)?
                }
            };
            if let Some(why) = self.board.lock().failure.clone() {
                return Err(why);
            }
            if let Some(error) = raised {
                self.board.note("main", || {
                    format!("main raises {}: {}", error.kind, error.message)
                });
                return Ok(Some(error));
            }
        }
        Ok(None)
    }

    /// Hands `op` to thread `name` and waits until it has begun it, or is
    /// still blocked on an earlier operation.
    fn hand(&self, name: &str, op: &Operation) -> Result<(), String> {
        let n = {
            let mut st = self.board.lock();
            let w = st
                .threads
                .get_mut(name)
                .ok_or_else(|| format!("thread {name} was not started"))?;
            let sender = w.sender.as_ref().ok_or("the run is over")?;
            sender
                .send(op.clone())
                .map_err(|_| format!("thread {name} has ended"))?;
            w.handed += 1;
            let n = w.handed;
            st.trace
                .record(now(), "main", || format!("hands `{op}` to {name}"));
            n
        };
        let waited = self.board.wait_for(after(HANDOFF_LIMIT), |st| {
            let w = &st.threads[name];
            (w.begun >= n || w.done < w.begun).then_some(())
        });
        match waited {
            Waited::Ready(()) => Ok(()),
            Waited::TimedOut => Err(format!(
                "{name} did not begin `{op}` within {}; {}",
                millis(HANDOFF_LIMIT),
                self.board.lock().describe()
            )),
            Waited::Ending => Err(self.failure()),
        }
    }

    fn failure(&self) -> String {
        self.board
            .lock()
            .failure
            .clone()
            .unwrap_or_else(|| "the run ended".into())
    }

    /// A named thread: runs what it is handed, in order, until its queue is
    /// dropped.
    fn worker<'scope>(&'scope self, scope: &'scope Scope<'scope, '_>, name: &str, ops: Receiver<Operation>) {
        for op in ops {
            let stopped = {
                let mut st = self.board.lock();
                let ending = st.ending;
                let w = st.threads.get_mut(name).expect("a started thread is listed");
                w.current = Some(op.to_string());
                let stopped = w.error.is_some() || ending;
                st.trace.record(now(), name, || match stopped {
                    true => format!("skips {op}"),
                    false => format!("op {op}"),
                });
                stopped
            };
            let begun = Begun {
                board: &self.board,
                thread: Some(name),
                marked: Cell::new(false),
            };
            let outcome = match stopped {
                true => Ok(None),
                false => self.execute(scope, name, &op, &begun),
            };
            begun.mark();
            let mut st = self.board.lock();
            match outcome {
                Ok(None) => {}
                Ok(Some(error)) => {
                    st.trace.record(now(), name, || {
                        format!("{name} raises {}: {}", error.kind, error.message)
                    });
                    let w = st.threads.get_mut(name).expect("listed");
                    w.error.get_or_insert(error);
                }
                Err(why) => {
                    st.failure.get_or_insert(format!("{name}: {why}"));
                }
            }
            let w = st.threads.get_mut(name).expect("listed");
            w.done += 1;
            w.current = None;
            drop(st);
            self.board.changed.notify_all();
        }
    }

    /// Runs one operation on thread `who`. `Ok(Some(_))` is an error the
    /// operation raised (the thread stops); `Err` fails the run.
    fn execute<'scope>(
        &'scope self,
        scope: &'scope Scope<'scope, '_>,
        who: &str,
        op: &Operation,
        begun: &Begun<'_>,
    ) -> Result<Option<RaisedError>, String> {
        let text = op.to_string();
        match &op.kind {
            OpKind::Start { target } => {
                let (sender, receiver) = mpsc::channel();
                {
                    let mut st = self.board.lock();
                    if st.threads.contains_key(target) {
                        return Err(format!("thread {target} is started twice"));
                    }
                    st.threads.insert(
                        target.clone(),
                        Worker {
                            sender: Some(sender),
                            handed: 0,
                            begun: 0,
                            done: 0,
                            current: None,
                            error: None,
                        },
                    );
                }
                let name = target.clone();
                std::thread::Builder::new()
                    .name(format!("test-{name}"))
                    .spawn_scoped(scope, move || self.worker(scope, &name, receiver))
                    .map_err(|e| format!("cannot start thread {target}: {e}"))?;
            }
            OpKind::Wait { ms } => {
                let until = after(Duration::from_millis(*ms));
                begun.mark();
                // Ends early only when the run ends.
                let _ = self.board.wait_for(until, |_| None::<()>);
            }
            OpKind::WaitForThread { target } => {
                begun.mark();
                if !self.board.lock().threads.contains_key(target) {
                    return Err(format!("thread {target} was not started"));
                }
                let waited = self.board.wait_for(after(WAIT_LIMIT), |st| {
                    let w = &st.threads[target];
                    (w.done == w.handed).then(|| w.error.clone())
                });
                match waited {
                    // Its first error is re-raised here.
                    Waited::Ready(error) => return Ok(error),
                    Waited::TimedOut => {
                        return Err(format!(
                            "`{text}`: still busy after {}; {}",
                            millis(WAIT_LIMIT),
                            self.board.lock().describe()
                        ))
                    }
                    Waited::Ending => {}
                }
            }
            OpKind::WaitForEvent {
                event,
                count,
                timeout_ms,
            } => {
                begun.mark();
                let limit = timeout_ms.map_or(WAIT_LIMIT, Duration::from_millis);
                let waited = self
                    .board
                    .wait_for(after(limit), |st| (st.seen(event) >= *count).then_some(()));
                match (waited, timeout_ms) {
                    (Waited::TimedOut, Some(_)) => {
                        let seen = self.board.lock().seen(event);
                        return Ok(Some(RaisedError::wait_for_event_timeout(event, seen, *count)));
                    }
                    (Waited::TimedOut, None) => {
                        return Err(format!(
                            "`{text}`: not satisfied after {} (it has no timeout of its own); {}",
                            millis(WAIT_LIMIT),
                            self.board.lock().describe()
                        ))
                    }
                    _ => {}
                }
            }
            OpKind::CheckOut { label } => match self.pool.check_out(&|| begun.mark()) {
                Ok((id, conn)) => {
                    self.board.note(who, || format!("{who} got connection {id}"));
                    let mut conns = lock(&self.conns);
                    match label {
                        Some(label) => {
                            if let Some(old) = conns.labels.insert(label.clone(), conn) {
                                conns.kept.push(old);
                            }
                        }
                        None => conns.kept.push(conn),
                    }
                }
                Err(e) => return Ok(Some(raised(&e))),
            },
            OpKind::CheckIn { connection } => {
                let conn = lock(&self.conns).labels.remove(connection).ok_or_else(|| {
                    format!("`{text}`: no checked-out connection is labelled {connection:?}")
                })?;
                // Dropping the guard checks it in; its events are delivered
                // before the drop returns.
                drop(conn);
            }
            OpKind::Clear { interrupt_in_use } => {
                self.pool
                    .clear(*interrupt_in_use)
                    .map_err(|e| format!("`{text}` refused: {e}"))?;
            }
            OpKind::Close => self.pool.close(),
            OpKind::Ready => {
                if let Err(e) = self.pool.ready() {
                    return Ok(Some(RaisedError::usage(&e)));
                }
            }
        }
        Ok(None)
    }

    /// The observation at the end: the events seen, waiting for more while
    /// they do not match yet and keep coming.
    fn settle(&self, test: &TestFile, main_error: Option<RaisedError>) -> Result<Observed, String> {
        let main_error = main_error.map(|e| e.to_json());
        let limit = after(SETTLE_LIMIT);
        let mut st = self.board.lock();
        loop {
            if let Some(why) = &st.failure {
                return Err(why.clone());
            }
            let observed = Observed {
                main_error: main_error.clone(),
                events: st.events.clone(),
            };
            if verify(test, &observed).is_ok() {
                return Ok(observed);
            }
            let count = st.events.len();
            let quiet_end = after(SETTLE_QUIET).min(limit);
            while st.events.len() == count {
                let left = quiet_end.saturating_duration_since(now());
                if left.is_zero() {
                    return Ok(observed);
                }
                st = self
                    .board
                    .changed
                    .wait_timeout(st, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
    }

    /// Ends the run: waits end, queues close, and the pool is closed, which
    /// fails the checkouts still queued.
    fn teardown(&self) {
        {
            let mut st = self.board.lock();
            st.ending = true;
            let seen = st.events.len();
            st.trace.record(now(), "main", || {
                format!("end: {seen} events seen; closing the pool")
            });
            for w in st.threads.values_mut() {
                w.sender = None;
            }
        }
        self.board.changed.notify_all();
        self.pool.close();
    }
}

/// A failed `get()` of the async pool: its checkout error as
/// [`RaisedError::from_check_out`] names it. (The runner's manager has no
/// `check` hook, so `CheckFailed` does not happen; it is named after the
/// variant if it ever did.)
pub fn raised(error: &cmap_async::GetError) -> RaisedError {
    match error.check_out_error() {
        Some(error) => RaisedError::from_check_out(error),
        None => RaisedError::runner("CheckFailed", error.to_string()),
    }
}
