//! The background task of a pool: one sleep until the core's next
//! deadline (a checkout's timeout, a background run, a backoff's end).
//!
//! - It passes the clock's `now` to `handle_timeout`, never the deadline.
//! - It looks at `now >= deadline` before sleeping, so a deadline that
//!   passed while it worked is handled at once, never starved by a busy
//!   scheduler.
//! - It handles at most [`OUTPUTS_PER_WAKE`] outputs per turn and yields
//!   between turns, so a burst (thousands of checkouts timing out at once)
//!   does not hold the lock or the worker thread for long.
//! - Inputs wake it when the deadline moves earlier than the one it sleeps
//!   until; it holds the pool weakly and ends when the pool is closed (the
//!   last `Pool` handle dropped closes it) or gone.

use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::{Duration, Instant};

use cmap_core::PoolState;

use crate::clock::CoarseNow;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::Shared;
use crate::util::{race, yield_now};

/// The most outputs the timer drains in one turn.
pub(crate) const OUTPUTS_PER_WAKE: usize = 256;

/// How long to wait before looking again at a deadline that handling it
/// did not clear (a core bug; see `tick`).
const STUCK_TIMER_RETRY: Duration = Duration::from_millis(1);

/// What the timer does next.
enum Tick {
    /// Outputs are left, or a deadline has passed: go again after a yield.
    Again,
    /// Sleep until the deadline (or a wake-up).
    Sleep(Option<Instant>),
    /// The pool is closed.
    Exit,
}

/// The task's body; `epoch` is the pool's `timer_epoch` it was started for.
pub(crate) async fn run<M: ManageConnection, R: Runtime>(pool: Weak<Shared<M, R>>, epoch: u64) {
    loop {
        let Some(shared) = pool.upgrade() else { return };
        if shared.timer_epoch.load(Ordering::Acquire) != epoch {
            // Replaced by the timer of a reset after fork.
            return;
        }
        // Listen before looking, so a wake-up in between is not lost.
        let listener = shared.timer.listen();
        let tick = tick(&shared);
        let rt = shared.rt.clone();
        drop(shared);
        match tick {
            Tick::Exit => return,
            Tick::Again => yield_now().await,
            Tick::Sleep(None) => listener.await,
            Tick::Sleep(Some(deadline)) => {
                race(rt.sleep_until(deadline), listener).await;
            }
        }
    }
}

/// One turn: the due deadline handled, at most [`OUTPUTS_PER_WAKE`]
/// outputs drained, and the timer armed for what comes next.
fn tick<M: ManageConnection, R: Runtime>(shared: &Shared<M, R>) -> Tick {
    // Picks up a log level changed since (cheap: a callsite check).
    shared.events.refresh();
    let mut cycle = shared.cycle(CoarseNow::exact(shared.rt.now()), false);
    let now = cycle.read.at;
    let due = cycle
        .inner()
        .core
        .poll_timeout()
        .filter(|deadline| *deadline <= now);
    if due.is_some() {
        cycle.inner().core.handle_timeout(now);
    }
    #[cfg(feature = "recorder")]
    let mut incident = None;
    let tick = cycle.turn(OUTPUTS_PER_WAKE, |inner, more| {
        #[cfg(feature = "recorder")]
        {
            incident = shared
                .flight
                .as_ref()
                .and_then(|flight| flight.take_incident(&inner.core));
        }
        let next = inner.core.poll_timeout();
        if due.is_some() && next == due && !more {
            // The deadline just handled is still reported: a core that
            // does not clear a timer it served would make this task spin.
            // Look again in a millisecond instead.
            let retry = now.checked_add(STUCK_TIMER_RETRY);
            inner.armed = retry;
            Tick::Sleep(retry)
        } else if more || next.is_some_and(|deadline| deadline <= shared.rt.now()) {
            // Not sleeping: no input needs to wake it.
            inner.armed = Some(now);
            Tick::Again
        } else if inner.core.state() == PoolState::Closed && next.is_none() {
            Tick::Exit
        } else {
            inner.armed = next;
            Tick::Sleep(next)
        }
    });
    #[cfg(feature = "recorder")]
    if let (Some(flight), Some(recording)) = (&shared.flight, incident) {
        flight.report(&shared.address, &recording);
    }
    tick
}
