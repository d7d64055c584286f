//! The connection manager of a pool for one thread: cmap-async's
//! `ManageConnection`, hook for hook, without `Send` or `Sync`.

use std::future::Future;
use std::time::Instant;

use cmap_core::{Address, EstablishErrorKind, ServiceId};

/// Makes and looks after the connections of one pool. The hooks and what
/// a failure does are those of `cmap_async::ManageConnection` (its table
/// says when each runs); here neither the manager, nor its connections,
/// nor its futures need be `Send`: they never leave the thread.
///
/// `Self::Error` must be `Send + Sync` all the same: the core shares an
/// establishment error with every checkout it fails
/// ([`cmap_core::EstablishError`] holds it in an `Arc`).
///
/// ```
/// use std::future::Future;
/// use std::rc::Rc;
///
/// /// Connections that are `Rc`s: not `Send`, and fine here.
/// struct Counters;
///
/// impl cmap_local::ManageConnection for Counters {
///     type Connection = Rc<u32>;
///     type Error = std::io::Error;
///     const CHECKS: bool = false;
///     const RESETS: bool = false;
///     fn connect(&self) -> impl Future<Output = Result<Rc<u32>, std::io::Error>> {
///         async { Ok(Rc::new(0)) }
///     }
///     fn classify(&self, e: &std::io::Error) -> cmap_local::EstablishErrorKind {
///         cmap_local::EstablishErrorKind::of_io(e)
///     }
/// }
/// ```
pub trait ManageConnection: 'static {
    /// The connection.
    type Connection: 'static;
    /// Why connecting, checking or resetting failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Opens a connection ready for use (TCP, handshake, authentication).
    /// Runs in a task of its own, bounded by the builder's
    /// `connect_timeout`; dropped if the pool no longer wants it.
    fn connect(&self) -> impl Future<Output = Result<Self::Connection, Self::Error>>;

    /// [`connect`](ManageConnection::connect), told the deadline of the
    /// checkout the connection is for (`None`: for `minPoolSize`, a
    /// checkout without one, or one no longer waiting for it); this is
    /// what the pool calls, as cmap-async's `connect_until`. The default
    /// ignores it and calls `connect`.
    fn connect_until(
        &self,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Self::Connection, Self::Error>> {
        let _ = deadline;
        self.connect()
    }

    /// What kind of failure a `connect` error was: `Network` (the pool
    /// retries with backoff, checkouts keep waiting), `Authentication` or
    /// `Other` (the pool is cleared).
    fn classify(&self, error: &Self::Error) -> EstablishErrorKind;

    /// Checks a connection just before it is handed out (default:
    /// nothing), bounded by the checkout's deadline (`None`: no limit).
    /// A failure closes it, and the checkout goes on with another one
    /// unless this one was made for it.
    fn check(
        &self,
        conn: &mut Self::Connection,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<(), Self::Error>> {
        let _ = (conn, deadline);
        std::future::ready(Ok(()))
    }

    /// Whether [`check`](Self::check) does anything (default `true`);
    /// `false` hands connections out with no check future at all.
    const CHECKS: bool = true;

    /// Whether [`reset`](Self::reset) does anything (default `true`);
    /// `false` pools a returned connection at once.
    const RESETS: bool = true;

    /// Resets a connection given back, before it is pooled again (default:
    /// nothing), bounded by the builder's `reset_timeout`. A failure
    /// closes it (reason `error`).
    fn reset(&self, conn: &mut Self::Connection) -> impl Future<Output = Result<(), Self::Error>> {
        let _ = conn;
        std::future::ready(Ok(()))
    }

    /// Whether a connection given back is unusable (default `false`);
    /// cheap and non-blocking, it runs on every return.
    fn is_broken(&self, conn: &mut Self::Connection) -> bool {
        let _ = conn;
        false
    }

    /// The server, when the manager knows it (default `None`).
    fn address(&self) -> Option<Address> {
        None
    }

    /// The service a new connection reached, in load-balanced mode
    /// (default `None`).
    fn service_id(&self, conn: &Self::Connection) -> Option<ServiceId> {
        let _ = conn;
        None
    }
}
