//! Slots of served checkouts, kept for the next checkouts that wait.
//!
//! A queued checkout waits in a heap slot (`slot::SharedSlot`) that it
//! shares with the pool. In a busy pool every checkout waits, and making
//! and freeing that slot was most of what waiting cost the driver. A slot
//! handed a connection (`Inner::hand_over`) is therefore kept here, under
//! the pool's lock; once its checkout has taken the connection and let go
//! of it, the next checkout that waits takes it over instead of making one.

use std::collections::VecDeque;
use std::task::Waker;

use crate::slot::{SharedSlot, Slot};
use crate::sync::Arc;

/// How many slots are kept at most: enough for the checkouts served
/// between two that wait, few enough to hold little memory.
const KEPT: usize = 8;

/// Served checkouts' slots, oldest first.
pub(crate) struct SpareSlots<C> {
    kept: VecDeque<SharedSlot<C>>,
}

impl<C> Default for SpareSlots<C> {
    fn default() -> Self {
        SpareSlots {
            kept: VecDeque::new(),
        }
    }
}

impl<C> SpareSlots<C> {
    /// Keeps the slot of a checkout just served (its future may still hold
    /// it); the oldest goes when [`KEPT`] are kept.
    #[inline]
    pub(crate) fn keep(&mut self, slot: SharedSlot<C>) {
        if self.kept.len() == KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back(slot);
    }

    /// A slot for a checkout that waits, holding `waker`: the oldest one
    /// kept, when its checkout has let go of it, else a new one.
    #[inline]
    pub(crate) fn take(&mut self, waker: &Waker) -> SharedSlot<C> {
        if let Some(state) = self
            .kept
            .front_mut()
            .and_then(Arc::get_mut)
            .map(|slot| slot.get_mut())
        {
            // Its checkout took the outcome (or, dropped first, checked the
            // connection back in): nothing is left in it.
            debug_assert!(
                matches!(state, Slot::Taken),
                "a spare slot still holds an outcome"
            );
            *state = Slot::Waiting(Some(waker.clone()));
            if let Some(slot) = self.kept.pop_front() {
                return slot;
            }
        }
        crate::slot::new_slot(waker)
    }

    /// How many slots are kept (for the tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot::lock_slot;

    #[test]
    fn a_slot_is_reused_only_once_its_checkout_let_go_of_it() {
        let mut spare = SpareSlots::<u32>::default();
        let waker = Waker::noop();
        let held = spare.take(waker);
        *lock_slot(&held) = Slot::Taken;
        spare.keep(held.clone());
        // Its checkout still holds it: a new slot.
        let other = spare.take(waker);
        assert!(!Arc::ptr_eq(&other, &held));
        assert_eq!(spare.len(), 1);
        // Let go of: the same slot, waiting again.
        let address = Arc::as_ptr(&held);
        drop(held);
        let reused = spare.take(waker);
        assert_eq!(Arc::as_ptr(&reused), address);
        assert!(matches!(*lock_slot(&reused), Slot::Waiting(Some(_))));
        assert_eq!(spare.len(), 0);
    }

    #[test]
    fn at_most_kept_slots_are_kept() {
        let mut spare = SpareSlots::<u32>::default();
        // Each still held by its checkout.
        let held: Vec<_> = (0..KEPT + 3).map(|_| spare.take(Waker::noop())).collect();
        for slot in &held {
            spare.keep(slot.clone());
        }
        assert_eq!(spare.len(), KEPT);
        // The oldest three went.
        assert!(held[..3].iter().all(|slot| Arc::strong_count(slot) == 1));
    }
}
