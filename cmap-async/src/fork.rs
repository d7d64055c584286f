//! The spec's fork rule ("Forking"): a pool used in a forked child clears
//! itself and closes every connection it had, since their sockets are the
//! parent's too. Noticing the fork is the adapter's job (`cmap-blocking`
//! counts forks with `pthread_atfork`); this is what the driver does then.

use std::sync::atomic::Ordering;

use cmap_core::PoolState;

use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::Shared;
use crate::{leak, timer};

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
    pub(crate) fn reset_after_fork(&self) {
        // Only the forking thread lives on in the child: the pool's timer
        // task is gone. A new one takes over; an old one still running (a
        // call without a fork) sees the epoch move and ends.
        let epoch = self.timer_epoch.fetch_add(1, Ordering::AcqRel) + 1;
        self.input(|inner, now| {
            // Every connection made so far is the parent's: its close is a
            // leak, never a drop (see `Inner::drain`).
            inner.inherited = inner.last_issued;
            let was_ready = inner.core.state() == PoolState::Ready;
            inner.core.handle_reset_after_fork(now);
            if was_ready {
                // The reset paused it. A ready pool had no monitor to wait
                // for (or had one that readied it): ready again, as built.
                let _ = inner.core.handle_ready(now);
            }
            // Nobody sleeps until the old deadline; the new task arms itself.
            inner.armed = None;
        });
        self.timer.notify(usize::MAX);
        self.rt.spawn(timer::run(self.me.clone(), epoch));
        // The leak watcher is gone too (or, without a fork, ends on the
        // new epoch once woken).
        if let Some(leaks) = &self.leaks {
            leaks.wake_all();
            self.rt.spawn(leak::watch(self.me.clone(), epoch));
        }
    }
}
