//! The synchronous connection manager.

use std::time::{Duration, Instant};

use cmap_async::{Address, EstablishErrorKind, ServiceId};

/// Makes and looks after the connections of one pool, synchronously.
///
/// [`connect`](ManageConnection::connect) and
/// [`classify`](ManageConnection::classify) are required. The hooks run
/// at these points, and on these threads:
///
/// | hook | when | thread | on failure |
/// | --- | --- | --- | --- |
/// | [`connect`](ManageConnection::connect) | the pool needs a connection (a checkout, `minPoolSize`) | a thread of its own, never the caller's, never under the pool's lock | as [`classify`](ManageConnection::classify) says: a network failure leaves the pool ready and retrying while checkouts keep waiting; any other fails the checkout that asked with `ConnectionError` and clears the pool |
/// | [`check`](ManageConnection::check) | before a connection is handed out | the thread in `get()` | it is closed and the checkout tries another one |
/// | [`is_broken`](ManageConnection::is_broken) | when a guard is dropped | the dropping thread | it is closed (reason `error`) instead of being pooled |
/// | [`reset`](ManageConnection::reset) | after `is_broken`, before it is pooled again | the dropping thread, before `drop` returns | it is closed (reason `error`) |
/// | [`service_id`](ManageConnection::service_id) | right after `connect`, in load-balanced mode | the connect's thread | - |
///
/// The builder's `connect_timeout` (10 s by default) bounds `connect`:
/// past it, the checkout fails with `ConnectTimeoutError` and the call is
/// left to finish on its thread, its connection then dropped. A connect
/// that can hang should still carry its own timeout (such as
/// `TcpStream::connect_timeout`), so that its thread comes free.
///
/// `Self::Error` reaches the user: it is the `source` of a
/// [`GetError`](crate::GetError) and the `error` field of the
/// "Connection closed" log message, so its `Display` must not contain
/// credentials.
///
/// An example: the [crate docs](crate).
pub trait ManageConnection: Send + Sync + 'static {
    /// The connection.
    type Connection: Send + 'static;
    /// Why connecting, checking or resetting failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Opens a connection ready for use: TCP, handshake, authentication,
    /// and any per-connection setup. Runs on a thread of its own.
    fn connect(&self) -> Result<Self::Connection, Self::Error>;

    /// [`connect`](Self::connect) for a checkout due by `deadline`
    /// (`None`: for `minPoolSize`, or a checkout with no deadline); this
    /// is what the pool calls. A protocol whose connect has a deadline of
    /// its own (MongoDB's `timeoutMS`: `min(connectTimeoutMS, what is
    /// left)`) uses it. The default ignores it and calls `connect`.
    fn connect_until(&self, deadline: Option<Instant>) -> Result<Self::Connection, Self::Error> {
        let _ = deadline;
        self.connect()
    }

    /// What kind of failure a `connect` error was: a network error or
    /// timeout (possibly overload: the pool keeps retrying and checkouts
    /// keep waiting), an authentication failure, or another failure no
    /// retry will mend. See
    /// [`cmap_async::ManageConnection::classify`]; for an `std::io::Error`,
    /// [`EstablishErrorKind::of_io`] sorts the kinds.
    fn classify(&self, error: &Self::Error) -> EstablishErrorKind;

    /// Checks a connection just before it is handed out (default:
    /// nothing). A failure closes it and the checkout goes on with another
    /// one, unless the connection was made for this very checkout: then
    /// the checkout fails with [`GetError::CheckFailed`](crate::GetError::CheckFailed).
    /// It runs inside `get()`, so keep it cheap.
    fn check(&self, conn: &mut Self::Connection) -> Result<(), Self::Error> {
        let _ = conn;
        Ok(())
    }

    /// [`check`](Self::check) for a checkout with `remaining` time left
    /// before its deadline (`None`: no limit); this is what the pool
    /// calls. A synchronous call cannot be cut short while it runs, so a
    /// check that talks to the server should bound itself by `remaining`
    /// (with the `postgres` crate, `Client::is_valid(remaining)`) to keep
    /// `get()` within its deadline. The default ignores it and calls
    /// `check`.
    fn check_within(
        &self,
        conn: &mut Self::Connection,
        remaining: Option<Duration>,
    ) -> Result<(), Self::Error> {
        let _ = remaining;
        self.check(conn)
    }

    /// Whether [`check`](Self::check) does anything (default: `true`). A
    /// manager that keeps the default `check` (and `check_within`) can say
    /// `false`: a checkout then hands the connection out without calling
    /// either. See [`cmap_async::ManageConnection::CHECKS`].
    const CHECKS: bool = true;

    /// Whether [`reset`](ManageConnection::reset) does anything (default:
    /// `true`). A manager that keeps the default `reset` can say `false`:
    /// a returned connection then goes straight back to the pool without
    /// the heap-allocated task a reset needs. With `false`, `reset` is
    /// never called.
    const RESETS: bool = true;

    /// Resets a connection that is being given back, before it is pooled
    /// again (default: nothing), such as rolling back an open transaction.
    /// It runs on the thread that drops the guard, before `drop` returns.
    /// A failure closes it with reason `error`. Not called when
    /// [`RESETS`](ManageConnection::RESETS) is `false`.
    fn reset(&self, conn: &mut Self::Connection) -> Result<(), Self::Error> {
        let _ = conn;
        Ok(())
    }

    /// Whether a connection being given back is unusable (default:
    /// `false`). Called on every return, so it must be cheap.
    fn is_broken(&self, conn: &mut Self::Connection) -> bool {
        let _ = conn;
        false
    }

    /// The server this manager connects to, when it knows it (default:
    /// `None`): the pool takes it for its events and logs unless the
    /// builder's `address` overrides it.
    fn address(&self) -> Option<Address> {
        None
    }

    /// The service a new connection reached, from its handshake, for
    /// load-balanced mode (default: `None`).
    fn service_id(&self, conn: &Self::Connection) -> Option<ServiceId> {
        let _ = conn;
        None
    }
}
