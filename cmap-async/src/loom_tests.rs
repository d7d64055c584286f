//! Loom models of the three locks of the input cycle (`shared/mod.rs`'s module
//! doc): the events delivery turn and its queue, a waiter's slot, and the
//! pool's lock. They run this crate's own code, built with loom's
//! primitives in place of std's (`sync.rs`); loom runs every interleaving
//! of the modelled threads, and every value a load may read, and a model
//! fails if its assertions fail in one (or its threads deadlock, or a slot
//! is leaked). Each model also checks that its runs reached every outcome
//! it names (`explore`), so that one whose threads never overlap fails.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p cmap-async --release --lib loom
//! ```
//!
//! What is modelled, and its limits:
//!
//! - **The delivery turn** (`delivery_turn_*`): inputs take their events
//!   through an `events::Outbox` as the cycle does (pushed and sealed under
//!   the pool's lock, delivered after it), on the real `EventHub`. The
//!   pool's lock is a stand-in there (a loom mutex around the order the
//!   inputs sealed in), and the events come through `Outbox::push` (the
//!   drain's path; `Outbox::take`, a core's events in one swap, ends in the
//!   same sink). The three-thread model is bounded to four preemptions
//!   (every interleaving took over ten minutes); the two-thread one is not
//!   bounded.
//! - **A waiter's slot and the pool's lock** (`waiter_*`): the real
//!   `Pool`, on a test runtime whose spawned tasks run on the model's main
//!   thread between the concurrent steps (the establishment before them,
//!   closing after them; the timer task's clock stands still, and it does
//!   not run while they do). A guard given back (a check-in handing its
//!   connection to the queued checkout) races that checkout's poll, or its
//!   drop, or both, with an event callback that calls into the pool.
//!   Unbounded.
//! - **A blocking waiter** (`blocking_waiter_*`): cmap-blocking's `get()`
//!   on the layer it is built on (`Inner::queue`, `take_outcome`, a waker
//!   that unparks the thread, `thread::park`) against a check-in handing
//!   its connection over. Unbounded.
//! - Not loom's: the locks held only around their own data with nothing
//!   taken under them (the interrupted ids, the leak book), which add no
//!   interleaving; and the delivery loop's thread mark, a number per
//!   modelled thread rather than an address (see `events::this_thread`).
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard as StdMutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use cmap_core::{Address, ConnectionId, EstablishErrorKind, Event, Status};
use loom::thread;

use crate::events::{subscriber, EventHub, Outbox};
use crate::{GetError, ManageConnection, Pool, PooledConnection, Runtime};

fn lock<T>(m: &StdMutex<T>) -> StdMutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Explores every interleaving of `model`, or those with at most
/// `preemptions` preemptions (`None`: no bound), and checks that the runs
/// reached each of the `outcomes` the model names (through [`Reached`]): a
/// model whose threads never overlapped would pass without proving much.
fn explore(
    preemptions: Option<usize>,
    outcomes: &[&'static str],
    model: impl Fn(&Reached) + Send + Sync + 'static,
) {
    let reached = Reached::default();
    let runs = Arc::new(StdAtomicUsize::new(0));
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = preemptions;
    builder.max_branches = 100_000;
    {
        let reached = reached.clone();
        let runs = runs.clone();
        builder.check(move || {
            runs.fetch_add(1, Ordering::Relaxed);
            model(&reached);
        });
    }
    let reached = lock(&reached.0);
    println!("{} runs, outcomes {reached:?}", runs.load(Ordering::Relaxed));
    for outcome in outcomes {
        assert!(
            reached.contains(outcome),
            "no run reached {outcome:?}: {reached:?}"
        );
    }
}

/// The outcomes the runs of one model reached.
#[derive(Clone, Default)]
struct Reached(Arc<StdMutex<std::collections::BTreeSet<&'static str>>>);

impl Reached {
    fn saw(&self, outcome: &'static str) {
        lock(&self.0).insert(outcome);
    }
}

// ---------------------------------------------------------------------
// The delivery turn.

/// Event `n` of input `input`, told apart by its connection id.
fn event(input: u64, n: u64) -> Event {
    Event::ConnectionCheckedIn {
        address: Address::new("h", 1),
        connection_id: ConnectionId(input * 10 + n),
        held: Duration::ZERO,
    }
}

/// Inputs of one pool, reduced to their events.
struct Inputs {
    hub: Arc<EventHub>,
    /// The pool's lock, stood in for: the inputs in the order they sealed
    /// their events, and how many each had.
    pool: loom::sync::Mutex<Vec<(u64, u64)>>,
    /// What the one subscriber was given, by connection id.
    delivered: Arc<StdMutex<Vec<u64>>>,
}

impl Inputs {
    fn new() -> Arc<Inputs> {
        let hub = Arc::new(EventHub::default());
        let delivered = Arc::new(StdMutex::new(Vec::new()));
        let log = delivered.clone();
        let _ = hub.on_batch(subscriber(move |e: &Event| {
            lock(&log).push(e.connection_id().expect("a connection's event").0)
        }));
        Arc::new(Inputs {
            hub,
            pool: loom::sync::Mutex::new(Vec::new()),
            delivered,
        })
    }

    /// One input with `events` events, as the cycle takes them: pushed and
    /// sealed under the pool's lock, delivered once it is released.
    /// Returns whether it found the turn taken (its events queued).
    fn input(&self, input: u64, events: u64) -> bool {
        let mut outbox = Outbox::default();
        let queued = {
            let mut sealed = self.pool.lock().unwrap();
            for n in 0..events {
                outbox.push(&self.hub, event(input, n));
            }
            outbox.seal();
            sealed.push((input, events));
            matches!(outbox, Outbox::Queued(_))
        };
        outbox.deliver();
        queued
    }

    /// An input, which checks that its events are out once it returns.
    fn input_checked(&self, input: u64, events: u64, reached: &Reached) {
        let queued = self.input(input, events);
        reached.saw(if queued { "turn taken: queued" } else { "turn held" });
        let delivered = lock(&self.delivered);
        for n in 0..events {
            assert!(
                delivered.contains(&(input * 10 + n)),
                "input {input} returned before its event {n} was delivered: {delivered:?}"
            );
        }
    }

    /// Once every input is done: each event delivered once, each input's in
    /// order, and the inputs' in the order they sealed them.
    fn check_order(&self) {
        let sealed = self.pool.lock().unwrap();
        let expected: Vec<u64> = sealed
            .iter()
            .flat_map(|&(input, events)| (0..events).map(move |n| input * 10 + n))
            .collect();
        assert_eq!(*lock(&self.delivered), expected, "inputs sealed as {sealed:?}");
        assert_eq!(self.hub.panics.count(), 0);
    }
}

/// Three inputs on three threads: whichever holds the turn delivers the
/// events of those that found it taken, in the order they were sealed, and
/// none returns before its own events are out.
#[test]
fn delivery_turn_three_inputs() {
    explore(Some(4), &["turn held", "turn taken: queued"], |reached| {
        let inputs = Inputs::new();
        let others: Vec<_> = [1, 2]
            .into_iter()
            .map(|input| {
                let inputs = inputs.clone();
                let reached = reached.clone();
                thread::spawn(move || inputs.input_checked(input, 2, &reached))
            })
            .collect();
        inputs.input_checked(3, 1, reached);
        for other in others {
            other.join().unwrap();
        }
        inputs.check_order();
    });
}

/// Two inputs, and a callback that makes an input of its own (as a
/// callback calling into the pool does) on whichever thread delivers the
/// first input's first event: that nested input's events go out after the
/// one being delivered, from the loop already running on that thread
/// (its own `deliver` returns at once), and in the order of the pool's
/// lock with the other inputs'.
#[test]
fn delivery_turn_callback_input() {
    const OUTCOMES: [&str; 2] = ["nested on the first input's thread", "nested on the other thread"];
    explore(None, &OUTCOMES, |reached| {
        let inputs = Inputs::new();
        let weak: Weak<Inputs> = Arc::downgrade(&inputs);
        let first_thread = Arc::new(StdMutex::new(None));
        let on_first = first_thread.clone();
        let nested = reached.clone();
        let _ = inputs.hub.on_batch(subscriber(move |e: &Event| {
            if e.connection_id() == Some(ConnectionId(10)) {
                if let Some(inputs) = weak.upgrade() {
                    assert!(inputs.input(9, 1), "the turn is this thread's");
                    let own = *lock(&on_first) == Some(thread::current().id());
                    nested.saw(OUTCOMES[usize::from(!own)]);
                }
            }
        }));
        let other = {
            let inputs = inputs.clone();
            let reached = reached.clone();
            thread::spawn(move || {
                *lock(&first_thread) = Some(thread::current().id());
                inputs.input_checked(1, 2, &reached)
            })
        };
        inputs.input_checked(2, 1, reached);
        other.join().unwrap();
        inputs.check_order();
    });
}

// ---------------------------------------------------------------------
// A waiter's slot and the pool's lock, on the real pool.

/// A connection of the test manager; counts its drops.
struct Conn(Arc<StdAtomicUsize>);

impl Drop for Conn {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Connects at once; no check, no reset.
struct Manager {
    dropped: Arc<StdAtomicUsize>,
}

impl ManageConnection for Manager {
    type Connection = Conn;
    type Error = std::io::Error;
    const CHECKS: bool = false;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Conn, std::io::Error>> + Send {
        std::future::ready(Ok(Conn(self.dropped.clone())))
    }

    fn classify(&self, error: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(error)
    }
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A runtime whose tasks run when the model says ([`TestRuntime::run`]),
/// on the thread that says it, and whose clock stands still.
#[derive(Clone)]
struct TestRuntime(Arc<Tasks>);

struct Tasks {
    now: Instant,
    spawned: StdMutex<Vec<Task>>,
}

impl Runtime for TestRuntime {
    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        lock(&self.0.spawned).push(Box::pin(future));
    }

    fn sleep_until(&self, _deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        std::future::pending()
    }

    fn now(&self) -> Instant {
        self.0.now
    }
}

impl TestRuntime {
    fn new() -> TestRuntime {
        TestRuntime(Arc::new(Tasks {
            now: Instant::now(),
            spawned: StdMutex::new(Vec::new()),
        }))
    }

    /// Polls the spawned tasks until none ends and none is spawned; the
    /// list is not locked while one is polled (a task may spawn).
    fn run(&self) {
        loop {
            let tasks = std::mem::take(&mut *lock(&self.0.spawned));
            let polled = tasks.len();
            let mut pending = Vec::new();
            for mut task in tasks {
                if task
                    .as_mut()
                    .poll(&mut Context::from_waker(Waker::noop()))
                    .is_pending()
                {
                    pending.push(task);
                }
            }
            let mut spawned = lock(&self.0.spawned);
            let progress = pending.len() < polled || !spawned.is_empty();
            spawned.splice(0..0, pending);
            if !progress {
                return;
            }
        }
    }

    /// Drops the tasks left (the timer task, asleep for good).
    fn clear(&self) {
        loop {
            let tasks = std::mem::take(&mut *lock(&self.0.spawned));
            if tasks.is_empty() {
                return;
            }
            drop(tasks);
        }
    }
}

type Checkout = Pin<Box<dyn Future<Output = Result<PooledConnection<'static, Manager>, GetError>> + Send>>;

fn poll_once(
    checkout: &mut Checkout,
    waker: &Waker,
) -> Poll<Result<PooledConnection<'static, Manager>, GetError>> {
    checkout.as_mut().poll(&mut Context::from_waker(waker))
}

/// Counts its wakes.
#[derive(Default)]
struct Wakes(StdAtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A pool of at most one connection, checked out (`held`), and a second
/// checkout queued for it (`queued`, polled once).
struct Waiter {
    rt: TestRuntime,
    pool: Pool<Manager, TestRuntime>,
    held: Option<PooledConnection<'static, Manager>>,
    queued: Option<Checkout>,
    /// Every event delivered, in order.
    events: Arc<StdMutex<Vec<Event>>>,
    /// The pool the event callback calls into (a handle of its own, taken
    /// back before the pool is closed).
    caller: Arc<StdMutex<Option<Pool<Manager, TestRuntime>>>>,
    dropped: Arc<StdAtomicUsize>,
}

impl Waiter {
    fn new() -> Waiter {
        let rt = TestRuntime::new();
        let dropped = Arc::new(StdAtomicUsize::new(0));
        let manager = Manager {
            dropped: dropped.clone(),
        };
        let pool = Pool::builder()
            .address("h:1")
            .max_pool_size(1)
            .build_on(manager, rt.clone())
            .unwrap();
        let events = Arc::new(StdMutex::new(Vec::new()));
        let log = events.clone();
        let caller = Arc::new(StdMutex::new(Some(pool.clone())));
        let calls = caller.clone();
        let _ = pool.on_event(move |e| {
            lock(&log).push(e.clone());
            // A callback that calls into the pool, as callbacks may: it
            // takes the pool's lock while its thread holds the turn.
            let pool = lock(&calls).clone();
            if let Some(pool) = pool {
                let _ = pool.status();
            }
        });
        let mut first: Checkout = Box::pin(pool.get_owned());
        assert!(
            poll_once(&mut first, Waker::noop()).is_pending(),
            "waits for its connection"
        );
        rt.run();
        let Poll::Ready(Ok(held)) = poll_once(&mut first, Waker::noop()) else {
            panic!("the connection made for the first checkout");
        };
        let mut queued: Checkout = Box::pin(pool.get_owned());
        assert!(
            poll_once(&mut queued, Waker::noop()).is_pending(),
            "queued behind it"
        );
        Waiter {
            rt,
            pool,
            held: Some(held),
            queued: Some(queued),
            events,
            caller,
            dropped,
        }
    }

    /// Gives the held connection back, on a thread of its own.
    fn check_in_elsewhere(&mut self) -> thread::JoinHandle<()> {
        let held = self.held.take().expect("held until given back");
        thread::spawn(move || drop(held))
    }

    /// Polls the queued checkout once.
    fn poll(&mut self, waker: &Waker) -> Poll<Result<PooledConnection<'static, Manager>, GetError>> {
        poll_once(self.queued.as_mut().expect("not dropped"), waker)
    }

    /// How many `ConnectionCheckedOut` were delivered.
    fn checked_out(&self) -> usize {
        let events = lock(&self.events);
        events
            .iter()
            .filter(|e| matches!(e, Event::ConnectionCheckedOut { .. }))
            .count()
    }

    /// Once the threads are joined: the one connection is where `served`
    /// says (checked out by the queued checkout, or back in the pool), no
    /// checkout waits; then the pool is closed, and the connection dropped
    /// exactly once.
    fn finish(mut self, served: Option<PooledConnection<'static, Manager>>) {
        let caller = lock(&self.caller).take();
        drop(caller);
        let in_use = usize::from(served.is_some());
        let status = self.pool.status();
        let expected = Status {
            total: 1,
            available: 1 - in_use,
            in_use,
            pending: 0,
            waiting: 0,
            ..status
        };
        assert_eq!(status, expected, "the connection is lost or doubled");
        drop(served);
        drop(self.queued.take());
        assert_eq!(self.pool.status().available, 1, "checked in");
        assert_eq!(self.dropped.load(Ordering::Relaxed), 0);
        self.pool.close();
        self.rt.run();
        drop(self.pool);
        self.rt.clear();
        assert_eq!(self.dropped.load(Ordering::Relaxed), 1, "closed once");
    }
}

/// A check-in hands the connection to the queued checkout (its slot filled,
/// its waker woken) while that checkout polls: the poll returns it, after
/// its `ConnectionCheckedOut` was delivered, or returns `Pending` and is
/// woken, and the next poll returns it.
#[test]
fn waiter_served_while_it_polls() {
    explore(None, &["served at once", "woken"], |reached| {
        let mut waiter = Waiter::new();
        let check_in = waiter.check_in_elsewhere();
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let first = waiter.poll(&waker);
        // Read before the join: what was delivered when the poll returned.
        let checked_out = waiter.checked_out();
        check_in.join().unwrap();
        let served = match first {
            Poll::Ready(served) => {
                assert_eq!(checked_out, 2, "served before its event was delivered");
                reached.saw("served at once");
                served
            }
            Poll::Pending => {
                reached.saw("woken");
                assert!(wakes.0.load(Ordering::SeqCst) > 0, "a waiting poll was not woken");
                match waiter.poll(&waker) {
                    Poll::Ready(served) => served,
                    Poll::Pending => panic!("woken, and not served"),
                }
            }
        };
        waiter.finish(Some(served.expect("served")));
    });
}

/// A check-in hands the connection to the queued checkout while that
/// checkout is dropped (cancelled): whichever way they interleave (the
/// waiter withdrawn first, the slot filled first, or the slot taken out
/// of the waiters under the pool's lock and filled after the drop), the
/// connection ends back in the pool, once.
#[test]
fn waiter_cancelled_while_served() {
    const OUTCOMES: [&str; 2] = [
        "withdrawn before the hand-over",
        "handed over, then checked back in",
    ];
    explore(None, &OUTCOMES, |reached| {
        let mut waiter = Waiter::new();
        let check_in = waiter.check_in_elsewhere();
        drop(waiter.queued.take());
        check_in.join().unwrap();
        reached.saw(OUTCOMES[waiter.checked_out() - 1]);
        waiter.finish(None);
    });
}

/// The queued checkout polls once, then is dropped unless that poll served
/// it, while a check-in hands it the connection: it ends either with the
/// checkout or back in the pool, never lost nor doubled.
#[test]
fn waiter_polled_then_cancelled_while_served() {
    explore(None, &["served", "cancelled"], |reached| {
        let mut waiter = Waiter::new();
        let check_in = waiter.check_in_elsewhere();
        let served = match waiter.poll(Waker::noop()) {
            Poll::Ready(served) => {
                reached.saw("served");
                Some(served.expect("served"))
            }
            Poll::Pending => {
                reached.saw("cancelled");
                drop(waiter.queued.take());
                None
            }
        };
        check_in.join().unwrap();
        waiter.finish(served);
    });
}

// ---------------------------------------------------------------------
// A blocking waiter (cmap-blocking's `get()`), on the layer itself.

/// Wakes a parked modelled thread, as cmap-blocking's thread waker does.
struct Unpark(thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// cmap-blocking's wait and wake on the driver layer: a checkout queued
/// under the pool's lock (`Inner::queue`, its slot holding a waker that
/// unparks its thread), then parked until `take_outcome` finds the slot
/// filled, races a check-in that hands the connection over
/// (`Inner::check_in`, the slot filled after the lock). Whichever comes
/// first (the connection back before the checkout, which is served at
/// once; or after it, filling its slot before or after the thread parks),
/// the checkout gets the connection and no run deadlocks: a wake-up
/// between its look at the slot and its park is not lost.
#[test]
fn blocking_waiter_parks_until_its_slot_is_filled() {
    use crate::driver::{take_outcome, Inner};
    use crate::interrupt::Interrupts;
    use crate::sync::Mutex;
    use cmap_core::{Action, CheckOut, Output, PoolOptions, Wait};

    explore(None, &["served at once", "parked, then served"], |reached| {
        let now = Instant::now();
        let options = (PoolOptions::builder().max_pool_size(1))
            .maintenance_interval(None)
            .build()
            .unwrap();
        let mut core = cmap_core::Pool::new(now, Address::new("db", 27017), options);
        let _ = core.handle_ready(now);
        // The one connection, made and checked out by an earlier input.
        let CheckOut::Later(_) = core.handle_check_out_direct(now, Wait::Until(None)) else {
            panic!("an empty pool queues")
        };
        while core.poll_output().is_some() {}
        core.handle_established(now, ConnectionId(1), (), None).unwrap();
        let held = loop {
            match core.poll_output() {
                Some(Output::Action(Action::Deliver { connection, .. })) => break connection,
                Some(_) => {}
                None => panic!("the connection was not delivered"),
            }
        };
        let inner = Arc::new(Mutex::new(Inner::new(core)));
        let interrupts = Arc::new(Interrupts::default());
        let check_in = {
            let (inner, interrupts) = (inner.clone(), interrupts.clone());
            thread::spawn(move || {
                let handed = inner.lock().check_in(now, held, &interrupts);
                if let Some((slot, connection)) = handed {
                    assert!(
                        crate::slot::fill(&slot, Ok(connection)).is_none(),
                        "nobody waited"
                    );
                }
            })
        };
        let waker = Waker::from(Arc::new(Unpark(thread::current())));
        let queued = {
            let mut inner = inner.lock();
            match inner.core.handle_check_out_direct(now, Wait::Until(None)) {
                CheckOut::Ready(connection) => Err(connection),
                CheckOut::Later(id) => Ok(inner.queue(id, &waker)),
            }
        };
        let served = match queued {
            Err(connection) => {
                reached.saw("served at once");
                connection
            }
            Ok(slot) => loop {
                if let Some(outcome) = take_outcome(&slot) {
                    reached.saw("parked, then served");
                    break outcome.expect("served");
                }
                thread::park();
            },
        };
        assert_eq!(served.id(), ConnectionId(1));
        check_in.join().unwrap();
    });
}
