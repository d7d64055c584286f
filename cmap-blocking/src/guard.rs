//! The guard of a checked-out connection: it derefs to the connection and
//! gives it back when dropped (`is_broken`, `reset`, then the check-in,
//! all on the dropping thread).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Instant;

use cmap_async::cmap_core::Pooled;
use cmap_async::driver::{Back, Caller};
use cmap_async::{ConnectionId, ServiceId};

use crate::manager::ManageConnection;
use crate::shared::Shared;

/// The pool a guard gives its connection back to: the handle it was
/// checked out through, or a share of the pool of its own.
enum PoolRef<'a, M: ManageConnection> {
    Borrowed(&'a Arc<Shared<M>>),
    Owned(Arc<Shared<M>>),
}

/// A checked-out connection. It derefs (mutably) to the connection and
/// checks it back in when dropped (after [`ManageConnection::reset`], on
/// the dropping thread), closed instead if marked broken, found broken
/// ([`ManageConnection::is_broken`]), interrupted, or dropped while its
/// thread panics. From [`Pool::get`](crate::Pool::get) it borrows the pool
/// handle (`'a`); from [`Pool::get_owned`](crate::Pool::get_owned), or
/// made [`into_owned`](Self::into_owned), it is
/// `PooledConnection<'static, M>`.
pub struct PooledConnection<'a, M: ManageConnection> {
    conn: Option<Pooled<M::Connection>>,
    pool: PoolRef<'a, M>,
    broken: bool,
    /// Watched by leak detection.
    tracked: bool,
}

impl<'a, M: ManageConnection> PooledConnection<'a, M> {
    pub(crate) fn borrowing(conn: Pooled<M::Connection>, pool: &'a Arc<Shared<M>>, caller: Caller) -> Self {
        Self::new(conn, PoolRef::Borrowed(pool), caller)
    }

    pub(crate) fn owning(conn: Pooled<M::Connection>, pool: Arc<Shared<M>>, caller: Caller) -> Self {
        Self::new(conn, PoolRef::Owned(pool), caller)
    }

    fn new(conn: Pooled<M::Connection>, pool: PoolRef<'a, M>, caller: Caller) -> Self {
        let leaks = pool.get().leaks.as_ref();
        let tracked = leaks
            .inspect(|leaks| leaks.checked_out(conn.id(), Instant::now(), caller))
            .is_some();
        PooledConnection {
            conn: Some(conn),
            pool,
            broken: false,
            tracked,
        }
    }

    /// The guard with a share of the pool of its own, to keep in a
    /// `'static` place or move to another thread.
    pub fn into_owned(mut self) -> PooledConnection<'static, M> {
        let pool = match &self.pool {
            PoolRef::Borrowed(pool) => Arc::clone(pool),
            PoolRef::Owned(pool) => pool.clone(),
        };
        PooledConnection {
            conn: self.conn.take(),
            pool: PoolRef::Owned(pool),
            broken: self.broken,
            tracked: self.tracked,
        }
    }

    fn pooled(&self) -> &Pooled<M::Connection> {
        self.conn.as_ref().expect("present until the guard is consumed")
    }

    /// Closes the connection when the guard is dropped instead of pooling
    /// it (reason `error`): after an I/O error, say.
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Whether [`mark_broken`](Self::mark_broken) was called.
    pub fn is_marked_broken(&self) -> bool {
        self.broken
    }

    /// The connection's id in the pool's events.
    pub fn connection_id(&self) -> ConnectionId {
        self.pooled().id()
    }

    /// The service it reached, in load-balanced mode.
    pub fn service_id(&self) -> Option<ServiceId> {
        self.pooled().service_id()
    }

    /// Takes the connection out of the pool for good: the pool forgets it
    /// (its capacity comes free) and the caller owns it.
    pub fn detach(mut self) -> M::Connection {
        let conn = self.conn.take().expect("present until the guard is consumed");
        let pool = self.pool.get();
        if self.tracked {
            leak_returned(pool, conn.id(), Back::Detached);
        }
        pool.detach(conn)
    }

    /// Whether the pool interrupted this connection (a clear with
    /// `interrupt_in_use` while it was checked out): it already counts as
    /// closed; fail the operation with a retryable error and drop the
    /// guard.
    pub fn is_interrupted(&self) -> bool {
        self.pool.get().interrupts.contains(self.connection_id())
    }
}

impl<M: ManageConnection> PoolRef<'_, M> {
    fn get(&self) -> &Shared<M> {
        match self {
            PoolRef::Borrowed(pool) => pool,
            PoolRef::Owned(pool) => pool,
        }
    }
}

fn leak_returned<M: ManageConnection>(pool: &Shared<M>, id: ConnectionId, back: Back) {
    if let Some(leaks) = &pool.leaks {
        leaks.returned(id, Instant::now(), &pool.address, back);
    }
}

impl<M: ManageConnection> Deref for PooledConnection<'_, M> {
    type Target = M::Connection;
    fn deref(&self) -> &M::Connection {
        self.pooled()
    }
}

impl<M: ManageConnection> DerefMut for PooledConnection<'_, M> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        self.conn.as_mut().expect("present until the guard is consumed")
    }
}

impl<M: ManageConnection> Drop for PooledConnection<'_, M> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let pool = self.pool.get();
        if self.tracked {
            leak_returned(pool, conn.id(), Back::CheckedIn);
        }
        pool.give_back(conn, self.broken);
    }
}

impl<M: ManageConnection> fmt::Debug for PooledConnection<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledConnection")
            .field("connection_id", &self.conn.as_ref().map(|c| c.id()))
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}
