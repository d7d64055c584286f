//! The RAII guard `get()` returns: it derefs to the connection and gives
//! it back when dropped.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use cmap_core::{ConnectionId, Pooled, ServiceId};

use crate::interrupt::Interrupted;
use crate::leak::{Back, Caller};
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::Shared;

/// The pool as a guard sees it: what a guard needs of its pool (give the
/// connection back or detach it, hear about interruptions), without naming the
/// runtime, so that guards are `PooledConnection<'_, M>` whatever runtime
/// drives the pool. `Shared` is the one implementation.
pub(crate) trait GuardPool<M: ManageConnection>: Send + Sync {
    /// Takes back the connection of a dropped guard (`marked_broken`: by
    /// [`PooledConnection::mark_broken`]): one call into the pool, which
    /// does the rest (see [`Shared::give_back`]).
    fn give_back(&self, connection: Pooled<M::Connection>, marked_broken: bool);
    fn detach(&self, connection: Pooled<M::Connection>) -> M::Connection;
    fn interrupted(&self, id: ConnectionId) -> Interrupted;
    fn is_interrupted(&self, id: ConnectionId) -> bool;
    /// An owning handle on the pool, for a guard that must outlive the
    /// borrow it was made with.
    fn handle(&self) -> Arc<dyn GuardPool<M>>;
    /// A guard watched by leak detection is back (called only for one).
    fn leak_returned(&self, id: ConnectionId, back: Back);
}

impl<M: ManageConnection, R: Runtime> GuardPool<M> for Shared<M, R> {
    fn give_back(&self, connection: Pooled<M::Connection>, marked_broken: bool) {
        Shared::give_back(self, connection, marked_broken);
    }
    fn detach(&self, connection: Pooled<M::Connection>) -> M::Connection {
        Shared::detach(self, connection)
    }
    fn interrupted(&self, id: ConnectionId) -> Interrupted {
        Interrupted::new(self.interrupts.clone(), id, self.address.clone())
    }
    fn is_interrupted(&self, id: ConnectionId) -> bool {
        self.interrupts.contains(id)
    }
    fn handle(&self) -> Arc<dyn GuardPool<M>> {
        self.me
            .upgrade()
            .expect("a guard's pool lives while the guard borrows it")
    }
    fn leak_returned(&self, id: ConnectionId, back: Back) {
        if let Some(leaks) = &self.leaks {
            leaks.returned(id, self.rt.now(), &self.address, back);
        }
    }
}

/// A guard's reference to its pool ([`GuardPool`]): borrowed from the
/// `Pool` handle it was checked out of (no reference count taken or
/// dropped per checkout), or owned, for a guard that outlives that handle.
enum PoolRef<'a, M: ManageConnection> {
    Borrowed(&'a dyn GuardPool<M>),
    Owned(Arc<dyn GuardPool<M>>),
}

impl<M: ManageConnection> PoolRef<'_, M> {
    fn get(&self) -> &dyn GuardPool<M> {
        match self {
            PoolRef::Borrowed(pool) => *pool,
            PoolRef::Owned(pool) => &**pool,
        }
    }

    fn to_owned(&self) -> Arc<dyn GuardPool<M>> {
        match self {
            PoolRef::Borrowed(pool) => pool.handle(),
            PoolRef::Owned(pool) => pool.clone(),
        }
    }
}

/// A checked-out connection. It derefs (mutably) to the connection and
/// checks it back in when dropped:
///
/// - marked broken ([`mark_broken`](Self::mark_broken)) or found broken by
///   [`ManageConnection::is_broken`], it is checked in marked errored and
///   the pool closes it (reason `error`);
/// - interrupted by the pool ([`interrupted`](Self::interrupted)), it is
///   given back as it is, without a reset, and the pool disposes of it;
/// - otherwise [`ManageConnection::reset`] runs (in a spawned task if it
///   has to wait; skipped when [`ManageConnection::RESETS`] is `false`) and
///   the connection is checked in, to be reused.
///
/// [`detach`](Self::detach) takes the connection out of the pool instead.
///
/// A guard from [`Pool::get`](crate::Pool::get) borrows the `Pool` handle
/// (`'a`), so a checkout takes and drops no reference count on the pool;
/// one from [`Pool::get_owned`](crate::Pool::get_owned), or made
/// [`into_owned`](Self::into_owned), is `PooledConnection<'static, M>`.
///
/// # Example
///
/// ```
/// # use cmap_async::{GetError, ManageConnection, Pool, Runtime};
/// async fn work<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) -> Result<(), GetError> {
///     let mut conn = pool.get().await?;
///     let _connection: &mut M::Connection = &mut conn; // use it
///     let failed = false; // if an operation on it failed:
///     if failed {
///         conn.mark_broken(); // closed instead of pooled again
///     }
///     Ok(()) // dropped: checked in
/// }
/// ```
pub struct PooledConnection<'a, M: ManageConnection> {
    conn: Option<Pooled<M::Connection>>,
    pool: PoolRef<'a, M>,
    /// Close it instead of pooling it again.
    broken: bool,
    /// Watched by leak detection: its return is reported.
    tracked: bool,
}

impl<'a, M: ManageConnection> PooledConnection<'a, M> {
    /// A guard that borrows its pool (from [`Pool::get`](crate::Pool::get)).
    pub(crate) fn borrowing<R: Runtime>(
        conn: Pooled<M::Connection>,
        pool: &'a Shared<M, R>,
        caller: Caller,
    ) -> Self {
        PooledConnection {
            tracked: pool.watch(&conn, caller),
            conn: Some(conn),
            pool: PoolRef::Borrowed(pool),
            broken: false,
        }
    }

    /// A guard that owns a handle on its pool (from
    /// [`Pool::get_owned`](crate::Pool::get_owned)).
    pub(crate) fn owning<R: Runtime>(
        conn: Pooled<M::Connection>,
        pool: Arc<Shared<M, R>>,
        caller: Caller,
    ) -> Self {
        PooledConnection {
            tracked: pool.watch(&conn, caller),
            conn: Some(conn),
            pool: PoolRef::Owned(pool),
            broken: false,
        }
    }

    /// The same guard, no longer borrowing the `Pool` handle it came from:
    /// for a connection to keep, or move into a spawned task, beyond that
    /// handle's borrow.
    ///
    /// ```
    /// # use cmap_async::{GetError, ManageConnection, Pool, PooledConnection, Runtime};
    /// async fn keep<M: ManageConnection, R: Runtime>(
    ///     pool: &Pool<M, R>,
    /// ) -> Result<PooledConnection<'static, M>, GetError> {
    ///     Ok(pool.get().await?.into_owned())
    /// }
    /// ```
    pub fn into_owned(mut self) -> PooledConnection<'static, M> {
        PooledConnection {
            conn: self.conn.take(),
            pool: PoolRef::Owned(self.pool.to_owned()),
            broken: self.broken,
            tracked: self.tracked,
        }
    }

    fn pooled(&self) -> &Pooled<M::Connection> {
        self.conn
            .as_ref()
            .expect("the connection is present until the guard is consumed")
    }

    /// Marks the connection broken: when the guard is dropped it is closed
    /// (reason `error`) instead of being pooled again. Do this when an
    /// operation on it failed in a way that leaves its state unknown.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, PooledConnection};
    /// # fn run<M: ManageConnection>(mut conn: PooledConnection<'_, M>) {
    /// conn.mark_broken();
    /// assert!(conn.is_marked_broken());
    /// drop(conn); // closed with reason `error`
    /// # }
    /// ```
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Whether [`mark_broken`](Self::mark_broken) was called.
    pub fn is_marked_broken(&self) -> bool {
        self.broken
    }

    /// The connection's id (`driverConnectionId` in logs).
    pub fn connection_id(&self) -> ConnectionId {
        self.pooled().id()
    }

    /// The service the connection reached, in load-balanced mode.
    pub fn service_id(&self) -> Option<ServiceId> {
        self.pooled().service_id()
    }

    /// Takes the connection out of the pool for good: it no longer counts
    /// against `maxPoolSize`, and the pool reports it closed with reason
    /// `detached`.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, PooledConnection};
    /// # fn run<M: ManageConnection>(conn: PooledConnection<'_, M>) {
    /// let raw: M::Connection = conn.detach(); // yours now; the pool forgot it
    /// # drop(raw);
    /// # }
    /// ```
    pub fn detach(mut self) -> M::Connection {
        let conn = self
            .conn
            .take()
            .expect("the connection is present until the guard is consumed");
        if self.tracked {
            self.pool.get().leak_returned(conn.id(), Back::Detached);
        }
        self.pool.get().detach(conn)
    }

    /// A future that resolves if the pool interrupts this connection (a
    /// clear with `interrupt_in_use` while it is checked out), with the
    /// retryable error to fail the operation with. It borrows nothing, so
    /// it can race the operation; see [`Interrupted`].
    pub fn interrupted(&self) -> Interrupted {
        self.pool.get().interrupted(self.connection_id())
    }

    /// Whether the pool has interrupted this connection.
    pub fn is_interrupted(&self) -> bool {
        self.pool.get().is_interrupted(self.connection_id())
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
        self.conn
            .as_mut()
            .expect("the connection is present until the guard is consumed")
    }
}

impl<M: ManageConnection> Drop for PooledConnection<'_, M> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let pool = self.pool.get();
        if self.tracked {
            pool.leak_returned(conn.id(), Back::CheckedIn);
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
