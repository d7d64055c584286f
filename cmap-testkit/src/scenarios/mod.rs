//! The pool's behaviour on a real clock, one `async fn` per test, generic
//! over the pool's runtime `R` and the runtime `T` that the test's own
//! tasks run on. [`pool_scenarios!`](crate::pool_scenarios) makes them
//! `#[test]`s for one runtime.
//!
//! One file a theme, every scenario re-exported here (the macro calls
//! each as `scenarios::NAME`):
//!
//! - `checkout`: check out, check in and reuse; broken and detached
//!   connections; the manager's reset and check around them.
//! - `wait_queue`: waiting for a connection, the timeouts that bound the
//!   wait, and the clocks that time it.
//! - `establishment`: connects refused, denied or hanging, and how the
//!   pool recovers.
//! - `clearing`: clear, connections in use interrupted, `reset_after_fork`.
//! - `lifecycle`: close, `minPoolSize`, the pool dropped, started paused,
//!   refused at build.
//! - `events`: the events' order, on callbacks and streams, and
//!   subscribing.
//! - `callbacks`: callbacks while the pool delivers: concurrent inputs, a
//!   callback calling into its pool, checkouts dropped or polled from one.
//!
//! And beside this folder, re-exported the same way: the operational
//! controls (`operations.rs`: resize, graceful close, `wait_ready`,
//! `check_idle`, leak detection, metrics), panic safety
//! (`panic_safety.rs`) and the flight recorder (`flight.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

use cmap_async::{PooledConnection, Runtime};

use crate::{builder, Fake, FakePool};

mod callbacks;
mod checkout;
mod clearing;
mod establishment;
mod events;
mod lifecycle;
mod wait_queue;

pub use callbacks::*;
pub use checkout::*;
pub use clearing::*;
pub use establishment::*;
pub use events::*;
pub use lifecycle::*;
pub use wait_queue::*;

pub use crate::flight::*;
pub use crate::operations::*;
pub use crate::panic_safety::*;

/// Both runtimes of a scenario, made where it starts (inside the runtime).
pub(crate) fn runtimes<R: Default, T: Default>() -> (Fake<R>, T) {
    (Fake::default(), T::default())
}

/// A scenario's runtimes and a pool of at most `max_pool_size` connections
/// on its fake manager, which is returned too, to turn its knobs and count
/// its connections.
pub(crate) fn pool_of<R: Runtime + Default, T: Default>(max_pool_size: u32) -> (Fake<R>, T, FakePool<R>) {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(max_pool_size).build(m.clone()).unwrap();
    (m, t, pool)
}

/// Drops `conn`, a connection the pool interrupted, and checks that the
/// manager's reset did not run for it (`why` says why it must not).
/// Counts its wakes: a waker a scenario can look at, for a future it
/// polls by hand.
#[derive(Default)]
pub(crate) struct CountingWaker(AtomicUsize);

impl CountingWaker {
    pub(crate) fn new() -> Arc<CountingWaker> {
        Arc::default()
    }

    pub(crate) fn waker(self: &Arc<Self>) -> Waker {
        Waker::from(self.clone())
    }

    pub(crate) fn woken(&self) -> bool {
        self.0.load(Ordering::SeqCst) > 0
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub(crate) fn give_back_unreset<R: Runtime>(m: &Fake<R>, conn: PooledConnection<'_, Fake<R>>, why: &str) {
    let resets = m.resets.load(Ordering::SeqCst);
    drop(conn);
    assert_eq!(m.resets.load(Ordering::SeqCst), resets, "{why}");
}
