//! The pool's one timer: a task that sleeps until the core's next
//! deadline (`poll_timeout`), passes the clock's `now` (not the deadline)
//! to `handle_timeout`, and re-arms when an input moves the deadline
//! earlier. It holds the pool weakly and ends once the pool is gone.

use std::rc::Weak;

use crate::manager::ManageConnection;
use crate::runtime::LocalRuntime;
use crate::shared::Shared;

pub(crate) async fn run<M: ManageConnection, R: LocalRuntime>(pool: Weak<Shared<M, R>>) {
    loop {
        let Some(shared) = pool.upgrade() else { return };
        let deadline = shared.core.borrow().poll_timeout();
        shared.armed.set(deadline);
        let rearm = shared.timer.clone();
        let sleep = deadline.map(|d| shared.rt.sleep_until(d));
        // Not held while asleep: the last handle dropped ends the pool.
        drop(shared);
        match sleep {
            Some(sleep) => futures_lite::future::or(sleep, rearm.wait()).await,
            None => rearm.wait().await,
        }
        let Some(shared) = pool.upgrade() else { return };
        // Picks up a log level changed since.
        shared.events.refresh();
        // Woken early to re-arm, nothing is due; a spurious call would be
        // harmless, but costs an input.
        if deadline.is_some_and(|d| shared.rt.now() >= d) {
            shared.input(|core, now| core.handle_timeout(now));
        }
    }
}
