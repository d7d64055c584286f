//! A queued checkout's slot: where its outcome waits for its future,
//! which takes it without the pool's lock (filled by the input that
//! drained it, `shared/cycle.rs`; reused through `spare_slots.rs`).

use std::task::Waker;

use cmap_core::{CheckOutError, Pooled};

use crate::sync::{self, Mutex, MutexGuard};

/// A queued checkout's outcome, until its future takes it.
pub(crate) enum Slot<C> {
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
pub(crate) type SharedSlot<C> = sync::Arc<Mutex<Slot<C>>>;

/// A queued checkout's outcome on its way to its slot, named for what
/// becomes of it (it fills that slot): decided under the pool's lock (its
/// waiter is gone from `Inner::waiters` then), put in the slot once the
/// lock is released and the input's events are out (step 9 of the input
/// cycle).
pub(crate) type SlotFill<C> = (SharedSlot<C>, Result<Pooled<C>, CheckOutError>);

/// A connection a check-in handed straight to a waiter, with its slot.
pub(crate) type Handed<C> = (SharedSlot<C>, Pooled<C>);

/// A new slot for a checkout that waits, holding `waker`.
pub(crate) fn new_slot<C>(waker: &Waker) -> SharedSlot<C> {
    sync::Arc::new(Mutex::new(Slot::Waiting(Some(waker.clone()))))
}

pub(crate) fn lock_slot<C>(slot: &Mutex<Slot<C>>) -> MutexGuard<'_, Slot<C>> {
    slot.lock()
}
