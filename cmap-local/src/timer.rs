//! The pool's one timer: a task that sleeps until the core's next
//! deadline (`poll_timeout`), its turns as the driver layer's timer policy
//! decides ([`cmap_async::driver::timer`]: the clock's `now` passed to
//! `handle_timeout`, never the deadline; at most `OUTPUTS_PER_WAKE`
//! outputs a turn, with a yield between turns; a deadline the core does
//! not clear looked at again a millisecond later, not spun on). An input
//! that moves the deadline earlier wakes it. It holds the pool weakly and
//! ends once the pool is closed with nothing due, or gone.

use std::rc::Weak;

use cmap_async::driver::timer::Tick;

use crate::manager::ManageConnection;
use crate::runtime::LocalRuntime;
use crate::shared::Shared;

pub(crate) async fn run<M: ManageConnection, R: LocalRuntime>(pool: Weak<Shared<M, R>>) {
    loop {
        let Some(shared) = pool.upgrade() else { return };
        // Picks up a log level changed since.
        shared.events.refresh();
        let tick = shared.timer_turn();
        let (rearm, rt) = (shared.timer.clone(), shared.rt.clone());
        // Not held while asleep: the last handle dropped ends the pool.
        drop(shared);
        match tick {
            Tick::Exit => return,
            Tick::Again => futures_lite::future::yield_now().await,
            Tick::Sleep(None) => rearm.wait().await,
            Tick::Sleep(Some(deadline)) => {
                futures_lite::future::or(rt.sleep_until(deadline), rearm.wait()).await
            }
        }
    }
}
