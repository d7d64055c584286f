//! Noticing a fork without a system call per checkout (spec: "Forking").
//!
//! A `pthread_atfork` child handler, registered once per process, adds one
//! to [`generation`] in every forked child. A pool records the generation
//! it was built in and compares it with one atomic load on each checkout;
//! a difference means it now lives in a forked child and must reset
//! itself (`Inner::reset_after_fork`) and start its threads again, since
//! none of the parent's survive.
//!
//! This module holds the crate's only `unsafe`: the registration.
//! Handlers registered with `pthread_atfork` are inherited by children, so
//! grandchildren count too. Elsewhere than on Unix there is no fork, and
//! the generation stays 0.

use std::sync::atomic::{AtomicU64, Ordering};

/// Forks this process is removed from its first ancestor with a pool.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The fork generation of this process: 0 in the process that first used
/// the pool, one more in each forked child.
pub(crate) fn generation() -> u64 {
    // Relaxed: the handler runs on the one thread of the new child before
    // fork returns there, and threads started later see it through spawn.
    GENERATION.load(Ordering::Relaxed)
}

/// Registers the child handler, once (then an atomic load per call).
pub(crate) fn watch() {
    #[cfg(unix)]
    {
        static REGISTER: std::sync::Once = std::sync::Once::new();
        REGISTER.call_once(|| {
            // SAFETY: `pthread_atfork` stores the function pointer and
            // calls it in the child right after each fork. A child of a
            // threaded process may only do async-signal-safe work there;
            // `forked` does one atomic add on a static, which is (no lock,
            // no allocation). The only failure, ENOMEM, leaves forks
            // unnoticed, as without this crate.
            let _ = unsafe { libc::pthread_atfork(None, None, Some(forked)) };
        });
    }
}

#[cfg(unix)]
extern "C" fn forked() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}
