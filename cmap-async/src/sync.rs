//! The synchronization primitives of the pool's lock, the events delivery
//! turn and its queue, and a waiter's slot: loom's under `cfg(loom)`, so
//! that the models in `loom_tests.rs` explore their interleavings, and
//! otherwise std's atomics and parking_lot's mutex.
//!
//! parking_lot's mutex, not std's: the pool never relies on poisoning (the
//! state under each lock is consistent between inputs), and std's guard
//! reads the thread's panic count when taken and again when released,
//! on every check out and check in (the cost per cycle:
//! docs/benchmarks.md, "Where a cycle goes").

#[cfg(not(loom))]
pub(crate) use parking_lot::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{atomic, Arc};

#[cfg(loom)]
pub(crate) use loom::sync::{atomic, Arc, MutexGuard};

/// loom's mutex with parking_lot's interface (no poisoning).
#[cfg(loom)]
#[derive(Debug, Default)]
pub struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
