//! The input cycle: the one path from the pool's lock to what an input
//! does after it, the same for every input (a checkout, a check-in, a
//! connect that finished, a clear, a detach, a close, the timer task's
//! turn). An input opens a [`Cycle`] ([`Shared::cycle`]) and makes its one
//! call on the core through it, which ends the cycle ([`Cycle::check_out`],
//! [`Cycle::check_in`], [`Cycle::turn`], or any other `handle_*` through
//! [`Shared::input`]).
//!
//! 0. **Clock, before the lock** ([`Shared::read_clock`], for a checkout or
//!    a check-in; other inputs read the precise clock): the runtime's cheap
//!    reading (`Runtime::now_coarse`) while the last unlock said no checkout
//!    waits, the precise one (`Runtime::now`) otherwise.
//! 1. **Lock** ([`Shared::cycle`]): the pool's mutex.
//! 2. **Begin**: the core's events switched on or off (on while someone
//!    subscribes or DEBUG logging is on), and the input's `now` settled:
//!    the cheap reading is kept only if it just dates idle and use times
//!    (nobody waits and, for a checkout, a connection is available), else
//!    the precise clock is read; either is raised to the latest `now` the
//!    core has seen (`Inner::clock`).
//! 3. **One `handle_*`**: [`Cycle::check_out`] (`handle_check_out_direct`:
//!    served at once, or queued with a waiter id), [`Cycle::check_in`]
//!    (`handle_check_in_direct`: a connection handed straight to the oldest
//!    waiter takes that waiter's slot out of `Inner::waiters`, to fill in
//!    step 9), or any other on `Inner` ([`Shared::input`]).
//!    **Fast path**: an input that left no action (a checkout served at
//!    once, or queued with nothing to start; a check-in) builds no
//!    [`Deferred`]: only its events, if any, are taken and sealed (steps 4
//!    and 5), a queued checkout's slot put in (step 5) and the timer
//!    re-armed if its deadline moved earlier (only a queued checkout moves
//!    it), and steps 6, 8 and 9 follow. With metrics, every input also
//!    takes its measures under the lock and applies them after step 7
//!    (`export.rs`).
//! 4. **Drain** (`Inner::drain`): bookkeeping only, into the input's
//!    [`Deferred`]: the input's events taken into its outbox
//!    (`events::Outbox`: the first event tries the delivery turn, and
//!    appends to the turn's queue if another thread holds it); a
//!    connection to establish gets its abort switch; an outcome (`Deliver`,
//!    `Fail`) for the input's own checkout goes to its [`OwnCheckout`], one
//!    for a waiter is taken out of `Inner::waiters` as a [`SlotFill`] (so
//!    no later input can cancel or complete it again); connections to
//!    close, establishments to abort and connections to interrupt are
//!    noted; the timer is marked for re-arming if the core's next deadline
//!    moved earlier (`Inner::rearm`). The timer task drains at most a
//!    bounded number of outputs ([`Cycle::turn`]) and arms itself.
//! 5. **Seal** (`Outbox::seal`): the input's events are now either in the
//!    delivery turn it holds, or appended to the turn's queue, which is
//!    unlocked here. A checkout the core queued and this input did not
//!    complete puts its slot in `Inner::waiters`: a spare one, left by a
//!    checkout served earlier, when there is one (`spare_slots.rs`).
//! 6. **Unlock** (`Shared::unlock`): whether checkouts wait is published
//!    (`Shared::waiting`, written only when it changes) for step 0.
//! 7. **Perform**: establishments spawned, closed connections dropped on a
//!    spawned task (a close may be I/O), aborts fired, interrupted guards
//!    notified, the timer task woken when re-armed.
//! 8. **Events delivered** (`Outbox::deliver`): the input returns only
//!    once its own events (and any queued before them) are out, delivered
//!    by this thread if it holds the turn, else after waiting for it.
//! 9. **Slots filled**: each waiter's outcome is put in its slot and its
//!    waker woken, after the events, so that no checkout returns before its
//!    `ConnectionCheckedOut` or `ConnectionCheckOutFailed` is out. A slot
//!    found taken (its future was dropped) gets nothing: a connection goes
//!    back to the pool, as a new input. The input's own checkout gets its
//!    outcome from [`Cycle::check_out`]: no slot, no waker.
//!
//! Nothing of the user's, nothing slow and no await runs between steps 1
//! and 6. The lock order: [`super`]'s module doc.

use std::task::Waker;
use std::time::Instant;

use cmap_core::{CheckOut, CheckOutError, PoolState, Pooled, Wait, WaiterId};

use super::{Locked, Shared};
use crate::clock::CoarseNow;
use crate::events::Outbox;
use crate::manager::ManageConnection;
use crate::panics::Hook;
use crate::runtime::Runtime;
use crate::slot::{Handed, SharedSlot, SlotFill};
use crate::sync::atomic::Ordering;
use crate::under_lock::{Deferred, Inner, OwnCheckout, Perform};

/// One input, from the lock (steps 1 and 2, [`Shared::cycle`]) to its
/// last slot filled, ended by the input's own call. Small, with its hot
/// steps inlined: the fast path costs what the same code written out would.
#[must_use = "an input ends its cycle"]
pub(crate) struct Cycle<'a, M: ManageConnection, R: Runtime> {
    shared: &'a Shared<M, R>,
    locked: Locked<'a, M::Connection>,
    /// The input's `now`, and how much it may lag the precise clock.
    pub(crate) read: CoarseNow,
}

/// How a checkout's input ended ([`Cycle::check_out`]).
pub(crate) enum Ended<C> {
    /// Served or failed in that input.
    Done(Result<Pooled<C>, CheckOutError>),
    /// Queued as this waiter, with its slot.
    Queued(WaiterId, SharedSlot<C>),
}

impl<'a, M: ManageConnection, R: Runtime> Cycle<'a, M, R> {
    /// What the lock holds, for a look before the input's call.
    pub(crate) fn inner(&mut self) -> &mut Inner<M::Connection> {
        &mut self.locked
    }

    /// A connection given back, and the end of its cycle: one handed
    /// straight to the oldest waiter fills that waiter's slot (step 9).
    #[inline]
    pub(crate) fn check_in(mut self, connection: Pooled<M::Connection>) {
        let handed = (self.locked).check_in(self.read.at, connection, &self.shared.interrupts);
        if self.locked.left_no_action() {
            self.settle(handed);
        } else {
            self.drain_and_perform(handed, None, None);
        }
    }

    /// A checkout waiting as `wait` says (`waker`: its future's, for the
    /// slot it waits in if it is queued), and the end of its cycle.
    #[inline(always)]
    pub(crate) fn check_out(mut self, wait: Wait, waker: &Waker) -> Ended<M::Connection> {
        let mut own = match self.locked.core.handle_check_out_direct(self.read.at, wait) {
            // Served, and nothing else to do: the common checkout.
            CheckOut::Ready(connection) if self.locked.left_no_action() => {
                self.settle(None);
                return Ended::Done(Ok(connection));
            }
            // Queued, and nothing to start: the timer may have to wake
            // for its deadline.
            CheckOut::Later(id) if self.locked.left_no_action() => {
                let (slot, rearm, shared) = (self.queue(id, waker), self.locked.rearm(), self.shared);
                self.settle(None);
                if rearm {
                    shared.wake_timer();
                }
                return Ended::Queued(id, slot);
            }
            CheckOut::Ready(connection) => OwnCheckout {
                id: None,
                outcome: Some(Ok(connection)),
            },
            CheckOut::Later(id) => OwnCheckout {
                id: Some(id),
                outcome: None,
            },
        };
        match (
            self.drain_and_perform(None, Some(&mut own), Some(waker)),
            own.outcome,
        ) {
            (_, Some(outcome)) => Ended::Done(outcome),
            (Some(slot), None) => Ended::Queued(own.id.expect("queued"), slot),
            (None, None) => unreachable!("a checkout not served at once has a slot"),
        }
    }

    /// The timer task's turn, once it handled its timeout: at most `limit`
    /// outputs drained, then `arm` decides under the lock, told whether
    /// outputs are left, what the task does next (and arms it: the turn
    /// re-arms nothing); then steps 6 to 9.
    pub(crate) fn turn<T>(
        mut self,
        limit: usize,
        arm: impl FnOnce(&mut Inner<M::Connection>, bool) -> T,
    ) -> T {
        let mut deferred = Deferred::default();
        let more = self.drain(&mut deferred, &mut OwnCheckout::default(), limit);
        let next = arm(&mut self.locked, more);
        self.shared.unlock(self.locked);
        self.shared.perform(deferred);
        next
    }

    /// Step 4: at most `limit` outputs drained into `deferred`.
    fn drain(
        &mut self,
        deferred: &mut Deferred<'a, M::Connection>,
        own: &mut OwnCheckout<M::Connection>,
        limit: usize,
    ) -> bool {
        let (hub, interrupts, now) = (&self.shared.events, &self.shared.interrupts, self.read.at);
        let more = (self.locked).drain(now, hub, interrupts, deferred, own, limit);
        #[cfg(feature = "metrics")]
        deferred.set_measured(self.shared.measured(&mut self.locked));
        more
    }

    /// The fast path, for an input that left no action: no [`Deferred`];
    /// its events (if any) taken and sealed, the lock released, the events
    /// delivered, a hand-over's slot filled. The timer is left as it is: a
    /// checkout served at once or a check-in that leaves no action never
    /// moves the core's next deadline earlier (it queues nobody, and closes
    /// or starts nothing); a queued checkout re-arms it itself.
    #[inline(always)]
    fn settle(self, handed: Option<Handed<M::Connection>>) {
        // A pool without metrics tests for them (`export.rs`).
        #[cfg(feature = "metrics")]
        if self.shared.metrics.is_some() {
            return self.shared.settle_measured(self.locked, handed);
        }
        self.shared.release(self.locked);
        if let Some((slot, connection)) = handed {
            self.shared.fill((slot, Ok(connection)));
        }
    }

    /// Steps 4 to 9 in full; returns the slot of the input's own checkout
    /// if it waits.
    #[inline(never)]
    fn drain_and_perform(
        mut self,
        handed: Option<Handed<M::Connection>>,
        own: Option<&mut OwnCheckout<M::Connection>>,
        waker: Option<&Waker>,
    ) -> Option<SharedSlot<M::Connection>> {
        let (mut deferred, mut none) = (Deferred::default(), OwnCheckout::default());
        let own = own.unwrap_or(&mut none);
        if let Some((slot, connection)) = handed {
            deferred.fill((slot, Ok(connection)));
        }
        self.drain(&mut deferred, own, usize::MAX);
        deferred.rearm = self.locked.rearm();
        let queued = match (own.id, &own.outcome, waker) {
            (Some(id), None, Some(waker)) => Some(self.queue(id, waker)),
            _ => None,
        };
        self.shared.unlock(self.locked);
        self.shared.perform(deferred);
        queued
    }

    /// Step 5 for a checkout this input queued and did not complete: its
    /// slot put in `Inner::waiters`, a spare one when there is one.
    #[inline]
    fn queue(&mut self, id: WaiterId, waker: &Waker) -> SharedSlot<M::Connection> {
        self.locked.queue(id, waker)
    }
}

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
    /// Opens an input (steps 1 and 2): the lock taken, the events switched
    /// on or off, and the input's `now` settled from `read`, the clock read
    /// before the lock. For a checkout (`checkout`), a coarse `read` is kept
    /// only while a connection is available.
    #[inline(always)]
    pub(crate) fn cycle(&self, read: CoarseNow, checkout: bool) -> Cycle<'_, M, R> {
        let mut locked = self.lock();
        let read = locked.open(self.events.wanted(), read, checkout, || self.rt.now());
        Cycle {
            shared: self,
            locked,
            read,
        }
    }

    /// One input on the precise clock: `f` calls one `handle_*`, and the
    /// cycle ends (in full: any such input may move the timer).
    pub(crate) fn input<T>(&self, f: impl FnOnce(&mut Inner<M::Connection>, Instant) -> T) -> T {
        let mut cycle = self.cycle(CoarseNow::exact(self.rt.now()), false);
        let out = f(&mut cycle.locked, cycle.read.at);
        cycle.drain_and_perform(None, None, None);
        out
    }

    /// Gives back a checked-out connection.
    #[inline]
    pub(crate) fn check_in(&self, connection: Pooled<M::Connection>) {
        let mut cycle = self.cycle(self.read_clock(), false);
        let closed = cycle.inner().core.state() == PoolState::Closed;
        cycle.check_in(connection);
        if closed {
            self.returned_after_close.notify(usize::MAX);
        }
    }

    /// The fast path's release (`Cycle::settle`): events taken and sealed
    /// (if any), the lock released, the events delivered.
    #[inline(always)]
    pub(crate) fn release(&self, locked: Locked<'_, M::Connection>) {
        if locked.core.pending_events() > 0 {
            self.settle_with_events(locked);
        } else {
            self.unlock(locked);
        }
    }

    /// The fast path (`Cycle::settle`) for an input that left events;
    /// inlined, as its call cost more (55 a cycle) than its size (3 to 9).
    #[inline(always)]
    fn settle_with_events(&self, mut locked: Locked<'_, M::Connection>) {
        let mut events = Outbox::Empty;
        events.take(&self.events, &mut locked.core);
        events.seal();
        self.unlock(locked);
        events.deliver();
    }

    /// Step 6: publishes whether checkouts wait (`Shared::waiting`, for the
    /// next input's step 0) if that changed, and releases the lock.
    #[inline]
    fn unlock(&self, mut locked: Locked<'_, M::Connection>) {
        let waiting = !locked.waiters.is_empty();
        if waiting != locked.waiting_published {
            locked.waiting_published = waiting;
            self.waiting.store(waiting, Ordering::Relaxed);
        }
    }

    /// Steps 7 to 9: carries out what an input drained, outside the lock
    /// (the order: [`Deferred::perform`]).
    #[inline]
    fn perform(&self, deferred: Deferred<'_, M::Connection>) {
        deferred.perform(self);
    }

    /// Puts a waiting checkout's outcome in its slot and wakes it; if its
    /// future was dropped meanwhile (it found its waiter already gone, so
    /// it cancelled nothing), a connection goes back to the pool.
    pub(crate) fn fill(&self, fill: SlotFill<M::Connection>) {
        crate::under_lock::fill_slot(self, fill);
    }
}

impl<M: ManageConnection, R: Runtime> Perform<M::Connection> for Shared<M, R> {
    fn establish(
        &self,
        id: cmap_core::ConnectionId,
        abort: std::sync::Arc<crate::abort::Abort>,
        deadline: Option<Instant>,
    ) {
        crate::establish::spawn(self, id, abort, deadline);
    }

    fn close(&self, close: Vec<M::Connection>) {
        // Off the caller's path: dropping may mean I/O (a goodbye
        // message, a TLS close). A drop that panics is counted and
        // logged, and the others are still dropped.
        let panics = self.events.panics.clone();
        self.rt.spawn(async move {
            for connection in close {
                let _ = panics.call(Hook::Close, || drop(connection));
            }
        });
    }

    fn wake_timer(&self) {
        Shared::wake_timer(self);
    }

    fn check_in(&self, connection: Pooled<M::Connection>) {
        Shared::check_in(self, connection);
    }

    fn interrupted(&self) {
        self.interrupts.notify();
    }

    #[cfg(feature = "metrics")]
    fn measured(&self, measured: crate::export::Measured) {
        self.apply_measured(Some(measured));
    }
}
