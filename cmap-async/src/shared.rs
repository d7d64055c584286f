//! The state every handle, guard and task of one pool shares, and the one
//! way the core is driven: one input cycle, the same for every input (a
//! checkout, a guard given back, a connect that finished, a clear, the
//! timer task).
//!
//! # One input cycle
//!
//! Written out for a checkout (`Checkout::poll` in `checkout.rs`); every
//! other input runs the same steps through [`Shared::input`] (the timer
//! task through `Shared::tick` in `timer.rs`, which drains a bounded
//! number of outputs per turn).
//!
//! 0. **Clock, before the lock** ([`Shared::read_clock`]): the runtime's
//!    cheap reading (`Runtime::now_coarse`) while the last unlock said no
//!    checkout waits, the precise one (`Runtime::now`) otherwise, so that
//!    no clock is read under the lock unless that hint was stale (step 2).
//! 1. **Lock** ([`Shared::lock`]): the pool's mutex, held as [`Locked`].
//! 2. **Begin** ([`Shared::begin`]): the core's events switched on or off
//!    (on while someone subscribes or DEBUG logging is on), and the
//!    input's `now` settled: the cheap reading is kept only if it just
//!    dates idle and use times (nobody waits and, for a checkout, a
//!    connection is available), else the precise clock is read; either is
//!    raised to the latest `now` the core has seen (`Inner::clock`).
//! 3. **One `handle_*`** on the core (for a checkout
//!    `handle_check_out_direct`: served at once, or queued with a waiter
//!    id). An input that left no action (a checkout served at once, a
//!    check-in nobody waits for) ends in [`Shared::settle`]: its events
//!    (if any) taken and sealed as in steps 4 and 5, the timer re-armed if
//!    its deadline moved earlier, unlock, and the events delivered as in
//!    step 8; nothing else of steps 4 to 9 has anything to do. A check-in
//!    that hands its connection straight to the oldest waiter
//!    (`handle_check_in_direct`) takes that waiter's slot out of
//!    `Inner::waiters` here, and fills it as in step 9 after the settle
//!    (or puts it first in the full cycle's [`Deferred`]).
//! 4. **Drain** (`Inner::drain`, through [`Shared::finish`]): bookkeeping
//!    only, under the lock, into the input's [`Deferred`]: the input's
//!    events taken into its outbox (`events::Outbox`: the first event
//!    tries the delivery turn, and appends to the turn's queue if another
//!    thread holds it); a connection to establish gets its abort switch;
//!    an outcome (`Deliver`, `Fail`) for the input's own checkout goes to
//!    its [`OwnCheckout`], one for a waiter is taken out of
//!    `Inner::waiters` as a [`SlotFill`] (so no later input can cancel or
//!    complete it again); connections to close, establishments to abort
//!    and connections to interrupt are noted; and the timer is marked for
//!    re-arming if the core's next deadline moved earlier
//!    (`Inner::rearm`).
//! 5. **Seal** (`Outbox::seal`, the drain's last step): the input's events
//!    are now either in the delivery turn it holds, or appended to the
//!    turn's queue, which is unlocked here. A checkout the core queued and
//!    this input did not complete puts its slot in `Inner::waiters`: a
//!    spare one, left by a checkout served earlier, when there is one
//!    (`spare_slots.rs`), else a new one.
//! 6. **Unlock** (dropping [`Locked`]): whether checkouts wait is
//!    published (`Shared::waiting`, written only when it changes) for the
//!    next input's step 0, and the mutex is released.
//! 7. **Perform** ([`Shared::perform`], outside the lock): establishments
//!    spawned, closed connections dropped on a spawned task (a close may
//!    be I/O), aborts fired, interrupted guards notified, the timer task
//!    woken when re-armed.
//! 8. **Events delivered** (`Outbox::deliver`): the input returns only
//!    once its own events (and any queued before them) are out, delivered
//!    by this thread if it holds the turn, else after waiting for it.
//! 9. **Slots filled** (`Shared::fill`): each waiter's outcome is put in
//!    its slot and its waker woken, after the events, so that no checkout
//!    returns before its `ConnectionCheckedOut` or `ConnectionCheckOutFailed`
//!    is out. A slot found taken (its future was dropped) gets nothing: a
//!    connection goes back to the pool, as a new input. The input's own
//!    checkout returns its outcome from this very poll: no slot, no waker.
//!
//! Nothing of the user's, nothing slow and no await runs between steps 1
//! and 6.
//!
//! # Lock order
//!
//! Stated here once; other modules point here.
//!
//! 1. **The pool's lock** (`Shared::inner`).
//! 2. **The events delivery turn** (`EventHub::turn`, `events.rs`). Under
//!    the pool's lock it is only tried (`try_lock`), never waited for:
//!    event callbacks run while their thread holds the turn, and one may
//!    call into the pool and take the pool's lock. It is waited for only
//!    with no lock held (step 8), and not at all by a thread that already
//!    holds it (a callback's own input, whose events the delivery loop
//!    below it sends). The turn's queue (`EventHub::queue`) is taken under
//!    either lock, and nothing is taken while it is held.
//! 3. **A waiter's slot** (`SharedSlot`, `driver.rs`). Taken only with the
//!    pool's lock released (step 9, and the checkout future's polls and
//!    drop), and nothing is taken while it is held: the waker is woken,
//!    and an unwanted connection checked back in, after it is released.
//!
//! The other locks (the interrupted ids, the subscribers, a stream's
//! buffer, the leak book) are held only around their own data, with
//! nothing taken under them.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, PoisonError, Weak};
use std::time::{Duration, Instant};

use cmap_core::{Address, PoolOptions, PoolState, Pooled, Status};
use crossbeam_utils::CachePadded;
use event_listener::Event;

use crate::clock::CoarseNow;
use crate::driver::{lock_slot, Deferred, Inner, OwnCheckout, RareDeferred, Slot, SlotFill};
use crate::events::{EventHub, Outbox};
use crate::interrupt::Interrupts;
use crate::leak::Leaks;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::sync::{Mutex, MutexGuard};
use crate::util::{race, Either};

/// The limits the driver puts on the manager's hooks (`None`: no limit).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// On `connect`.
    pub(crate) connect: Option<Duration>,
    /// On `reset`.
    pub(crate) reset: Option<Duration>,
}

/// One pool's shared state. `Pool` handles, guards and pending `get()`
/// futures hold it strongly; spawned tasks hold it weakly.
pub(crate) struct Shared<M: ManageConnection, R: Runtime> {
    /// Itself, weakly, for the tasks it spawns.
    pub(crate) me: Weak<Self>,
    pub(crate) manager: Arc<M>,
    pub(crate) rt: R,
    pub(crate) address: Address,
    /// The options as built: read without the lock for what a resize does
    /// not change (the wait-queue timeout); the core has the current ones.
    pub(crate) options: PoolOptions,
    pub(crate) timeouts: Timeouts,
    /// A plain mutex: it is held only for one input and its drain, never
    /// across an await, and never while user code runs. Cache-padded: the
    /// lock word, then the core's hot fields (see `Inner`), start a fresh
    /// pair of lines that nothing else shares.
    inner: CachePadded<Mutex<Inner<M::Connection>>>,
    /// Whether checkouts wait, as the last input left it: read without
    /// the lock to choose the clock of the next input (`read_clock`).
    /// Written only when it changes, so it stays in every core's cache
    /// while the pool serves without queueing.
    waiting: AtomicBool,
    pub(crate) events: Arc<EventHub>,
    pub(crate) interrupts: Arc<Interrupts>,
    /// Wakes the timer task: its deadline moved earlier, or the pool closed.
    pub(crate) timer: Event,
    /// Notified when a connection comes back to a closed pool, for
    /// `close_gracefully` waiting for the ones in use.
    returned_after_close: Event,
    /// Notified when an establishment finished, for `wait_ready`.
    pub(crate) established: Event,
    /// Live `Pool` handles; the last one dropped closes the pool.
    pub(crate) handles: AtomicUsize,
    /// Which timer task is the pool's: a reset after fork starts a new
    /// one, and an older one that still runs ends.
    pub(crate) timer_epoch: AtomicU64,
    /// Leak detection, when the builder set a threshold (`None`: off, and
    /// nothing of it runs).
    pub(crate) leaks: Option<Box<Leaks>>,
    /// The flight recorder, when the builder turned it on.
    #[cfg(feature = "recorder")]
    pub(crate) flight: Option<Box<crate::flight::Flight>>,
}

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        manager: M,
        rt: R,
        address: Address,
        options: PoolOptions,
        timeouts: Timeouts,
        core: cmap_core::Pool<M::Connection>,
        events: Arc<EventHub>,
        leaks: Option<Box<Leaks>>,
        #[cfg(feature = "recorder")] flight: Option<Box<crate::flight::Flight>>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            manager: Arc::new(manager),
            rt,
            address,
            options,
            timeouts,
            inner: CachePadded::new(Mutex::new(Inner::new(core))),
            waiting: AtomicBool::new(false),
            events,
            interrupts: Arc::default(),
            timer: Event::new(),
            returned_after_close: Event::new(),
            established: Event::new(),
            handles: AtomicUsize::new(1),
            timer_epoch: AtomicU64::new(0),
            leaks,
            #[cfg(feature = "recorder")]
            flight,
        })
    }

    pub(crate) fn lock(&self) -> Locked<'_, M::Connection> {
        // The core does not panic; if a panic ever poisoned the lock, the
        // state it protects is still consistent between inputs.
        Locked {
            guard: self.inner.lock().unwrap_or_else(PoisonError::into_inner),
            waiting: &self.waiting,
        }
    }

    /// Whether checkouts waited when the lock was last released: a hint,
    /// read without the lock. A checkout that arrives then is queued
    /// behind them, so it reads the precise clock before taking the lock.
    pub(crate) fn likely_to_wait(&self) -> bool {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The clock an input starts with, read before the lock is taken so
    /// that no clock is read under the lock unless `begin` finds this
    /// reading unfit (step 2 of the cycle in the module doc): the runtime's
    /// cheap reading while no checkout waits (see `Runtime::now_coarse`),
    /// the precise one otherwise.
    #[inline]
    pub(crate) fn read_clock(&self) -> CoarseNow {
        if self.likely_to_wait() {
            CoarseNow::exact(self.rt.now())
        } else {
            self.rt.now_coarse()
        }
    }

    /// Starts an input under the lock: events on or off as wanted, and the
    /// input's `now` and how much it may lag the precise clock.
    ///
    /// A coarse `read` is kept only where the instant just dates idle and
    /// use times: nobody waits and, for a checkout (`checkout`), a
    /// connection is available. Otherwise (the hint was stale) the precise
    /// clock is read now, so that deadlines and waited durations are
    /// exact. The result is raised to the latest `now` an input already
    /// gave the core, so inputs reach the core in time order and deadlines
    /// are never computed from a stale instant.
    pub(crate) fn begin(
        &self,
        inner: &mut Inner<M::Connection>,
        read: CoarseNow,
        checkout: bool,
    ) -> CoarseNow {
        inner.core.set_events_enabled(self.events.wanted());
        let coarse_will_do = || inner.waiters.is_empty() && (!checkout || inner.core.status().available > 0);
        let read = if read.lag.is_zero() || coarse_will_do() {
            read
        } else {
            CoarseNow::exact(self.rt.now())
        };
        CoarseNow {
            at: inner.clock(read.at),
            lag: read.lag,
        }
    }

    /// Ends an input under the lock: drains at most `limit` outputs and
    /// re-arms the timer. Returns whether outputs are left.
    pub(crate) fn finish<'a>(
        &'a self,
        inner: &mut Inner<M::Connection>,
        now: Instant,
        deferred: &mut Deferred<'a, M::Connection>,
        own: &mut OwnCheckout<M::Connection>,
        limit: usize,
    ) -> bool {
        let more = inner.drain(now, &self.events, &self.interrupts, deferred, own, limit);
        deferred.rearm = inner.rearm();
        more
    }

    /// Ends an input that left no action (`Inner::left_no_action`): the
    /// common served checkout and check-in nobody waits for. Its events
    /// (if any) are taken into an outbox, the timer re-armed if need be,
    /// the lock released and the events delivered; no [`Deferred`] is
    /// built, drained or performed. Gives the lock back for the full cycle
    /// otherwise.
    #[inline]
    pub(crate) fn settle<'a>(
        &'a self,
        inner: Locked<'a, M::Connection>,
    ) -> Result<(), Locked<'a, M::Connection>> {
        if !inner.left_no_action() {
            return Err(inner);
        }
        self.end_without_action(inner);
        Ok(())
    }

    /// [`Shared::settle`] for an input the caller knows left no action.
    #[inline]
    pub(crate) fn end_without_action(&self, inner: Locked<'_, M::Connection>) {
        if inner.core.pending_events() > 0 {
            self.settle_with_events(inner);
        } else {
            self.unlock_rearmed(inner);
        }
    }

    /// [`Shared::settle`] for an input that left events: out of line, so
    /// that the settling of an input without any stays small.
    #[inline(never)]
    fn settle_with_events(&self, mut inner: Locked<'_, M::Connection>) {
        let mut events = Outbox::Empty;
        events.take(&self.events, &mut inner.core);
        events.seal();
        self.unlock_rearmed(inner);
        events.deliver();
    }

    /// Re-arms the timer if need be and releases the lock.
    #[inline]
    fn unlock_rearmed(&self, mut inner: Locked<'_, M::Connection>) {
        let rearm = inner.rearm();
        drop(inner);
        if rearm {
            self.wake_timer();
        }
    }

    /// Wakes the timer task: its deadline moved earlier.
    fn wake_timer(&self) {
        // `additional`: a listener notified but never to be polled (the
        // parent's timer task, in a forked child) must not use up the
        // notification meant for the live timer task.
        self.timer.notify_additional(1);
    }

    /// One input: `f` calls one `handle_*`; everything it caused is drained
    /// under the lock and performed after it.
    pub(crate) fn input<T>(&self, f: impl FnOnce(&mut Inner<M::Connection>, Instant) -> T) -> T {
        self.input_at(CoarseNow::exact(self.rt.now()), f)
    }

    /// [`Shared::input`] from a clock reading taken by the caller.
    fn input_at<T>(&self, read: CoarseNow, f: impl FnOnce(&mut Inner<M::Connection>, Instant) -> T) -> T {
        let mut inner = self.lock();
        let now = self.begin(&mut inner, read, false).at;
        let out = f(&mut inner, now);
        if let Err(inner) = self.settle(inner) {
            self.drain_and_perform(inner, now, Deferred::default());
        }
        out
    }

    /// Steps 4 to 9 of an input (the full cycle) that started no checkout,
    /// with what it already deferred.
    fn drain_and_perform<'a>(
        &'a self,
        mut inner: Locked<'a, M::Connection>,
        now: Instant,
        mut deferred: Deferred<'a, M::Connection>,
    ) {
        self.finish(
            &mut inner,
            now,
            &mut deferred,
            &mut OwnCheckout::default(),
            usize::MAX,
        );
        drop(inner);
        self.perform(deferred);
    }

    /// Carries out what an input drained, outside the lock.
    pub(crate) fn perform(&self, deferred: Deferred<'_, M::Connection>) {
        if deferred.is_empty() {
            return;
        }
        let Deferred {
            served,
            rare,
            interrupt,
            rearm,
            events,
        } = deferred;
        let mut later = Vec::new();
        if let Some(rare) = rare {
            let RareDeferred {
                fills,
                establish,
                close,
                abort,
            } = *rare;
            later = fills;
            for (id, abort) in establish {
                self.spawn_establish(id, abort);
            }
            if !close.is_empty() {
                // Off the caller's path: dropping may mean I/O (a goodbye
                // message, a TLS close).
                self.rt.spawn(async move { drop(close) });
            }
            for abort in abort {
                abort.fire();
            }
        }
        if interrupt {
            self.interrupts.notify();
        }
        if rearm {
            self.wake_timer();
        }
        events.deliver();
        // After the events: a checkout served or failed by this input must
        // not see its outcome before its `ConnectionCheckedOut` or
        // `ConnectionCheckOutFailed` (and log message) is out, as the
        // spec emits them before the checkout returns.
        if let Some((slot, connection)) = served {
            self.fill((slot, Ok(connection)));
        }
        // Rare (a clear or close failing waiters): no iterator otherwise.
        if !later.is_empty() {
            later.into_iter().for_each(|fill| self.fill(fill));
        }
    }

    /// Puts a waiting checkout's outcome in its slot and wakes it; if its
    /// future was dropped meanwhile (it found its waiter already gone, so
    /// it cancelled nothing), a connection goes back to the pool.
    fn fill(&self, (slot, outcome): SlotFill<M::Connection>) {
        let mut state = lock_slot(&slot);
        match &mut *state {
            Slot::Waiting(waker) => {
                let waker = waker.take();
                *state = Slot::Done(outcome);
                drop(state);
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
            Slot::Done(_) | Slot::Taken => {
                drop(state);
                if let Ok(connection) = outcome {
                    self.check_in(connection);
                }
            }
        }
    }

    /// Gives back a checked-out connection. The input cycle of any other
    /// input (`input_at`), but for the hand-over: a connection the core
    /// hands straight to the oldest waiter fills that waiter's slot after
    /// the input's events are out, without a trip through the drain when
    /// the input left nothing else to do.
    pub(crate) fn check_in(&self, connection: Pooled<M::Connection>) {
        let read = self.read_clock();
        let mut inner = self.lock();
        let now = self.begin(&mut inner, read, false).at;
        let handed = inner.check_in(now, connection, &self.interrupts);
        let closed = inner.core.state() == PoolState::Closed;
        match self.settle(inner) {
            Ok(()) => {
                if let Some((slot, connection)) = handed {
                    self.fill((slot, Ok(connection)));
                }
            }
            Err(inner) => {
                let mut deferred = Deferred::default();
                if let Some((slot, connection)) = handed {
                    deferred.fill((slot, Ok(connection)));
                }
                self.drain_and_perform(inner, now, deferred);
            }
        }
        if closed {
            self.returned_after_close.notify(usize::MAX);
        }
    }

    /// Takes a checked-out connection out of the pool for good.
    pub(crate) fn detach(&self, connection: Pooled<M::Connection>) -> M::Connection {
        let (conn, closed) = self.input(|inner, now| {
            self.interrupts.forget(connection.id());
            match inner.core.handle_detach(now, connection) {
                Ok(conn) => (conn, inner.core.state() == PoolState::Closed),
                Err(_) => unreachable!("a guard's connection comes from its own pool"),
            }
        });
        if closed {
            self.returned_after_close.notify(usize::MAX);
        }
        conn
    }

    /// Closes the pool (the last `Pool` handle is gone, or `close()`).
    pub(crate) fn close(&self) {
        self.input(|inner, now| inner.core.handle_close(now));
        // The timer task ends once it sees the pool closed.
        self.wake_timer();
        // The leak watcher, once every guard is back.
        if let Some(leaks) = &self.leaks {
            leaks.close();
        }
    }

    /// Closes the pool, waits until no connection is in use or `timeout`
    /// has passed, and forces the rest closed; returns how many.
    pub(crate) async fn close_gracefully(&self, timeout: Duration) -> usize {
        self.close();
        let deadline = self.rt.now().checked_add(timeout);
        if self
            .wait_for(&self.returned_after_close, deadline, |s| s.in_use == 0)
            .await
        {
            return 0;
        }
        // The pool is closed: forcing cannot be refused.
        self.input(|inner, now| inner.core.handle_force_close(now).unwrap_or(0))
    }

    /// Waits until the pool's counts satisfy `done`, looking again each
    /// time `event` is notified, until `deadline` (`None`: no limit);
    /// returns whether they did (looked at once more at the deadline).
    pub(crate) async fn wait_for(
        &self,
        event: &Event,
        deadline: Option<Instant>,
        done: impl Fn(&Status) -> bool,
    ) -> bool {
        loop {
            // Listening first, then looking: no notification is missed.
            let notified = event.listen();
            if done(&self.lock().core.status()) {
                return true;
            }
            let Some(deadline) = deadline else {
                notified.await;
                continue;
            };
            if let Either::Right(()) = race(notified, self.rt.sleep_until(deadline)).await {
                return done(&self.lock().core.status());
            }
        }
    }
}

/// The pool's lock, held. Releasing it publishes whether checkouts wait
/// (`Shared::waiting`) if that changed.
pub(crate) struct Locked<'a, C> {
    guard: MutexGuard<'a, Inner<C>>,
    waiting: &'a AtomicBool,
}

impl<C> Deref for Locked<'_, C> {
    type Target = Inner<C>;

    fn deref(&self) -> &Inner<C> {
        &self.guard
    }
}

impl<C> DerefMut for Locked<'_, C> {
    fn deref_mut(&mut self) -> &mut Inner<C> {
        &mut self.guard
    }
}

impl<C> Drop for Locked<'_, C> {
    fn drop(&mut self) {
        let waiting = !self.guard.waiters.is_empty();
        if waiting != self.guard.waiting_published {
            self.guard.waiting_published = waiting;
            self.waiting.store(waiting, Ordering::Relaxed);
        }
    }
}
