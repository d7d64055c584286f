//! What lives under the pool's lock ([`Inner`]: the core, the waiters'
//! slots, the spare slots, the abort switches, the timer's deadline), a
//! waiter's [`Slot`], and the drain that turns the core's outputs into
//! what the input does once the lock is released ([`Deferred`]).
//!
//! Under the lock only bookkeeping happens: a delivery or failure is
//! taken from its waiter's entry (so no other input can cancel or complete
//! it), an establishment gets its abort switch, the input's events are
//! taken into its outbox (`events::Outbox`). Event delivery, then filling
//! the waiters' slots and waking them, spawning and closing happen after
//! the lock is released: steps 7 to 9 of the input cycle
//! (`shared/cycle.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use cmap_core::{
    Action, CheckOutError, ConnectionId, EstablishError, HandOver, Output, Pool as Core, Pooled, ServiceId,
    WaiterId,
};

use crate::abort::Abort;
use crate::clock::CoarseNow;
use crate::events::{EventHub, Outbox};
use crate::id_map::IdMap;
use crate::interrupt::Interrupts;
use crate::slot::{Handed, SharedSlot, SlotFill};
use crate::spare_slots::SpareSlots;

/// The state behind a threaded driver's lock: the core, the waiters'
/// slots, the abort switches of establishments, the timer's deadline.
/// Part of the [driver layer](crate::driver): cmap-async's pool and
/// cmap-blocking's keep it in a `Mutex`. The core comes first
/// (`repr(C)`): its hot fields then share the lock word's cache lines
/// (see `cmap_core::Pool` and `Shared::inner`).
#[repr(C)]
pub struct Inner<C> {
    /// The pool's state machine.
    pub core: Core<C>,
    /// Checkouts that did not complete in the input that started them.
    pub(crate) waiters: IdMap<SharedSlot<C>>,
    /// Slots of checkouts handed a connection, for the next that wait.
    pub(crate) spare_slots: SpareSlots<C>,
    /// Whether `waiters` was non-empty when the lock was last released, as
    /// published to `Shared::waiting` (see `Shared::unlock`).
    pub(crate) waiting_published: bool,
    /// The abort switch of every connection being established.
    pub(crate) establishing: BTreeMap<ConnectionId, Arc<Abort>>,
    /// The deadline the timer task sleeps until (`None`: no deadline).
    pub armed: Option<Instant>,
    /// The newest connection id the core asked to establish.
    pub(crate) last_issued: Option<ConnectionId>,
    /// After a fork: connections up to this id are the parent's, and are
    /// leaked instead of closed (see `Pool::reset_after_fork`).
    pub(crate) inherited: Option<ConnectionId>,
}

/// What an input defers until the pool's lock is released: decided under
/// the lock ([`Inner::drain`]), in order, and carried out after it
/// ([`Deferred::perform`]; steps 7 to 9 of the input cycle,
/// `shared/cycle.rs`).
///
/// Most inputs (a served checkout, a check-in) leave nothing, or one
/// outcome for a waiting checkout (a check-in handing its connection to the
/// oldest waiter): that much is kept inline, and everything rarer in a box
/// built on first use, so the common input builds and drops no vector.
pub struct Deferred<'a, C> {
    /// The first outcome to put in its slot, when it is a connection (the
    /// common case: a check-in handing its connection to the oldest
    /// waiter), kept small; any other outcome goes to `rare`.
    pub(crate) served: Option<Handed<C>>,
    pub(crate) rare: Option<Box<RareDeferred<C>>>,
    pub(crate) interrupt: bool,
    pub(crate) rearm: bool,
    /// The events drained, to deliver.
    pub(crate) events: Outbox<'a>,
    /// What the input leaves the metrics, to apply.
    #[cfg(feature = "metrics")]
    pub(crate) measured: Option<crate::export::Measured>,
}

/// The rarer part of [`Deferred`]: what only some inputs leave (a
/// connection to establish, close or stop establishing, a failed or
/// second outcome), boxed and built on first use so that the common input
/// carries none of it.
pub(crate) struct RareDeferred<C> {
    /// Outcomes after `Deferred::served` (or all of them, if the first is a
    /// failure), in order.
    pub(crate) fills: Vec<SlotFill<C>>,
    /// With the deadline of the checkout each was started for
    /// ([`Core::establishment_deadline`]), for `connect_until`.
    pub(crate) establish: Vec<(ConnectionId, Arc<Abort>, Option<Instant>)>,
    pub(crate) close: Vec<C>,
    pub(crate) abort: Vec<Arc<Abort>>,
}

impl<C> Default for Deferred<'_, C> {
    fn default() -> Self {
        Deferred {
            served: None,
            rare: None,
            interrupt: false,
            rearm: false,
            events: Outbox::Empty,
            #[cfg(feature = "metrics")]
            measured: None,
        }
    }
}

impl<C> Deferred<'_, C> {
    /// Nothing to do after the lock: the common served checkout or
    /// check-in nobody waited for.
    pub fn is_empty(&self) -> bool {
        #[cfg(feature = "metrics")]
        if self.measured.is_some() {
            return false;
        }
        self.served.is_none()
            && self.rare.is_none()
            && !self.interrupt
            && !self.rearm
            && matches!(self.events, Outbox::Empty)
    }

    fn rare(&mut self) -> &mut RareDeferred<C> {
        self.rare.get_or_insert_with(|| {
            Box::new(RareDeferred {
                fills: Vec::new(),
                establish: Vec::new(),
                close: Vec::new(),
                abort: Vec::new(),
            })
        })
    }

    /// Puts an outcome in its slot once the lock is released, after the
    /// outcomes before it.
    pub fn fill(&mut self, (slot, outcome): SlotFill<C>) {
        let first = self.served.is_none() && self.rare.as_ref().is_none_or(|rare| rare.fills.is_empty());
        match outcome {
            Ok(connection) if first => self.served = Some((slot, connection)),
            outcome => self.rare().fills.push((slot, outcome)),
        }
    }
}

/// How a driver carries out a [`Deferred`] once its lock is released
/// ([`Deferred::perform`] decides the order): what differs between
/// drivers, how they start a connect, close connections and wake their
/// timer.
pub trait Perform<C> {
    /// Starts establishing connection `id` (a task, a thread), given up
    /// when `abort` fires; `deadline` is that of the checkout it was started
    /// for (`None`: no deadline, or none asked). Its result goes back as one
    /// input ([`Inner::finish_establish`]).
    fn establish(&self, id: ConnectionId, abort: Arc<Abort>, deadline: Option<Instant>);
    /// Drops connections the core closed, off the caller's path (a close
    /// may be I/O), each under a panic guard.
    fn close(&self, connections: Vec<C>);
    /// Wakes the timer: its deadline moved earlier ([`Inner::rearm`]).
    fn wake_timer(&self);
    /// Checks in a connection whose checkout went away before its slot was
    /// filled, as a new input.
    fn check_in(&self, connection: Pooled<C>);
    /// Wakes whoever waits on interrupted connections (default: nobody).
    fn interrupted(&self) {}
    /// Applies what the input left the metrics (default: nothing, for a
    /// driver that never sets them).
    #[cfg(feature = "metrics")]
    fn measured(&self, measured: crate::export::Measured) {
        let _ = measured;
    }
}

impl<C> Deferred<'_, C> {
    /// Carries out what an input drained, outside the lock, in the
    /// layer's order: connects started, connections closed, aborts fired,
    /// interrupted guards and the timer woken, metrics applied; then the
    /// events delivered; then, last, the waiters' slots filled, so that no
    /// checkout returns before its `ConnectionCheckedOut` or
    /// `ConnectionCheckOutFailed` is out.
    pub fn perform(self, driver: &impl Perform<C>) {
        if self.is_empty() {
            return;
        }
        let Deferred {
            served,
            rare,
            interrupt,
            rearm,
            events,
            #[cfg(feature = "metrics")]
            measured,
        } = self;
        let mut later = Vec::new();
        if let Some(rare) = rare {
            let RareDeferred {
                fills,
                establish,
                close,
                abort,
            } = *rare;
            later = fills;
            for (id, abort, deadline) in establish {
                driver.establish(id, abort, deadline);
            }
            if !close.is_empty() {
                driver.close(close);
            }
            for abort in abort {
                abort.fire();
            }
        }
        if interrupt {
            driver.interrupted();
        }
        if rearm {
            driver.wake_timer();
        }
        #[cfg(feature = "metrics")]
        if let Some(measured) = measured {
            driver.measured(measured);
        }
        events.deliver();
        if let Some((slot, connection)) = served {
            fill_slot(driver, (slot, Ok(connection)));
        }
        // Rare (a clear or close failing waiters): no iterator otherwise.
        if !later.is_empty() {
            later.into_iter().for_each(|fill| fill_slot(driver, fill));
        }
    }

    /// Marks the timer for waking after the lock (what [`Inner::rearm`]
    /// said).
    pub fn set_rearm(&mut self, rearm: bool) {
        self.rearm = rearm;
    }

    /// Sets what the input left the metrics (`Metrics::take`, under the
    /// lock), to apply in [`perform`](Self::perform).
    #[cfg(feature = "metrics")]
    pub fn set_measured(&mut self, measured: Option<crate::export::Measured>) {
        self.measured = measured;
    }
}

/// Puts a waiting checkout's outcome in its slot and wakes it; if the
/// checkout went away meanwhile, a connection goes back to the pool.
pub fn fill_slot<C>(driver: &impl Perform<C>, (slot, outcome): SlotFill<C>) {
    if let Some(unwanted) = crate::slot::fill(&slot, outcome) {
        driver.check_in(unwanted);
    }
}

/// The checkout the current input started itself (as against the waiters
/// queued by earlier inputs, which get a [`SlotFill`]): served without a
/// slot or a waker when its outcome is among the outputs of that same
/// input. Inputs that start no checkout pass an empty one.
pub struct OwnCheckout<C> {
    /// Its waiter id, when the core queued it (`CheckOut::Later`).
    pub id: Option<WaiterId>,
    /// Its outcome, when this input decided it.
    pub outcome: Option<Result<Pooled<C>, CheckOutError>>,
}

impl<C> Default for OwnCheckout<C> {
    fn default() -> Self {
        OwnCheckout {
            id: None,
            outcome: None,
        }
    }
}

impl<C> Inner<C> {
    /// The state around a new core.
    pub fn new(mut core: Core<C>) -> Inner<C> {
        // Events are delivered apart from actions anyway (see `events`):
        // taking them in bulk spares moving each through the stream.
        core.set_events_apart(true);
        Inner {
            core,
            waiters: IdMap::default(),
            spare_slots: SpareSlots::default(),
            waiting_published: false,
            establishing: BTreeMap::new(),
            armed: None,
            last_issued: None,
            inherited: None,
        }
    }

    /// Step 2 of an input, just after the lock is taken: the core's events
    /// switched on or off (`events`: someone listens, or logs are on), and
    /// the input's `now` settled from `read`, the clock read before the
    /// lock. The cheap reading is kept only if it just dates idle and use
    /// times (nobody waits and, for a `checkout`, a connection is
    /// available); else `precise` is read. Either is raised to the latest
    /// `now` the core has seen.
    #[inline(always)]
    pub fn open(
        &mut self,
        events: bool,
        mut read: CoarseNow,
        checkout: bool,
        precise: impl FnOnce() -> Instant,
    ) -> CoarseNow {
        self.core.set_events_enabled(events);
        let coarse_will_do = self.waiters.is_empty() && (!checkout || self.core.status().available > 0);
        if !coarse_will_do && !read.lag.is_zero() {
            read = CoarseNow::exact(precise());
        }
        read.at = self.clock(read.at);
        read
    }

    /// The `now` for an input whose clock was read (`read`) before it took
    /// the lock: never earlier than the `now` of an input before it.
    pub fn clock(&self, read: Instant) -> Instant {
        read.max(self.core.now())
    }

    /// Drains at most `limit` outputs into `deferred`; returns whether more
    /// are left. Completes waiters' slots and records interruptions here,
    /// under the lock, so that no later input can overtake them.
    pub fn drain<'a>(
        &mut self,
        now: Instant,
        hub: &'a EventHub,
        interrupts: &Interrupts,
        deferred: &mut Deferred<'a, C>,
        own: &mut OwnCheckout<C>,
        limit: usize,
    ) -> bool {
        // The core keeps events apart (see `Inner::new`): this input's
        // come in one swap.
        deferred.events.take(hub, &mut self.core);
        let mut interrupted = Vec::new();
        // The common input (a served checkout, a check-in nobody waited
        // for) left no action: no loop to run.
        let more =
            self.core.has_output() && self.drain_actions(now, hub, deferred, own, limit, &mut interrupted);
        deferred.events.seal();
        if !interrupted.is_empty() {
            interrupts.insert(&interrupted);
            deferred.interrupt = true;
        }
        more
    }

    /// The drain's loop over the core's outputs (see [`Inner::drain`]);
    /// the connections to interrupt are collected into `interrupted`. Out
    /// of line, so that the drain of an input that left no action stays
    /// small.
    #[inline(never)]
    fn drain_actions<'a>(
        &mut self,
        now: Instant,
        hub: &'a EventHub,
        deferred: &mut Deferred<'a, C>,
        own: &mut OwnCheckout<C>,
        limit: usize,
        interrupted: &mut Vec<ConnectionId>,
    ) -> bool {
        let mut drained = 0;
        loop {
            if drained == limit {
                return true;
            }
            let Some(output) = self.core.poll_output() else {
                return false;
            };
            drained += 1;
            let action = match output {
                // None: the core keeps them apart. Should one come, it
                // still goes out in order.
                Output::Event(event) => {
                    deferred.events.push(hub, event);
                    continue;
                }
                Output::Action(action) => action,
            };
            match action {
                Action::Establish { id } => {
                    self.last_issued = self.last_issued.max(Some(id));
                    let abort = Arc::new(Abort::default());
                    self.establishing.insert(id, abort.clone());
                    let deadline = self.core.establishment_deadline(id);
                    deferred.rare().establish.push((id, abort, deadline));
                }
                Action::AbortEstablish { id } => {
                    if let Some(abort) = self.establishing.remove(&id) {
                        deferred.rare().abort.push(abort);
                    }
                }
                Action::Deliver { waiter, connection } => {
                    self.complete(now, waiter, Ok(connection), deferred, own)
                }
                Action::Fail { waiter, error } => self.complete(now, waiter, Err(error), deferred, own),
                // The parent's connection in a forked child: its socket is
                // the parent's too, so it is forgotten, never dropped (a
                // drop may say goodbye on the parent's session).
                Action::Close { id, connection, .. } if self.inherited.is_some_and(|last| id <= last) => {
                    std::mem::forget(connection)
                }
                Action::Close { connection, .. } => deferred.rare().close.push(connection),
                Action::Interrupt { id } => interrupted.push(id),
            }
        }
    }

    fn complete(
        &mut self,
        now: Instant,
        waiter: WaiterId,
        outcome: Result<Pooled<C>, CheckOutError>,
        deferred: &mut Deferred<'_, C>,
        own: &mut OwnCheckout<C>,
    ) {
        if own.id == Some(waiter) {
            own.outcome = Some(outcome);
            return;
        }
        match self.waiters.remove(&waiter) {
            // Its slot is filled once the lock is released and this
            // input's events are out (see `SlotFill`): the checkout cannot
            // complete before its event is delivered.
            Some(slot) => deferred.fill((slot, outcome)),
            // Every queued checkout has a slot from the input that queued
            // it, so this does not happen; if it did, nothing is lost.
            None => {
                if let Ok(connection) = outcome {
                    let _ = self.core.handle_check_in(now, connection);
                }
            }
        }
    }

    /// Gives a connection back to the core (its drain follows). When the
    /// core hands it straight to the oldest waiter, returns that waiter's
    /// slot with it, taken out of `waiters` (so no later input can cancel
    /// or complete it), to fill once the lock is released and the input's
    /// events are out.
    #[inline]
    pub fn check_in(
        &mut self,
        now: Instant,
        connection: Pooled<C>,
        interrupts: &Interrupts,
    ) -> Option<Handed<C>> {
        interrupts.forget(connection.id());
        match self.core.handle_check_in_direct(now, connection) {
            // Pooled (or closed): the common check-in of a pool nobody
            // waits on.
            Ok(None) => None,
            Ok(Some(handed)) => self.hand_over(now, handed),
            // A connection of this pool is never refused.
            Err(refused) => {
                debug_assert!(
                    false,
                    "a connection came back to a pool that did not create it: {refused:?}"
                );
                None
            }
        }
    }

    /// The waiter's slot for a connection the core handed it (see
    /// `check_in`). Out of line: only a busy pool's check-ins come here.
    #[inline(never)]
    fn hand_over(&mut self, now: Instant, handed: HandOver<C>) -> Option<Handed<C>> {
        let HandOver { waiter, connection } = handed;
        match self.waiters.remove(&waiter) {
            Some(slot) => {
                self.spare_slots.keep(slot.clone());
                Some((slot, connection))
            }
            // Every queued checkout has a slot (see `complete`); if one had
            // none, the connection goes back, and nothing is lost.
            None => {
                let _ = self.core.handle_check_in(now, connection);
                None
            }
        }
    }

    /// Whether the timer task must be woken: the core's deadline moved
    /// earlier than the one it sleeps until (now armed for it).
    pub fn rearm(&mut self) -> bool {
        match self.core.poll_timeout() {
            Some(next) if self.armed.is_none_or(|armed| next < armed) => {
                self.armed = Some(next);
                true
            }
            _ => false,
        }
    }

    /// Step 5 for a checkout the input queued and did not complete: its
    /// slot (a spare one when there is one) put in the waiters, holding
    /// `waker`, which filling it wakes.
    #[inline]
    pub fn queue(&mut self, id: WaiterId, waker: &Waker) -> SharedSlot<C> {
        let slot = self.spare_slots.take(waker);
        self.waiters.insert(id, slot.clone());
        slot
    }

    /// The newest connection id the core asked to establish: a connection
    /// with a greater id was made after this was read.
    pub fn last_issued(&self) -> Option<ConnectionId> {
        self.last_issued
    }

    /// Whether checkouts wait in slots.
    #[inline]
    pub fn has_waiters(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// Reports the outcome of establishing `id` (the connection and its
    /// service, or the error) to the core; its drain follows.
    pub fn finish_establish(
        &mut self,
        now: Instant,
        id: ConnectionId,
        result: Result<(C, Option<ServiceId>), EstablishError>,
    ) {
        self.establishing.remove(&id);
        // `Err` only for an id the core never issued: not the case here.
        let _ = match result {
            Ok((conn, service_id)) => self.core.handle_established(now, id, conn, service_id),
            Err(error) => self.core.handle_establish_failed(now, id, error),
        };
    }

    /// The spec's fork rule ("Forking") as one input: every connection
    /// made so far is the parent's (its close is a leak, never a drop,
    /// see [`Inner::drain`]), the core resets, a ready pool is ready
    /// again, and the timer is disarmed (the driver starts a new one,
    /// which arms itself).
    pub fn reset_after_fork(&mut self, now: Instant) {
        self.inherited = self.last_issued;
        let was_ready = self.core.state() == cmap_core::PoolState::Ready;
        self.core.handle_reset_after_fork(now);
        if was_ready {
            // The reset paused it. A ready pool had no monitor to wait
            // for (or had one that readied it): ready again, as built.
            let _ = self.core.handle_ready(now);
        }
        self.armed = None;
    }

    /// Whether the input just handled left no action (events aside): the
    /// common served checkout and check-in nobody waits for, which skip the
    /// drain and the work after the lock (the fast path of the input cycle).
    #[inline]
    pub fn left_no_action(&self) -> bool {
        !self.core.has_output()
    }
}
