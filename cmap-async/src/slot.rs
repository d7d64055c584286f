//! A queued checkout's slot: where its outcome waits for its future,
//! which takes it without the pool's lock (filled by the input that
//! drained it, `shared/cycle.rs`; reused through `spare_slots.rs`). Part
//! of the [driver layer](crate::driver).

use std::task::Waker;

use cmap_core::{CheckOutError, Pooled};

use crate::sync::{self, Mutex, MutexGuard};

/// A queued checkout's outcome, until its future takes it.
pub enum Slot<C> {
    /// Not served yet; the waker of the future that waits.
    Waiting(Option<Waker>),
    /// Served or failed; a dropped future checks a connection back in.
    Done(Result<Pooled<C>, CheckOutError>),
    /// Taken by its future (or the future is gone): an outcome that comes
    /// now goes back to the pool.
    Taken,
}

/// A queued checkout's slot, shared by the pool (until it completes it)
/// and the checkout's future, which takes its outcome without the pool's
/// lock.
pub type SharedSlot<C> = sync::Arc<Mutex<Slot<C>>>;

/// A queued checkout's outcome on its way to its slot, named for what
/// becomes of it (it fills that slot): decided under the pool's lock (its
/// waiter is gone from `Inner::waiters` then), put in the slot once the
/// lock is released and the input's events are out (step 9 of the input
/// cycle).
pub type SlotFill<C> = (SharedSlot<C>, Result<Pooled<C>, CheckOutError>);

/// A connection a check-in handed straight to a waiter, with its slot.
pub type Handed<C> = (SharedSlot<C>, Pooled<C>);

/// A new slot for a checkout that waits, holding `waker`.
pub(crate) fn new_slot<C>(waker: &Waker) -> SharedSlot<C> {
    sync::Arc::new(Mutex::new(Slot::Waiting(Some(waker.clone()))))
}

pub(crate) fn lock_slot<C>(slot: &Mutex<Slot<C>>) -> MutexGuard<'_, Slot<C>> {
    slot.lock()
}

/// Puts `outcome` in `slot` and wakes its waker; returns the connection
/// if its checkout went away meanwhile (the slot was taken), for the
/// caller to check back in.
pub(crate) fn fill<C>(slot: &Mutex<Slot<C>>, outcome: Result<Pooled<C>, CheckOutError>) -> Option<Pooled<C>> {
    let mut state = lock_slot(slot);
    match &mut *state {
        Slot::Waiting(waker) => {
            let waker = waker.take();
            *state = Slot::Done(outcome);
            drop(state);
            if let Some(waker) = waker {
                waker.wake();
            }
            None
        }
        Slot::Done(_) | Slot::Taken => {
            drop(state);
            outcome.ok()
        }
    }
}

/// The outcome in `slot`, taken (the slot is then [`Slot::Taken`]), or
/// `None` while it waits: what a blocking waiter looks at each time its
/// thread is woken.
pub fn take_outcome<C>(slot: &SharedSlot<C>) -> Option<Result<Pooled<C>, CheckOutError>> {
    let mut state = lock_slot(slot);
    match std::mem::replace(&mut *state, Slot::Taken) {
        Slot::Done(outcome) => Some(outcome),
        waiting => {
            *state = waiting;
            None
        }
    }
}
