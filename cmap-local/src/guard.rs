//! The guard `get()` returns: it derefs to the connection and gives it
//! back on drop (STYLE 13: what a dropped value did not finish, its
//! `Drop` reports).

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;
use std::time::Instant;

use cmap_async::driver::{catch_panic, catch_panic_in, Back};
use cmap_async::Hook;
use cmap_core::{ConnectionId, Pooled};

use crate::manager::ManageConnection;
use crate::runtime::LocalRuntime;
use crate::shared::Shared;

/// A checked-out connection. Dropping it checks it in: closed if marked
/// broken, found broken by [`ManageConnection::is_broken`], interrupted
/// by a clear, or dropped while its user's code unwinds; otherwise reset
/// by [`ManageConnection::reset`] (in a task if the reset has to wait) and
/// pooled again.
pub struct PooledConnection<M: ManageConnection, R: LocalRuntime> {
    pool: Rc<Shared<M, R>>,
    conn: Option<Pooled<M::Connection>>,
    broken: bool,
    /// Watched by leak detection: reported back when it returns.
    tracked: bool,
}

impl<M: ManageConnection, R: LocalRuntime> PooledConnection<M, R> {
    pub(crate) fn new(pool: Rc<Shared<M, R>>, conn: Pooled<M::Connection>) -> Self {
        PooledConnection {
            pool,
            conn: Some(conn),
            broken: false,
            tracked: false,
        }
    }

    /// Watched for leaks from now, as checked out by `caller`, when leak
    /// detection is on (off, one branch).
    #[inline]
    pub(crate) fn track(&mut self, caller: &'static std::panic::Location<'static>) {
        if self.pool.leaks.is_some() {
            self.start_tracking(caller);
        }
    }

    #[cold]
    #[inline(never)]
    fn start_tracking(&mut self, caller: &'static std::panic::Location<'static>) {
        if let Some(leaks) = &self.pool.leaks {
            leaks.checked_out(self.connection_id(), self.pool.rt.now(), caller);
            self.tracked = true;
        }
    }

    fn pooled(&self) -> &Pooled<M::Connection> {
        self.conn.as_ref().expect("present until dropped or detached")
    }

    /// The connection's id (spec: `connectionId`, from 1 per pool).
    pub fn connection_id(&self) -> ConnectionId {
        self.pooled().id()
    }

    /// When it was established.
    pub fn created_at(&self) -> Instant {
        self.pooled().created_at()
    }

    /// Marks it unusable: it is closed (reason `error`) when dropped.
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Whether a clear with `interrupt_in_use` interrupted it: its work
    /// should stop with a retryable error; it is closed when dropped.
    pub fn is_interrupted(&self) -> bool {
        self.pool.is_interrupted(self.connection_id())
    }

    /// Takes the connection out of the pool for good (closed with reason
    /// `detached`, no longer counted against `maxPoolSize`).
    pub fn detach(mut self) -> M::Connection {
        let conn = self.conn.take().expect("present until dropped or detached");
        if self.tracked {
            self.pool.leak_returned(conn.id(), Back::Detached);
        }
        self.pool.forget_interrupted(conn.id());
        let detached = self.pool.input(|core, now| core.handle_detach(now, conn));
        match detached {
            Ok(raw) => raw,
            Err(_) => unreachable!("a guard's connection belongs to its pool"),
        }
    }
}

impl<M: ManageConnection, R: LocalRuntime> Deref for PooledConnection<M, R> {
    type Target = M::Connection;
    fn deref(&self) -> &M::Connection {
        self.pooled()
    }
}

impl<M: ManageConnection, R: LocalRuntime> DerefMut for PooledConnection<M, R> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        self.conn.as_mut().expect("present until dropped or detached")
    }
}

impl<M: ManageConnection, R: LocalRuntime> fmt::Debug for PooledConnection<M, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledConnection")
            .field("id", &self.conn.as_ref().map(|c| c.id()))
            .finish_non_exhaustive()
    }
}

impl<M: ManageConnection, R: LocalRuntime> Drop for PooledConnection<M, R> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        self.pool.give_back(conn, self.broken, self.tracked);
    }
}

impl<M: ManageConnection, R: LocalRuntime> Shared<M, R> {
    /// A guard watched by leak detection came back.
    #[cold]
    #[inline(never)]
    fn leak_returned(&self, id: ConnectionId, back: Back) {
        if let Some(leaks) = &self.leaks {
            leaks.returned(id, self.rt.now(), &self.address, back);
        }
    }

    /// Takes back the connection of a dropped guard (see
    /// [`PooledConnection`]); `tracked`: watched by leak detection.
    pub(crate) fn give_back(&self, mut conn: Pooled<M::Connection>, broken: bool, tracked: bool) {
        if tracked {
            self.leak_returned(conn.id(), Back::CheckedIn);
        }
        if self.is_interrupted(conn.id()) {
            self.check_in(conn);
            return;
        }
        // No hook runs while the user's code unwinds; one that panics
        // found the connection broken.
        let broken = broken
            || std::thread::panicking()
            || catch_panic(&*self.events.panics, Hook::IsBroken, || {
                self.manager.is_broken(&mut conn)
            })
            .unwrap_or(true);
        if broken {
            conn.mark_errored();
            self.check_in(conn);
            return;
        }
        if !M::RESETS {
            self.check_in(conn);
            return;
        }
        let Some(pool) = self.me.upgrade() else {
            conn.mark_errored();
            self.check_in(conn);
            return;
        };
        // Runs at once when the reset is done at once (the default does
        // nothing): then the connection is back before the drop returns.
        let mut task = Box::pin(async move {
            let reset = async {
                let reset = catch_panic_in(&*pool.events.panics, Hook::Reset, || {
                    pool.manager.reset(&mut conn)
                });
                matches!(reset.await, Ok(Ok(())))
            };
            let ok = match pool.timeouts.reset.and_then(|t| pool.rt.now().checked_add(t)) {
                Some(deadline) => {
                    let timed_out = async {
                        pool.rt.sleep_until(deadline).await;
                        false
                    };
                    futures_lite::future::or(reset, timed_out).await
                }
                None => reset.await,
            };
            if !ok {
                conn.mark_errored();
            }
            pool.check_in(conn);
        });
        let waker = std::task::Waker::noop();
        if task
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
            .is_pending()
        {
            self.rt.spawn_local(task);
        }
    }
}
