//! One pool's state and the one way its core is driven.
//!
//! # The input cycle
//!
//! Every input (a checkout, a guard given back, a connect that finished,
//! a clear, the timer) goes through [`Shared::input`]:
//!
//! 1. read the runtime's clock;
//! 2. borrow the core, switch its events on or off (on while anyone
//!    subscribes or DEBUG logging is on), call one `handle_*`;
//! 3. drain `poll_output` until `None`: events into the delivery queue,
//!    actions into a local list; a checkout the core queued gets its slot
//!    here, before any outcome for it can be performed; note whether the
//!    core's next deadline moved earlier than the timer's;
//! 4. release the core, wake the timer if it must re-arm;
//! 5. deliver the events (`events.rs`), then perform the actions: spawn
//!    establishments, fire aborts, drop closed connections, note
//!    interruptions, and last fill the slots of the checkouts served or
//!    failed, so that a checkout returns after its events, as the spec
//!    emits them first.
//!
//! Most inputs (a checkout served at once, a check-in, events off) leave
//! no output: steps 3 and 5 are then only the flight recorder looked at
//! ([`Shared::settle`]). Such an input cannot move the core's next
//! deadline earlier (it queues nobody and starts or closes nothing), so
//! the timer is left as it is; any other input looks at the deadline.
//!
//! No user code runs while the core is borrowed; an action that needs a
//! new input (a connection delivered to a checkout whose future is gone)
//! runs it after the borrow is released. Nothing is locked: the pool lives
//! on one thread (`Rc`, `RefCell`, `Cell`).
//!
//! Every call into user code (the manager's hooks, event callbacks) is
//! wrapped in cmap-async's `catch_panic`: a panic there is logged, counted
//! and becomes that hook's failure (an establishment failed, a connection
//! closed), so the work after the call (an input, a check-in) still runs
//! and no slot is lost.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use cmap_async::driver::catch_panic;
use cmap_async::driver::timer::{after_turn, fire_due, Tick, OUTPUTS_PER_WAKE};
use cmap_async::Hook;
use cmap_core::{
    Action, Address, CheckOutError, ConnectionId, EstablishError, HandOver, IdDeque, Output, Pooled, WaiterId,
};

use crate::events::Events;
use crate::leak::Leaks;
use crate::manager::ManageConnection;
use crate::runtime::LocalRuntime;
use crate::signal::{Signal, Slot};

pub(crate) type Core<C> = cmap_core::Pool<C>;
pub(crate) type Outcome<C> = Result<Pooled<C>, CheckOutError>;
/// Where a queued checkout's outcome lands.
pub(crate) type WaiterSlot<C> = Rc<Slot<Outcome<C>>>;
/// A checkout the core queued: its id and its slot.
pub(crate) type QueuedCheckOut<C> = (WaiterId, WaiterSlot<C>);
/// A checkout served at once, or queued.
pub(crate) type CheckedOut<C> = Result<Pooled<C>, QueuedCheckOut<C>>;

/// The limits the driver puts on the manager's hooks (`None`: none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    pub(crate) connect: Option<Duration>,
    pub(crate) reset: Option<Duration>,
}

pub(crate) struct Shared<M: ManageConnection, R> {
    pub(crate) me: Weak<Self>,
    pub(crate) core: RefCell<Core<M::Connection>>,
    pub(crate) manager: Rc<M>,
    pub(crate) rt: R,
    pub(crate) address: Address,
    pub(crate) timeouts: Timeouts,
    /// Queued checkouts, by the core's waiter id (queued in id order and
    /// served oldest first, as in the core's own wait queue).
    pub(crate) waiters: RefCell<IdDeque<WaiterSlot<M::Connection>>>,
    /// Connections being established, and the switch that stops each.
    pub(crate) establishing: RefCell<BTreeMap<ConnectionId, Rc<Signal>>>,
    /// In-use connections the core interrupted (spec:
    /// interruptInUseConnections); given back as they are.
    pub(crate) interrupted: RefCell<BTreeSet<ConnectionId>>,
    pub(crate) events: Events,
    /// Wakes the timer task: the core's deadline moved earlier, or closed.
    pub(crate) timer: Rc<Signal>,
    /// The deadline the timer task sleeps until.
    pub(crate) armed: Cell<Option<Instant>>,
    /// Live `Pool` handles; the last one dropped closes the pool.
    pub(crate) handles: Cell<usize>,
    /// Leak detection, when the builder set a threshold.
    pub(crate) leaks: Option<Leaks>,
    #[cfg(feature = "recorder")]
    pub(crate) flight: Option<crate::flight::Flight>,
    /// The metrics export, fed the core's measures after every input.
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<cmap_async::driver::Metrics>,
}

/// Whether an input that leaves no output looks at the core's next
/// deadline: a checkout served at once and a check-in cannot move it
/// earlier (`Pool::poll_timeout`'s guarantee), every other input may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rearm {
    Always,
    IfOutput,
}

/// A checkout's deadline: the pool's wait-queue timeout from the
/// checkout's start, or the caller's own.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    QueueTimeout,
    /// From the checkout's start (its first poll).
    For(Duration),
    Until(Option<Instant>),
}

impl<M: ManageConnection, R: LocalRuntime> Shared<M, R> {
    /// One input cycle (see the module docs).
    pub(crate) fn input<T>(&self, f: impl FnOnce(&mut Core<M::Connection>, Instant) -> T) -> T {
        self.input_then(Rearm::Always, f)
    }

    /// [`input`](Self::input), told whether the input may leave the timer
    /// as it is when it leaves no output.
    #[inline]
    fn input_then<T>(&self, rearm: Rearm, f: impl FnOnce(&mut Core<M::Connection>, Instant) -> T) -> T {
        let now = self.rt.now();
        let mut core = self.core.borrow_mut();
        core.set_events_enabled(self.events.wanted());
        let value = f(&mut core, now);
        self.settle(core, rearm);
        value
    }

    /// A checkout at `now` (raised to the core's clock if older): served
    /// at once, or queued with a slot of its own. Its deadline is `wait`'s,
    /// or the wait-queue timeout's from `now` (one clock reading for both),
    /// returned for the manager's check (`None` without one: the common
    /// checkout, served at once, computes none).
    // Inlined into `get`: its frame cost more than its body.
    #[inline(always)]
    pub(crate) fn check_out(&self, now: Instant, wait: Wait) -> (CheckedOut<M::Connection>, Option<Instant>) {
        let mut core = self.core.borrow_mut();
        // Inputs reach the core in time order, and a deadline is never
        // computed from an instant older than its clock.
        let now = now.max(core.now());
        let wait = match wait {
            Wait::QueueTimeout => cmap_core::Wait::at_most(core.options().wait_queue_timeout()),
            Wait::For(timeout) => cmap_core::Wait::For(timeout),
            Wait::Until(deadline) => cmap_core::Wait::Until(deadline),
        };
        core.set_events_enabled(self.events.wanted());
        let (result, rearm) = match core.handle_check_out_direct(now, wait) {
            cmap_core::CheckOut::Ready(conn) => (Ok(conn), Rearm::IfOutput),
            cmap_core::CheckOut::Later(id) => {
                let slot = Rc::new(Slot::new());
                self.waiters.borrow_mut().insert(id, slot.clone());
                // Its deadline may be the core's next.
                (Err((id, slot)), Rearm::Always)
            }
        };
        self.settle(core, rearm);
        (result, if M::CHECKS { wait.deadline(now) } else { None })
    }

    /// Steps 3 to 5, once the input's call is made. Most inputs (a
    /// checkout served at once, a check-in, events off) leave no output:
    /// then only the recorder looks, and the timer if `rearm` says so.
    #[inline(always)]
    #[cfg_attr(not(feature = "metrics"), allow(unused_mut))]
    fn settle(&self, mut core: RefMut<'_, Core<M::Connection>>, rearm: Rearm) {
        #[cfg(feature = "metrics")]
        let measured = self.metrics.as_ref().and_then(|m| m.take(&mut core));
        if core.has_output() {
            self.settle_outputs(core);
        } else {
            self.after_input(&core, rearm == Rearm::Always);
            drop(core);
        }
        // The core released: a recorder is user code.
        #[cfg(feature = "metrics")]
        if let (Some(metrics), Some(measured)) = (&self.metrics, measured) {
            metrics.apply(&measured, &*self.events.panics);
        }
    }

    /// Steps 3 to 5 of an input that left outputs: drained under the
    /// borrow (bookkeeping only), then delivered and performed.
    #[inline(never)]
    fn settle_outputs(&self, mut core: RefMut<'_, Core<M::Connection>>) {
        let (actions, _) = self.drain(&mut core, usize::MAX);
        self.after_input(&core, true);
        drop(core);
        self.perform(actions);
    }

    /// Step 3: at most `limit` outputs drained, events into the delivery
    /// queue and actions into the list returned; says whether more are
    /// left.
    fn drain(&self, core: &mut Core<M::Connection>, limit: usize) -> (Vec<Action<M::Connection>>, bool) {
        let mut actions = Vec::new();
        for _ in 0..limit {
            match core.poll_output() {
                Some(Output::Event(event)) => self.events.push(event),
                Some(Output::Action(action)) => actions.push(action),
                None => return (actions, false),
            }
        }
        (actions, core.has_output())
    }

    /// The timer's turn, as the driver layer's timer policy says
    /// ([`cmap_async::driver::timer`]): the due deadline handled, at most
    /// [`OUTPUTS_PER_WAKE`] outputs drained and performed; returns what
    /// the timer does next, and arms it for that.
    pub(crate) fn timer_turn(&self) -> Tick {
        let read = self.rt.now();
        let mut core = self.core.borrow_mut();
        core.set_events_enabled(self.events.wanted());
        let now = read.max(core.now());
        let due = fire_due(&mut core, now);
        #[cfg(feature = "metrics")]
        let measured = self.metrics.as_ref().and_then(|m| m.take(&mut core));
        let (actions, more) = self.drain(&mut core, OUTPUTS_PER_WAKE);
        let tick = after_turn(&core, now, due, more, || self.rt.now());
        if let Some(armed) = tick.armed(now) {
            self.armed.set(armed);
        }
        self.after_input(&core, false);
        drop(core);
        #[cfg(feature = "metrics")]
        if let (Some(metrics), Some(measured)) = (&self.metrics, measured) {
            metrics.apply(&measured, &*self.events.panics);
        }
        self.perform(actions);
        tick
    }

    /// After every input: the timer re-armed if `rearm` and the core's next
    /// deadline moved earlier, and an incident the recorder found reported.
    #[inline]
    fn after_input(&self, core: &Core<M::Connection>, rearm: bool) {
        let next = if rearm { core.poll_timeout() } else { None };
        if next.is_some_and(|next| self.armed.get().is_none_or(|armed| next < armed)) {
            self.armed.set(next);
            self.timer.fire();
        }
        #[cfg(feature = "recorder")]
        if let Some(flight) = &self.flight {
            flight.check(core, &self.address);
        }
    }

    /// Step 5: events first, then the actions, slots last.
    fn perform(&self, actions: Vec<Action<M::Connection>>) {
        self.events.deliver();
        if actions.is_empty() {
            return;
        }
        let mut outcomes = Vec::new();
        for action in actions {
            match action {
                Action::Establish { id } => self.spawn_establish(id),
                Action::AbortEstablish { id } => {
                    if let Some(abort) = self.establishing.borrow_mut().remove(&id) {
                        abort.fire();
                    }
                }
                // Dropping is closing; the spec asks that it not block,
                // which a connection's drop on an async runtime does not.
                // One that panics is counted and logged, and the input
                // goes on.
                Action::Close { connection, .. } => {
                    let _ = catch_panic(&*self.events.panics, Hook::Close, || drop(connection));
                }
                Action::Interrupt { id } => {
                    self.interrupted.borrow_mut().insert(id);
                }
                Action::Deliver { waiter, connection } => outcomes.push((waiter, Ok(connection))),
                Action::Fail { waiter, error } => outcomes.push((waiter, Err(error))),
            }
        }
        for (waiter, outcome) in outcomes {
            self.fill(waiter, outcome);
        }
    }

    /// Puts a checkout's outcome in its slot and wakes its future.
    fn fill(&self, waiter: WaiterId, outcome: Outcome<M::Connection>) {
        let slot = self.waiters.borrow_mut().remove(&waiter);
        match (slot, outcome) {
            (Some(slot), outcome) => slot.fill(outcome),
            // Its future is gone (it cancelled in the same input): the
            // connection goes back.
            (None, Ok(conn)) => self.check_in(conn),
            (None, Err(_)) => {}
        }
    }

    /// Gives a connection back. One that goes straight to the oldest
    /// waiter comes back from the core (`handle_check_in_direct`) rather
    /// than as a `Deliver` action: a busy pool's hand-over then skips the
    /// output queue and the action list. Its slot is filled after the
    /// input's events, as any outcome.
    pub(crate) fn check_in(&self, conn: Pooled<M::Connection>) {
        self.forget_interrupted(conn.id());
        let handed = self.input_then(Rearm::IfOutput, |core, now| {
            // `Err` only for a connection of another pool: not possible,
            // a guard goes back to its own pool.
            core.handle_check_in_direct(now, conn).ok().flatten()
        });
        if let Some(HandOver { waiter, connection }) = handed {
            self.fill(waiter, Ok(connection));
        }
    }

    /// Whether a clear interrupted this in-use connection (most pools
    /// have none interrupted: one look at the set).
    pub(crate) fn is_interrupted(&self, id: ConnectionId) -> bool {
        let interrupted = self.interrupted.borrow();
        !interrupted.is_empty() && interrupted.contains(&id)
    }

    pub(crate) fn forget_interrupted(&self, id: ConnectionId) {
        let mut interrupted = self.interrupted.borrow_mut();
        if !interrupted.is_empty() {
            interrupted.remove(&id);
        }
    }

    /// Withdraws a queued checkout whose future was dropped; a connection
    /// already in its slot goes back.
    pub(crate) fn cancel(&self, waiter: WaiterId, slot: &Slot<Outcome<M::Connection>>) {
        if self.waiters.borrow_mut().remove(&waiter).is_some() {
            self.input(|core, now| {
                // Queued, so known to the core.
                let _ = core.handle_cancel(now, waiter);
            });
        } else if let Some(Ok(conn)) = slot.take() {
            self.check_in(conn);
        }
    }

    /// Spawns the task that establishes `id`; it holds the pool weakly.
    fn spawn_establish(&self, id: ConnectionId) {
        let abort = Rc::new(Signal::default());
        self.establishing.borrow_mut().insert(id, abort.clone());
        let manager = self.manager.clone();
        let rt = self.rt.clone();
        let timeout = self.timeouts.connect;
        let deadline = self.core.borrow().establishment_deadline(id);
        let panics = self.events.panics.clone();
        let mut report = Report {
            pool: self.me.clone(),
            id,
            armed: true,
        };
        self.rt.spawn_local(async move {
            let timeout =
                timeout.and_then(|after| Some((after, rt.sleep_until(rt.now().checked_add(after)?))));
            let outcome = cmap_async::driver::connect(
                &*panics,
                || manager.connect_until(deadline),
                |error| manager.classify(error),
                timeout,
                abort.wait(),
            )
            .await;
            report.armed = false;
            // Aborted: the core has already counted it closed.
            let Some(result) = outcome else { return };
            if let Some(shared) = report.pool.upgrade() {
                shared.finish_establish(id, result);
            }
        });
    }

    fn finish_establish(&self, id: ConnectionId, result: Result<M::Connection, EstablishError>) {
        self.establishing.borrow_mut().remove(&id);
        let result = result.and_then(|conn| {
            match catch_panic(&*self.events.panics, Hook::Connect, || {
                self.manager.service_id(&conn)
            }) {
                Ok(service_id) => Ok((conn, service_id)),
                Err(panicked) => Err(EstablishError::other(panicked)),
            }
        });
        self.input(|core, now| {
            // `Err` only for an id the core never issued.
            let _ = match result {
                Ok((conn, service_id)) => core.handle_established(now, id, conn, service_id),
                Err(error) => core.handle_establish_failed(now, id, error),
            };
        });
    }
}

/// Reports a failure if the establishing task is dropped before it
/// reported anything (the runtime shut down), so the core frees the slot.
struct Report<M: ManageConnection, R> {
    pool: Weak<Shared<M, R>>,
    id: ConnectionId,
    armed: bool,
}

impl<M: ManageConnection, R> Drop for Report<M, R> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(shared) = self.pool.upgrade() {
            // A borrow is held only for one input, never across a drop
            // of a task; but a runtime dropping tasks from inside one would
            // find it taken: then the pool is going away anyway.
            if let Ok(mut core) = shared.core.try_borrow_mut() {
                let now = core.now();
                let _ = core.handle_establish_failed(
                    now,
                    self.id,
                    EstablishError::other(cmap_async::EstablishDroppedError),
                );
            }
        }
    }
}
