//! The RAII guard `get()` returns: it derefs to the connection and gives
//! it back when dropped.

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Waker};

use cmap_core::{ConnectionId, Pooled, ServiceId};

use crate::interrupt::Interrupted;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::Shared;

type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What a guard needs of its pool, without naming the runtime: guards are
/// `PooledConnection<M>` whatever runtime drives the pool.
pub(crate) trait Return<M: ManageConnection>: Send + Sync {
    fn manager(&self) -> &M;
    fn check_in(&self, connection: Pooled<M::Connection>);
    fn detach(&self, connection: Pooled<M::Connection>) -> M::Connection;
    fn spawn(&self, task: Task);
    fn interrupted(&self, id: ConnectionId) -> Interrupted;
    fn is_interrupted(&self, id: ConnectionId) -> bool;
}

impl<M: ManageConnection, R: Runtime> Return<M> for Shared<M, R> {
    fn manager(&self) -> &M {
        &self.manager
    }
    fn check_in(&self, connection: Pooled<M::Connection>) {
        Shared::check_in(self, connection);
    }
    fn detach(&self, connection: Pooled<M::Connection>) -> M::Connection {
        Shared::detach(self, connection)
    }
    fn spawn(&self, task: Task) {
        self.rt.spawn(task);
    }
    fn interrupted(&self, id: ConnectionId) -> Interrupted {
        Interrupted::new(self.interrupts.clone(), id, self.address.clone())
    }
    fn is_interrupted(&self, id: ConnectionId) -> bool {
        self.interrupts.contains(id)
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
pub struct PooledConnection<M: ManageConnection> {
    conn: Option<Pooled<M::Connection>>,
    pool: Arc<dyn Return<M>>,
    /// Close it instead of pooling it again.
    broken: bool,
}

impl<M: ManageConnection> PooledConnection<M> {
    pub(crate) fn new<R: Runtime>(conn: Pooled<M::Connection>, pool: Arc<Shared<M, R>>) -> Self {
        PooledConnection {
            conn: Some(conn),
            pool,
            broken: false,
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
    /// # fn run<M: ManageConnection>(mut conn: PooledConnection<M>) {
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
    /// # fn run<M: ManageConnection>(conn: PooledConnection<M>) {
    /// let raw: M::Connection = conn.detach(); // yours now; the pool forgot it
    /// # drop(raw);
    /// # }
    /// ```
    pub fn detach(mut self) -> M::Connection {
        let conn = self
            .conn
            .take()
            .expect("the connection is present until the guard is consumed");
        self.pool.detach(conn)
    }

    /// A future that resolves if the pool interrupts this connection (a
    /// clear with `interrupt_in_use` while it is checked out), with the
    /// retryable error to fail the operation with. It borrows nothing, so
    /// it can race the operation; see [`Interrupted`].
    pub fn interrupted(&self) -> Interrupted {
        self.pool.interrupted(self.connection_id())
    }

    /// Whether the pool has interrupted this connection.
    pub fn is_interrupted(&self) -> bool {
        self.pool.is_interrupted(self.connection_id())
    }
}

impl<M: ManageConnection> Deref for PooledConnection<M> {
    type Target = M::Connection;
    fn deref(&self) -> &M::Connection {
        self.pooled()
    }
}

impl<M: ManageConnection> DerefMut for PooledConnection<M> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        self.conn
            .as_mut()
            .expect("the connection is present until the guard is consumed")
    }
}

impl<M: ManageConnection> Drop for PooledConnection<M> {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else { return };
        if self.pool.is_interrupted(conn.id()) {
            // The pool closes it anyway: no reset, which could talk through
            // a socket that is no longer ours (a clear that interrupted, or
            // a fork: see `Pool::reset_after_fork`).
            self.pool.check_in(conn);
            return;
        }
        if self.broken || self.pool.manager().is_broken(&mut conn) {
            conn.mark_errored();
            self.pool.check_in(conn);
            return;
        }
        if !M::RESETS {
            // Nothing to reset: no task, no allocation.
            self.pool.check_in(conn);
            return;
        }
        let pool = self.pool.clone();
        let mut task: Task = Box::pin(async move {
            if pool.manager().reset(&mut conn).await.is_err() {
                conn.mark_errored();
            }
            pool.check_in(conn);
        });
        // Most resets are done at once (the default does nothing): then the
        // connection is back before `drop` returns. One that has to wait
        // goes on in a task; it is polled again there with a real waker.
        if task
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
        {
            self.pool.spawn(task);
        }
    }
}

impl<M: ManageConnection> fmt::Debug for PooledConnection<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledConnection")
            .field("connection_id", &self.conn.as_ref().map(|c| c.id()))
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}
