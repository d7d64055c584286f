//! Taking connections back: what happens to the connection of a dropped
//! guard before it is checked in. The guard itself: `guard.rs`.

use std::future::Future;
use std::task::{Context, Waker};

use cmap_core::Pooled;

use super::Shared;
use crate::leak::Caller;
use crate::manager::ManageConnection;
use crate::panics::Hook;
use crate::runtime::Runtime;
use crate::util::{race_lazy, Either};

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
    /// Takes back the connection of a dropped guard:
    ///
    /// - interrupted by the pool, as it is: the pool closes it anyway, and
    ///   a reset could talk through a socket that is no longer ours (a
    ///   clear that interrupted, or a fork: see `Pool::reset_after_fork`);
    /// - marked broken, found broken by `is_broken`, or dropped while its
    ///   user's code unwinds from a panic (whatever it was doing stopped
    ///   halfway; no hook of the manager runs during the unwinding):
    ///   marked errored, and the pool closes it;
    /// - otherwise after the manager's reset (none when `RESETS` is
    ///   `false`), to be reused.
    ///
    /// One check-in call, inlined here: the common return (nothing to
    /// reset: no task, no allocation) makes no other call.
    pub(crate) fn give_back(&self, mut conn: Pooled<M::Connection>, marked_broken: bool) {
        if !self.interrupts.contains(conn.id()) {
            let broken = marked_broken
                || std::thread::panicking()
                || self
                    .events
                    .panics
                    .call(Hook::IsBroken, || self.manager.is_broken(&mut conn))
                    .unwrap_or(true);
            if broken {
                conn.mark_errored();
            } else if M::RESETS {
                return self.reset_and_check_in(conn);
            }
        }
        self.check_in(conn);
    }

    /// Runs the manager's reset, then checks the connection in (marked
    /// errored if the reset failed). Most resets are done at once (the
    /// default does nothing): then the connection is back before this
    /// returns. One that has to wait goes on in a task; it is polled again
    /// there with a real waker.
    fn reset_and_check_in(&self, mut conn: Pooled<M::Connection>) {
        let Some(owned) = self.me.upgrade() else {
            // Only while the last handle drops the pool: nothing to reuse.
            conn.mark_errored();
            self.check_in(conn);
            return;
        };
        let mut task = Box::pin(async move {
            if !owned.reset(&mut conn).await {
                conn.mark_errored();
            }
            owned.check_in(conn);
        });
        if task
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
        {
            self.rt.spawn(task);
        }
    }

    /// Runs the manager's reset on a connection being given back; returns
    /// whether it succeeded. A reset that panics, fails, or outlasts the
    /// builder's reset timeout (a server that stopped answering) failed,
    /// and the connection is closed: a slot is never held by a reset that
    /// hangs. The timer is made only once the reset has to wait.
    async fn reset(&self, conn: &mut M::Connection) -> bool {
        let reset = self.events.panics.guard(Hook::Reset, || self.manager.reset(conn));
        let Some(limit) = self.timeouts.reset else {
            return matches!(reset.await, Ok(Ok(())));
        };
        // The limit runs from when the reset has to wait.
        let timer = || async move {
            match self.rt.now().checked_add(limit) {
                Some(deadline) => self.rt.sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        match race_lazy(reset, timer).await {
            Either::Left(outcome) => matches!(outcome, Ok(Ok(()))),
            Either::Right(()) => false,
        }
    }
    /// Starts watching a connection being handed out, when leak detection
    /// is on; returns whether it did (the guard's `tracked`). Off, this is
    /// one branch on a field that never changes.
    #[inline]
    pub(crate) fn watch(&self, conn: &Pooled<M::Connection>, caller: Caller) -> bool {
        match &self.leaks {
            None => false,
            Some(leaks) => {
                leaks.checked_out(conn.id(), self.rt.now(), caller);
                true
            }
        }
    }
}
