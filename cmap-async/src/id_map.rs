//! The checkouts waiting in the adapter, by the core's waiter id: a
//! [`cmap_core::IdDeque`], the structure the core's own wait queue keeps
//! its checkouts in. Inserts come in id order (a checkout is queued in the
//! same input that took its id), and waiters leave oldest first, so both
//! are O(1); a cancelled one leaves a tombstone, compacted by the rule
//! `IdDeque` documents. No allocation in steady state.

pub(crate) type IdMap<T> = cmap_core::IdDeque<T>;
