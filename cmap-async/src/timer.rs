//! The background task of a pool: one sleep until the core's next
//! deadline (a checkout's timeout, a background run, a backoff's end),
//! its turns as the driver layer's timer policy decides
//! ([`crate::driver::timer`]). Inputs wake it when the deadline moves
//! earlier than the one it sleeps until; it holds the pool weakly and ends
//! when the pool is closed (the last `Pool` handle dropped closes it) or
//! gone.

use std::sync::atomic::Ordering;
use std::sync::Weak;

use crate::clock::CoarseNow;
use crate::driver::timer::{after_turn, fire_due, Tick, OUTPUTS_PER_WAKE};
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::Shared;
use crate::util::{race, yield_now};

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

/// One turn, as the driver layer's timer policy says
/// ([`crate::driver::timer`]): the due deadline handled, at most
/// [`OUTPUTS_PER_WAKE`] outputs drained, and the timer armed for what
/// comes next.
fn tick<M: ManageConnection, R: Runtime>(shared: &Shared<M, R>) -> Tick {
    // Picks up a log level changed since (cheap: a callsite check).
    shared.events.refresh();
    let mut cycle = shared.cycle(CoarseNow::exact(shared.rt.now()), false);
    let now = cycle.read.at;
    let due = fire_due(&mut cycle.inner().core, now);
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
        let tick = after_turn(&inner.core, now, due, more, || shared.rt.now());
        if let Some(armed) = tick.armed(now) {
            inner.armed = armed;
        }
        tick
    });
    #[cfg(feature = "recorder")]
    if let (Some(flight), Some(recording)) = (&shared.flight, incident) {
        flight.report(&shared.address, &recording);
    }
    tick
}
