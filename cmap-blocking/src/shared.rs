//! The pool's shared state and its one input cycle, on the driver layer
//! ([`cmap_async::driver`]): lock the `Mutex<Inner>`, make one call on the
//! core, drain it into a [`Deferred`], unlock, and let
//! [`Deferred::perform`] carry the work out in the layer's order (connects
//! on threads of their own, closes on a thread, events, then the waiters'
//! slots). A waiting `get()` parks its thread in a slot whose waker
//! unparks it; the core's timer fails it at its deadline.
//!
//! Threads: one timer thread per pool (`run_timer`), parked until the
//! core's next deadline under [`driver::timer`]'s policy and unparked when
//! an input moves that deadline earlier; a thread per connect, and one
//! more watching its connect timeout and abort switch; a thread per batch
//! of closes; a leak watcher when leak detection is on. Each holds the pool
//! weakly; none holds a lock while it waits.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use cmap_async::cmap_core::{CheckOut, Pooled, Wait};
use cmap_async::driver::{
    self, Abort, Deferred, EventHub, Handed, Inner, Interrupts, Leaks, OwnCheckout, Parts, Perform,
    SharedSlot,
};
use cmap_async::{
    system_coarse_now, Address, CheckOutError, CoarseNow, ConnectionId, EstablishError, Hook, PoolState,
    Status,
};

use crate::fork;
use crate::manager::ManageConnection;

/// One pool's shared state: `Pool` handles and owned guards hold it
/// strongly, its threads weakly.
pub(crate) struct Shared<M: ManageConnection> {
    me: Weak<Self>,
    pub(crate) manager: Arc<M>,
    pub(crate) address: Address,
    pub(crate) wait_queue_timeout: Option<Duration>,
    pub(crate) connect_timeout: Option<Duration>,
    inner: Mutex<Inner<M::Connection>>,
    /// Notified, on `inner`, after an establishment and after a check-in
    /// to a closed pool: `wait_ready` and `close_gracefully` wait on it.
    changed: Condvar,
    pub(crate) events: Arc<EventHub>,
    pub(crate) interrupts: Interrupts,
    /// The timer thread, unparked when its deadline moves earlier.
    timer: Mutex<Option<Thread>>,
    /// Which timer and leak watcher are the pool's: a reset after fork
    /// starts new ones.
    epoch: AtomicU64,
    /// Live `Pool` handles; the last one dropped closes the pool.
    pub(crate) handles: AtomicUsize,
    /// The fork generation the pool last ran in (`fork.rs`).
    forks: AtomicU64,
    /// Held while resetting after a fork: one thread of the child resets.
    forking: Mutex<()>,
    pub(crate) leaks: Option<Arc<Leaks>>,
    #[cfg(feature = "recorder")]
    pub(crate) flight: Option<Box<driver::Flight>>,
    #[cfg(feature = "metrics")]
    metrics: Option<driver::Metrics>,
}

/// The pool's lock, held.
type Locked<'a, C> = MutexGuard<'a, Inner<C>>;

/// Wakes a thread parked in `get()`, `Events::next` or the timer.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    static WAKER: Waker = Waker::from(Arc::new(Unpark(thread::current())));
}

/// A waker that unparks the calling thread (made once per thread).
pub(crate) fn thread_waker() -> Waker {
    WAKER.with(Waker::clone)
}

impl<M: ManageConnection> Shared<M> {
    pub(crate) fn new(
        manager: M,
        connect_timeout: Option<Duration>,
        parts: Parts<M::Connection>,
    ) -> Arc<Self> {
        #[cfg_attr(not(feature = "metrics"), allow(unused_mut))]
        let mut core = parts.core;
        #[cfg(feature = "metrics")]
        core.set_measures_enabled(parts.metrics.is_some());
        Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            manager: Arc::new(manager),
            wait_queue_timeout: parts.options.wait_queue_timeout(),
            address: parts.address,
            connect_timeout,
            inner: Mutex::new(Inner::new(core)),
            changed: Condvar::new(),
            events: parts.events,
            interrupts: Interrupts::default(),
            timer: Mutex::new(None),
            epoch: AtomicU64::new(0),
            handles: AtomicUsize::new(1),
            forks: AtomicU64::new(fork::generation()),
            forking: Mutex::new(()),
            leaks: parts.leaks.map(Arc::from),
            #[cfg(feature = "recorder")]
            flight: parts.flight,
            #[cfg(feature = "metrics")]
            metrics: parts.metrics,
        })
    }

    /// The pool's lock, to look at the core.
    #[inline(always)]
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner<M::Connection>> {
        self.inner.lock()
    }

    /// Opens an input ([`Inner::open`]): `read` is the clock read before
    /// the lock, the cheap one for a checkout or a check-in.
    #[inline(always)]
    fn begin(&self, read: CoarseNow, checkout: bool) -> (Locked<'_, M::Connection>, CoarseNow) {
        let mut inner = self.lock();
        let read = inner.open(self.events.wanted(), read, checkout, Instant::now);
        (inner, read)
    }

    /// Whether the input just made on `inner` can end by releasing the
    /// lock: it left no action, no event and no measure (the common served
    /// checkout, and check-in nobody waits for).
    #[inline(always)]
    fn quiet(&self, inner: &Inner<M::Connection>) -> bool {
        #[cfg(feature = "metrics")]
        if self.metrics.is_some() {
            return false;
        }
        inner.left_no_action() && inner.core.pending_events() == 0
    }

    /// Ends an input in full, the one way every input but the quiet ones
    /// ends: a connection `handed` to a waiter filled first, at most
    /// `limit` outputs drained (the input's own checkout, `own`, served or
    /// queued with a slot that wakes this thread), the timer re-armed if
    /// `rearm` and the deadline moved earlier, `last` called under the lock
    /// (told whether outputs are left), the lock released, the work
    /// performed in the layer's order.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn end<T>(
        &self,
        mut inner: Locked<'_, M::Connection>,
        now: Instant,
        handed: Option<Handed<M::Connection>>,
        own: &mut OwnCheckout<M::Connection>,
        rearm: bool,
        limit: usize,
        last: impl FnOnce(&mut Inner<M::Connection>, bool) -> T,
    ) -> (Option<SharedSlot<M::Connection>>, T) {
        let mut deferred = Deferred::default();
        if let Some((slot, connection)) = handed {
            deferred.fill((slot, Ok(connection)));
        }
        let more = inner.drain(now, &self.events, &self.interrupts, &mut deferred, own, limit);
        if rearm {
            deferred.set_rearm(inner.rearm());
        }
        #[cfg(feature = "metrics")]
        if let Some(metrics) = &self.metrics {
            deferred.set_measured(metrics.take(&mut inner.core));
        }
        let slot = match (own.id, &own.outcome) {
            (Some(id), None) => Some(inner.queue(id, &thread_waker())),
            _ => None,
        };
        let out = last(&mut inner, more);
        drop(inner);
        deferred.perform(self);
        (slot, out)
    }

    /// One input: `f` makes one call on the core.
    pub(crate) fn input<T>(&self, f: impl FnOnce(&mut Inner<M::Connection>, Instant) -> T) -> T {
        let (mut inner, read) = self.begin(CoarseNow::exact(Instant::now()), false);
        let out = f(&mut inner, read.at);
        self.end(
            inner,
            read.at,
            None,
            &mut OwnCheckout::default(),
            true,
            usize::MAX,
            |_, _| (),
        );
        out
    }

    /// A checkout, waiting as `wait` says (made a deadline from the input's
    /// `now` when the manager checks, for a retry): served or failed in its
    /// input, or parked in its slot until a later input fills it (the
    /// core's timer fails it at its deadline). `entered` is called once it
    /// is in the pool, served or queued, before the thread parks.
    #[inline(always)]
    fn check_out(
        &self,
        wait: &mut Wait,
        entered: &mut Option<&dyn Fn()>,
    ) -> Result<Pooled<M::Connection>, CheckOutError> {
        let (mut inner, read) = self.begin(system_coarse_now(), true);
        let asked = match *wait {
            Wait::For(timeout) => Wait::For(timeout.saturating_add(read.lag)),
            until => until,
        };
        if M::CHECKS {
            *wait = Wait::Until(read.deadline(*wait));
        }
        let mut own = match inner.core.handle_check_out_direct(read.at, asked) {
            CheckOut::Ready(connection) if entered.is_none() && self.quiet(&inner) => return Ok(connection),
            CheckOut::Ready(connection) => OwnCheckout {
                id: None,
                outcome: Some(Ok(connection)),
            },
            CheckOut::Later(id) => OwnCheckout {
                id: Some(id),
                outcome: None,
            },
        };
        // Only a queued checkout, or one that started something, can move
        // the timer's deadline earlier.
        let rearm = own.outcome.is_none() || !inner.left_no_action();
        let (slot, ()) = self.end(inner, read.at, None, &mut own, rearm, usize::MAX, |_, _| ());
        entered.take().inspect(|entered| entered());
        if let Some(outcome) = own.outcome {
            return outcome;
        }
        let slot = slot.expect("a checkout not served at once has a slot");
        loop {
            if let Some(outcome) = driver::take_outcome(&slot) {
                return outcome;
            }
            thread::park();
        }
    }

    /// An available connection, without the manager's check, or none (a
    /// zero timeout: it starts no connection).
    pub(crate) fn check_out_now(&self) -> Result<Pooled<M::Connection>, CheckOutError> {
        self.check_out(&mut Wait::For(Duration::ZERO), &mut None)
    }

    /// Gives back a checked-out connection.
    #[inline]
    pub(crate) fn check_in(&self, connection: Pooled<M::Connection>) {
        let (mut inner, read) = self.begin(system_coarse_now(), false);
        let closed = inner.core.state() == PoolState::Closed;
        let handed = inner.check_in(read.at, connection, &self.interrupts);
        if handed.is_none() && !closed && self.quiet(&inner) {
            return;
        }
        let none = &mut OwnCheckout::default();
        self.end(inner, read.at, handed, none, false, usize::MAX, |_, _| ());
        if closed {
            self.changed.notify_all();
        }
    }

    /// A checkout followed by the manager's check, within `timeout` in
    /// all; a connection that fails its check is closed and another tried,
    /// unless it was made for this checkout.
    pub(crate) fn get(
        &self,
        timeout: Option<Duration>,
        mut entered: Option<&dyn Fn()>,
    ) -> Result<Pooled<M::Connection>, cmap_async::GetError> {
        self.after_fork();
        let mut wait = Wait::at_most(timeout);
        if !M::CHECKS {
            return Ok(self.check_out(&mut wait, &mut entered)?);
        }
        let issued_before = self.lock().last_issued();
        loop {
            let mut pooled = self.check_out(&mut wait, &mut entered).map_err(|mut error| {
                if let (CheckOutError::WaitQueueTimeout { context, .. }, Some(timeout)) =
                    (&mut error, timeout)
                {
                    context.waited = timeout;
                }
                error
            })?;
            let remaining = wait
                .deadline(Instant::now())
                .map(|d| d.saturating_duration_since(Instant::now()));
            let checked = (self.events.panics())
                .call(Hook::Check, || self.manager.check_within(&mut pooled, remaining));
            let failed: cmap_async::SharedError = match checked {
                Ok(Ok(())) => return Ok(pooled),
                Ok(Err(error)) => Arc::new(error),
                Err(panicked) => Arc::new(panicked),
            };
            let fresh = Some(pooled.id()) > issued_before;
            pooled.mark_errored();
            self.check_in(pooled);
            if fresh {
                return Err(cmap_async::GetError::CheckFailed(failed));
            }
        }
    }

    /// What a dropped guard's connection goes through before its check-in:
    /// `is_broken` and `reset` on this thread, each under a panic guard.
    pub(crate) fn give_back(&self, mut conn: Pooled<M::Connection>, marked_broken: bool) {
        if !self.interrupts.contains(conn.id()) {
            let panics = self.events.panics();
            let broken = marked_broken
                || thread::panicking()
                || panics
                    .call(Hook::IsBroken, || self.manager.is_broken(&mut conn))
                    .unwrap_or(true);
            if broken
                || (M::RESETS
                    && !matches!(
                        panics.call(Hook::Reset, || self.manager.reset(&mut conn)),
                        Ok(Ok(()))
                    ))
            {
                conn.mark_errored();
            }
        }
        self.check_in(conn);
    }

    /// Takes a checked-out connection out of the pool for good.
    pub(crate) fn detach(&self, connection: Pooled<M::Connection>) -> M::Connection {
        self.interrupts.forget(connection.id());
        let (conn, closed) = self.input(|inner, now| match inner.core.handle_detach(now, connection) {
            Ok(conn) => (conn, inner.core.state() == PoolState::Closed),
            Err(_) => unreachable!("a guard's connection comes from its own pool"),
        });
        if closed {
            self.changed.notify_all();
        }
        conn
    }

    /// Reports establishing `id` to the core.
    fn finish_establish(&self, id: ConnectionId, result: Result<M::Connection, EstablishError>) {
        let panics = &**self.events.panics();
        let result = driver::with_service(result, panics, |conn| self.manager.service_id(conn));
        self.input(|inner, now| inner.finish_establish(now, id, result));
        self.changed.notify_all();
    }

    /// Closes the pool (the last handle is gone, or `close()`).
    pub(crate) fn close(&self) {
        self.input(|inner, now| inner.core.handle_close(now));
        // The timer thread ends once it sees the pool closed.
        self.wake_timer();
        if let Some(leaks) = &self.leaks {
            leaks.close();
        }
    }

    /// Waits until the pool's counts satisfy `done`, or `deadline`.
    pub(crate) fn wait_for(&self, deadline: Option<Instant>, done: impl Fn(&Status) -> bool) -> bool {
        let mut inner = self.lock();
        loop {
            if done(&inner.core.status()) {
                return true;
            }
            match deadline {
                None => self.changed.wait(&mut inner),
                Some(deadline) if self.changed.wait_until(&mut inner, deadline).timed_out() => {
                    return done(&inner.core.status());
                }
                Some(_) => {}
            }
        }
    }

    /// Starts the timer thread (and the leak watcher) of the current epoch.
    /// Refused a thread, deadlines are met only when inputs come (a parked
    /// `get()` is still woken by the input that fills its slot).
    pub(crate) fn start_threads(&self) {
        let epoch = self.epoch.load(Ordering::Acquire);
        let me = self.me.clone();
        let _ = thread::Builder::new()
            .name("cmap-timer".into())
            .spawn(move || run_timer(me, epoch));
        if self.leaks.is_some() {
            let me = self.me.clone();
            let _ = (thread::Builder::new().name("cmap-leaks".into())).spawn(move || watch_leaks(me, epoch));
        }
    }

    /// Resets the pool if this process is a fork of the one it last ran
    /// in: one atomic load when it is not.
    #[inline]
    pub(crate) fn after_fork(&self) {
        let now = fork::generation();
        if self.forks.load(Ordering::Acquire) != now {
            self.reset_after_fork(now);
        }
    }

    /// The spec's fork rule ("Forking"): the pool clears itself and
    /// forgets the parent's connections ([`Inner::reset_after_fork`]);
    /// only the forking thread lives on in the child, so the pool's
    /// threads start again.
    #[cold]
    fn reset_after_fork(&self, generation: u64) {
        let _one = self.forking.lock();
        if self.forks.load(Ordering::Acquire) == generation {
            return;
        }
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.input(|inner, now| inner.reset_after_fork(now));
        self.forks.store(generation, Ordering::Release);
        if let Some(leaks) = &self.leaks {
            leaks.wake_all();
        }
        self.start_threads();
    }

    /// The timer's turn ([`driver::timer`]): at most
    /// [`OUTPUTS_PER_WAKE`](driver::timer::OUTPUTS_PER_WAKE) outputs, then
    /// what the timer does next, armed under the lock.
    fn tick(&self) -> driver::timer::Tick {
        self.events.refresh();
        let (mut inner, read) = self.begin(CoarseNow::exact(Instant::now()), false);
        let now = read.at;
        let due = driver::timer::fire_due(&mut inner.core, now);
        #[cfg(feature = "recorder")]
        let mut incident = None;
        let limit = driver::timer::OUTPUTS_PER_WAKE;
        let (_, tick) = self.end(
            inner,
            now,
            None,
            &mut OwnCheckout::default(),
            false,
            limit,
            |inner, more| {
                #[cfg(feature = "recorder")]
                {
                    incident = (self.flight.as_ref()).and_then(|flight| flight.take_incident(&inner.core));
                }
                let tick = driver::timer::after_turn(&inner.core, now, due, more, Instant::now);
                if let Some(armed) = tick.armed(now) {
                    inner.armed = armed;
                }
                tick
            },
        );
        #[cfg(feature = "recorder")]
        if let (Some(flight), Some(recording)) = (&self.flight, incident) {
            flight.report(&self.address, &recording);
        }
        tick
    }
}

impl<M: ManageConnection> Perform<M::Connection> for Shared<M> {
    /// `deadline`: the checkout's the connection is for, told to the
    /// manager's `connect_until`; the connect timeout bounds it anyway.
    fn establish(&self, id: ConnectionId, abort: Arc<Abort>, deadline: Option<Instant>) {
        establish(self, id, abort, deadline);
    }

    fn close(&self, connections: Vec<M::Connection>) {
        let panics = self.events.panics().clone();
        let close = move || {
            for connection in connections {
                let _ = panics.call(Hook::Close, || drop(connection));
            }
        };
        // Off the caller's thread: a close may be I/O. (Refused a thread,
        // the closure is dropped, and the connections with it.)
        let _ = spawn("cmap-close", close);
    }

    fn wake_timer(&self) {
        if let Some(timer) = &*self.timer.lock() {
            timer.unpark();
        }
    }

    fn check_in(&self, connection: Pooled<M::Connection>) {
        Shared::check_in(self, connection);
    }

    #[cfg(feature = "metrics")]
    fn measured(&self, measured: cmap_async::driver::Measured) {
        if let Some(metrics) = &self.metrics {
            metrics.apply(&measured, &**self.events.panics());
        }
    }
}

/// Runs `f` on a new thread; `false` if the system refused one (`f` is
/// dropped then).
fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    thread::Builder::new().name(name.into()).spawn(f).is_ok()
}

/// One establishment: `connect` on a thread of its own, under a panic
/// guard; another thread gives up on it at the connect timeout (the
/// connection, should it come later, is dropped) or when the core aborts
/// it. Whichever comes first reports, once.
fn establish<M: ManageConnection>(
    shared: &Shared<M>,
    id: ConnectionId,
    abort: Arc<Abort>,
    checkout: Option<Instant>,
) {
    let reported = Arc::new(AtomicBool::new(false));
    if let Some(after) = shared.connect_timeout {
        let (pool, abort, reported) = (shared.me.clone(), abort.clone(), reported.clone());
        let deadline = Instant::now().checked_add(after);
        let _ = spawn("cmap-connect", move || {
            // Fired by the core's abort, or by the connect when done.
            if abort.wait_until(deadline) || reported.swap(true, Ordering::AcqRel) {
                return;
            }
            if let Some(shared) = pool.upgrade() {
                let timeout = cmap_async::ConnectTimeoutError { after };
                shared.finish_establish(id, Err(EstablishError::network(timeout)));
            }
        });
    }
    let (pool, manager, panics) = (
        shared.me.clone(),
        shared.manager.clone(),
        shared.events.panics().clone(),
    );
    let started = spawn("cmap-connect", move || {
        let result = match panics.call(Hook::Connect, || manager.connect_until(checkout)) {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(error)) => Err(EstablishError::new(manager.classify(&error), error)),
            Err(panicked) => Err(EstablishError::other(panicked)),
        };
        // Aborted (the core counted it closed) or timed out: dropped.
        if abort.is_fired() || reported.swap(true, Ordering::AcqRel) {
            return;
        }
        // Ends the watcher of the timeout.
        abort.fire();
        if let Some(shared) = pool.upgrade() {
            shared.finish_establish(id, result);
        }
    });
    if !started {
        let refused = std::io::Error::other("no thread to connect on");
        shared.finish_establish(id, Err(EstablishError::other(refused)));
    }
}

/// The timer thread: parked until the core's next deadline, unparked by
/// an input that moves it earlier; it ends with the pool.
fn run_timer<M: ManageConnection>(pool: Weak<Shared<M>>, epoch: u64) {
    use driver::timer::Tick;
    // Known before its first turn, so that no input after that turn's look
    // at the core misses it.
    if let Some(shared) = pool.upgrade() {
        *shared.timer.lock() = Some(thread::current());
    }
    loop {
        let Some(shared) = pool.upgrade() else { return };
        if shared.epoch.load(Ordering::Acquire) != epoch {
            return;
        }
        let tick = shared.tick();
        drop(shared);
        match tick {
            Tick::Exit => return,
            Tick::Again => thread::yield_now(),
            Tick::Sleep(None) => thread::park(),
            Tick::Sleep(Some(deadline)) => {
                thread::park_timeout(deadline.saturating_duration_since(Instant::now()))
            }
        }
    }
}

/// The leak watcher thread ([`Leaks::watch_turn`]); it holds the pool
/// only between turns.
fn watch_leaks<M: ManageConnection>(pool: Weak<Shared<M>>, epoch: u64) {
    loop {
        let Some(shared) = pool.upgrade() else { return };
        let Some(leaks) = shared.leaks.clone() else { return };
        if shared.epoch.load(Ordering::Acquire) != epoch {
            return;
        }
        let address = shared.address.clone();
        drop(shared);
        if !leaks.watch_turn(Instant::now(), &address) {
            return;
        }
    }
}
