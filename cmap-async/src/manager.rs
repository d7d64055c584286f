//! The connection manager: how to make, check and reset one connection.

use std::future::Future;
use std::time::Instant;

use cmap_core::{Address, EstablishErrorKind, ServiceId};

/// Makes and looks after the connections of one pool.
///
/// [`connect`](ManageConnection::connect) and
/// [`classify`](ManageConnection::classify) are required. The hooks run
/// at these points:
///
/// | hook | when | on failure |
/// | --- | --- | --- |
/// | [`connect`](ManageConnection::connect) (through [`connect_until`](ManageConnection::connect_until)) | the core asks for a connection (a checkout needs one, or `minPoolSize`) | as [`classify`](ManageConnection::classify) says: a network failure (labelled `SystemOverloadedError`) leaves the pool ready and retrying with backoff while checkouts keep waiting; any other failure fails the checkout that asked with `ConnectionError` and clears the pool |
/// | [`check`](ManageConnection::check) | before a connection is handed out (unless [`CHECKS`](ManageConnection::CHECKS) is `false`) | it is closed and the checkout tries another one |
/// | [`is_broken`](ManageConnection::is_broken) | when a guard is dropped | it is closed (reason `error`) instead of being pooled |
/// | [`reset`](ManageConnection::reset) | after `is_broken`, before it is pooled again (unless [`RESETS`](ManageConnection::RESETS) is `false`), bounded by the builder's `reset_timeout` | it is closed (reason `error`) |
/// | [`service_id`](ManageConnection::service_id) | right after `connect`, in load-balanced mode | - |
///
/// A hook that panics is caught and counts as failed, as the table says
/// (a panicking `connect` is a failure of kind `Other`; a panicking
/// `is_broken` says broken): see [`Panicked`](crate::Panicked).
///
/// `Self::Error` reaches the user: it is the `source` of a
/// [`GetError`](crate::GetError) and the `error` field of the
/// "Connection closed" log message, so its `Display` must not contain
/// credentials.
///
/// # Example
///
/// A manager of plain TCP connections (`cmap-tokio` has runnable ones,
/// for TCP and for PostgreSQL):
///
/// ```
/// use std::future::Future;
///
/// struct Tcp {
///     addr: std::net::SocketAddr,
/// }
///
/// impl cmap_async::ManageConnection for Tcp {
///     type Connection = tokio::net::TcpStream;
///     type Error = std::io::Error;
///
///     fn connect(&self) -> impl Future<Output = Result<Self::Connection, Self::Error>> + Send {
///         // TCP, then the handshake and authentication of a real protocol.
///         tokio::net::TcpStream::connect(self.addr)
///     }
///
///     fn classify(&self, error: &std::io::Error) -> cmap_async::EstablishErrorKind {
///         cmap_async::EstablishErrorKind::of_io(error)
///     }
/// }
/// ```
pub trait ManageConnection: Send + Sync + 'static {
    /// The connection.
    type Connection: Send + 'static;
    /// Why connecting, checking or resetting failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Opens a connection ready for use: TCP, handshake, authentication,
    /// and any per-connection setup. Runs in a task of its own; the pool
    /// bounds it with the builder's `connect_timeout` and drops it if the
    /// pool no longer wants the connection (a clear that interrupts, close).
    fn connect(&self) -> impl Future<Output = Result<Self::Connection, Self::Error>> + Send;

    /// [`connect`](ManageConnection::connect), told the deadline of the
    /// checkout the connection is for (`None`: started for `minPoolSize`,
    /// for a checkout without one, or one no longer waiting for it), on
    /// the runtime's clock; this is what the pool calls. The pool does not
    /// cut the connect at that deadline (another checkout may take the
    /// connection); a protocol whose operation timeout bounds the
    /// establishment it triggers (MongoDB's `timeoutMS`:
    /// `min(connectTimeoutMS, what is left)`) uses it. The default ignores
    /// it and calls `connect`.
    fn connect_until(
        &self,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Self::Connection, Self::Error>> + Send {
        let _ = deadline;
        self.connect()
    }

    /// What kind of failure a `connect` error was (spec: "Backpressure-
    /// enabled"). Required, so that no manager gets the pool's reaction
    /// wrong by omission:
    ///
    /// - [`Network`](EstablishErrorKind::Network): a network error or
    ///   timeout while connecting or during the protocol's first exchange
    ///   (MongoDB's `hello`, PostgreSQL's startup), TLS handshake I/O
    ///   errors included, and a server's own "too many connections"
    ///   answer. It may come from overload: the pool is not cleared, and
    ///   it retries with backoff while checkouts keep waiting.
    /// - [`Authentication`](EstablishErrorKind::Authentication): the
    ///   credentials were refused (or the connection broke during
    ///   authentication).
    /// - [`Other`](EstablishErrorKind::Other): a failure no retry will
    ///   mend: DNS, TLS certificate or hostname validation, a proxy, a
    ///   configuration error.
    ///
    /// For a manager whose error is an `std::io::Error`,
    /// [`EstablishErrorKind::of_io`] sorts the I/O error kinds.
    fn classify(&self, error: &Self::Error) -> EstablishErrorKind;

    /// Checks a connection just before it is handed out (default: nothing).
    /// A failure closes it and the checkout goes on with another one, unless
    /// the connection was made for this very checkout: then the checkout
    /// fails with [`GetError::CheckFailed`](crate::GetError::CheckFailed).
    /// It runs inside `get()`, so keep it cheap (look at the connection's
    /// state; a round trip to the server costs every checkout one).
    fn check(&self, conn: &mut Self::Connection) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = conn;
        std::future::ready(Ok(()))
    }

    /// [`check`](ManageConnection::check), told the checkout's deadline
    /// (`None`: no limit) on the runtime's clock; this is what the pool
    /// calls. The pool races the check against the deadline either way;
    /// the deadline lets a check that cannot be cut short while it runs
    /// (a blocking call) bound itself. The default ignores it and calls
    /// `check`.
    fn check_until(
        &self,
        conn: &mut Self::Connection,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = deadline;
        self.check(conn)
    }

    /// Whether [`check`](ManageConnection::check) does anything (default:
    /// `true`). A manager that keeps the default `check` (and
    /// `check_until`) can say `false`: a checkout then hands the connection
    /// out as the pool gives it, with no check future, no deadline timer
    /// and no panic guard (about a fifth of an uncontended check out and
    /// check in). With `false`, neither `check` nor `check_until` is
    /// called.
    const CHECKS: bool = true;

    /// Whether [`reset`](ManageConnection::reset) does anything (default:
    /// `true`). A manager that keeps the default `reset` can say `false`:
    /// a returned connection then goes straight back to the pool, without
    /// the heap-allocated task a reset needs (one allocation per check-in
    /// saved). With `false`, `reset` is never called.
    ///
    /// ```
    /// # use std::future::Future;
    /// struct Tcp(std::net::SocketAddr);
    ///
    /// impl cmap_async::ManageConnection for Tcp {
    ///     type Connection = std::net::TcpStream;
    ///     type Error = std::io::Error;
    ///     const RESETS: bool = false; // `reset` is not overridden
    ///
    ///     fn connect(&self) -> impl Future<Output = std::io::Result<std::net::TcpStream>> + Send {
    ///         std::future::ready(std::net::TcpStream::connect(self.0))
    ///     }
    ///
    ///     fn classify(&self, error: &std::io::Error) -> cmap_async::EstablishErrorKind {
    ///         cmap_async::EstablishErrorKind::of_io(error)
    ///     }
    /// }
    /// ```
    const RESETS: bool = true;

    /// Resets a connection that is being given back, before it is pooled
    /// again (default: nothing), such as rolling back an open transaction.
    /// It starts on the thread that drops the guard and, as soon as it has
    /// to wait, goes on in a spawned task; the connection is checked in
    /// when it is done. A failure closes it with reason `error`. Not called
    /// when [`RESETS`](ManageConnection::RESETS) is `false`.
    fn reset(&self, conn: &mut Self::Connection) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = conn;
        std::future::ready(Ok(()))
    }

    /// Whether a connection being given back is unusable (default: `false`),
    /// such as a client whose socket is closed. Called on every return, so
    /// it must be cheap and must not block.
    fn is_broken(&self, conn: &mut Self::Connection) -> bool {
        let _ = conn;
        false
    }

    /// The server this manager connects to, when it knows it (default:
    /// `None`): the pool takes it for its events and logs unless the
    /// builder's [`address`](crate::PoolBuilder::address) overrides it.
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
