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
use std::time::Instant;

use cmap_core::{Action, CheckOutError, ConnectionId, HandOver, Output, Pool as Core, Pooled, WaiterId};

use crate::abort::Abort;
use crate::events::{EventHub, Outbox};
use crate::id_map::IdMap;
use crate::interrupt::Interrupts;
use crate::slot::{Handed, SharedSlot, SlotFill};
use crate::spare_slots::SpareSlots;

/// The state behind the pool's lock. The core comes first (`repr(C)`):
/// its hot fields then share the lock word's cache lines (see
/// `cmap_core::Pool` and `Shared::inner`).
#[repr(C)]
pub(crate) struct Inner<C> {
    pub(crate) core: Core<C>,
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
    pub(crate) armed: Option<Instant>,
    /// The newest connection id the core asked to establish.
    pub(crate) last_issued: Option<ConnectionId>,
    /// After a fork: connections up to this id are the parent's, and are
    /// leaked instead of closed (see `Pool::reset_after_fork`).
    pub(crate) inherited: Option<ConnectionId>,
}

/// What an input defers until the pool's lock is released: decided under
/// the lock, in order, and carried out after it (steps 7 to 9 of the input
/// cycle, `shared/cycle.rs`).
///
/// Most inputs (a served checkout, a check-in) leave nothing, or one
/// outcome for a waiting checkout (a check-in handing its connection to the
/// oldest waiter): that much is kept inline, and everything rarer in a box
/// built on first use, so the common input builds and drops no vector.
pub(crate) struct Deferred<'a, C> {
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
    pub(crate) fn is_empty(&self) -> bool {
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
    pub(crate) fn fill(&mut self, (slot, outcome): SlotFill<C>) {
        let first = self.served.is_none() && self.rare.as_ref().is_none_or(|rare| rare.fills.is_empty());
        match outcome {
            Ok(connection) if first => self.served = Some((slot, connection)),
            outcome => self.rare().fills.push((slot, outcome)),
        }
    }
}

/// The checkout the current input started itself (as against the waiters
/// queued by earlier inputs, which get a [`SlotFill`]): served without a
/// slot or a waker when its outcome is among the outputs of that same
/// input. Inputs that start no checkout pass an empty one.
pub(crate) struct OwnCheckout<C> {
    /// Its waiter id, when the core queued it (`CheckOut::Later`).
    pub(crate) id: Option<WaiterId>,
    /// Its outcome, when this input decided it.
    pub(crate) outcome: Option<Result<Pooled<C>, CheckOutError>>,
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
    pub(crate) fn new(mut core: Core<C>) -> Inner<C> {
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

    /// The `now` for an input whose clock was read (`read`) before it took
    /// the lock: never earlier than the `now` of an input before it.
    pub(crate) fn clock(&self, read: Instant) -> Instant {
        read.max(self.core.now())
    }

    /// Drains at most `limit` outputs into `deferred`; returns whether more
    /// are left. Completes waiters' slots and records interruptions here,
    /// under the lock, so that no later input can overtake them.
    pub(crate) fn drain<'a>(
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
    pub(crate) fn check_in(
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
    pub(crate) fn rearm(&mut self) -> bool {
        match self.core.poll_timeout() {
            Some(next) if self.armed.is_none_or(|armed| next < armed) => {
                self.armed = Some(next);
                true
            }
            _ => false,
        }
    }

    /// Whether the input just handled left no action (events aside): the
    /// common served checkout and check-in nobody waits for, which skip the
    /// drain and the work after the lock (the fast path of the input cycle).
    #[inline]
    pub(crate) fn left_no_action(&self) -> bool {
        !self.core.has_output()
    }
}
