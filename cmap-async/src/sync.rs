//! The synchronization primitives of the pool's lock, the events delivery
//! turn and its queue, and a waiter's slot: loom's under `cfg(loom)`, so
//! that the models in `loom_tests.rs` explore their interleavings, and
//! std's otherwise. Plain re-exports: the normal build is unchanged.

#[cfg(not(loom))]
pub(crate) use std::sync::{atomic, Arc, Mutex, MutexGuard};

#[cfg(loom)]
pub(crate) use loom::sync::{atomic, Arc, Mutex, MutexGuard};
