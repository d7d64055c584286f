//! Errors. Two kinds, kept apart on purpose:
//!
//! - [`CheckOutError`]: the outcome of a checkout that did not get a
//!   connection. It reaches the waiter through [`crate::Action::Fail`], never
//!   as an `Err` of a `handle_*` call, and carries the spec's message.
//! - [`UsageError`] and [`OptionsError`]: misuse by the driver or the user
//!   (an unknown id, a connection from another pool, a bad option value).
//!
//! The errors of one module only live beside it: [`OptionsError`] in
//! `options.rs`, `ConnectionStringError` in `connection_string.rs`.

use std::fmt;
use std::sync::Arc;

use std::time::Duration;

use crate::connection::{ConnectionId, Pooled, WaiterId};
use crate::options::OptionsError;
use crate::stats::Status;
use crate::Address;

/// Any error, shared: the manager's own error inside an [`EstablishError`].
pub type SharedError = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// The backpressure label the spec adds to establishment errors that may
/// come from an overloaded server (spec: "Backpressure-enabled").
pub const SYSTEM_OVERLOADED_ERROR: &str = "SystemOverloadedError";
/// The label that says the operation may be retried as is.
pub const RETRYABLE_ERROR: &str = "RetryableError";

/// What kind of failure an establishment error was. It decides the
/// error's labels and how the pool reacts (spec: "Establishing a
/// Connection" and "Backpressure-enabled").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum EstablishErrorKind {
    /// A network error or network timeout while connecting or during the
    /// `hello` (an I/O error during the TLS handshake included): it may
    /// come from an overloaded server. Labelled `SystemOverloadedError`
    /// and `RetryableError`; the pool is not cleared.
    Network,
    /// The authentication step after the `hello` failed (a network error
    /// during it included). No labels; the pool reacts as
    /// [`EstablishFailure`](crate::EstablishFailure) says.
    Authentication,
    /// A failure that cannot come from overload: a DNS lookup, TLS
    /// certificate or hostname validation, a SOCKS5 proxy, an error the
    /// server answered the `hello` with. No labels; the pool reacts as
    /// [`EstablishFailure`](crate::EstablishFailure) says.
    Other,
}

impl EstablishErrorKind {
    /// The kind of an I/O error met while connecting or during the
    /// `hello`: a refused, reset, aborted or timed-out connection, an
    /// unexpected end of stream or a broken pipe is [`Network`]
    /// (possibly overload, TLS handshake I/O included); anything else
    /// (an address that does not resolve, a permission error, invalid
    /// data such as a TLS certificate refused) is [`Other`].
    ///
    /// [`Network`]: EstablishErrorKind::Network
    /// [`Other`]: EstablishErrorKind::Other
    ///
    /// ```
    /// use std::io::{Error, ErrorKind};
    /// use cmap_core::EstablishErrorKind;
    /// let refused = Error::from(ErrorKind::ConnectionRefused);
    /// assert_eq!(EstablishErrorKind::of_io(&refused), EstablishErrorKind::Network);
    /// let bad_cert = Error::new(ErrorKind::InvalidData, "invalid peer certificate");
    /// assert_eq!(EstablishErrorKind::of_io(&bad_cert), EstablishErrorKind::Other);
    /// ```
    pub fn of_io(error: &std::io::Error) -> EstablishErrorKind {
        use std::io::ErrorKind as Io;
        match error.kind() {
            Io::ConnectionRefused
            | Io::ConnectionReset
            | Io::ConnectionAborted
            | Io::NotConnected
            | Io::TimedOut
            | Io::UnexpectedEof
            | Io::BrokenPipe
            | Io::WouldBlock
            | Io::Interrupted => EstablishErrorKind::Network,
            _ => EstablishErrorKind::Other,
        }
    }

    /// The kind of an error whose chain of sources may hold an
    /// `std::io::Error` (a driver's error wrapping the socket's): the I/O
    /// error's kind by [`of_io`](Self::of_io), or
    /// [`Other`](EstablishErrorKind::Other) if there is none.
    ///
    /// ```
    /// use cmap_core::EstablishErrorKind;
    /// #[derive(Debug)]
    /// struct Driver(std::io::Error);
    /// impl std::fmt::Display for Driver {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         f.write_str("error connecting to server")
    ///     }
    /// }
    /// impl std::error::Error for Driver {
    ///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
    ///         Some(&self.0)
    ///     }
    /// }
    /// let reset = Driver(std::io::ErrorKind::ConnectionReset.into());
    /// assert_eq!(EstablishErrorKind::of_chain(&reset), EstablishErrorKind::Network);
    /// ```
    pub fn of_chain(error: &(dyn std::error::Error + 'static)) -> EstablishErrorKind {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(io) = error.downcast_ref::<std::io::Error>() {
                return EstablishErrorKind::of_io(io);
            }
            next = error.source();
        }
        EstablishErrorKind::Other
    }

    /// The labels an error of this kind carries.
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            EstablishErrorKind::Network => &[SYSTEM_OVERLOADED_ERROR, RETRYABLE_ERROR],
            EstablishErrorKind::Authentication | EstablishErrorKind::Other => &[],
        }
    }
}

/// Why establishing a connection failed: the manager's error and its
/// [kind](EstablishErrorKind), which gives its backpressure labels.
/// Cheap to clone: one failure reaches its checkout, its
/// `ConnectionClosed` event and the clear it may cause.
///
/// Its `Display` is the manager's error, followed by the labels when
/// there are any; its `source()` is the manager's error, so that a walk
/// down the chain of a failed checkout finds it.
///
/// ```
/// use cmap_core::{EstablishError, EstablishErrorKind};
/// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
/// let error = EstablishError::network(refused);
/// assert!(error.has_label("SystemOverloadedError") && error.is_retryable());
/// assert_eq!(error.kind(), EstablishErrorKind::Network);
/// assert!(error.downcast_ref::<std::io::Error>().is_some());
/// assert!(error.to_string().ends_with("[SystemOverloadedError, RetryableError]"));
/// ```
#[derive(Clone)]
pub struct EstablishError(Arc<Labelled>);

/// Behind one thin pointer, so that an event carrying one stays small.
struct Labelled {
    kind: EstablishErrorKind,
    error: SharedError,
}

impl EstablishError {
    /// An error of `kind` around the manager's `error`.
    pub fn new(
        kind: EstablishErrorKind,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> EstablishError {
        EstablishError::shared(kind, Arc::new(error))
    }

    /// [`new`](Self::new) for an error already shared.
    pub fn shared(kind: EstablishErrorKind, error: SharedError) -> EstablishError {
        EstablishError(Arc::new(Labelled { kind, error }))
    }

    /// Helper for [`EstablishErrorKind::Network`].
    pub fn network(error: impl std::error::Error + Send + Sync + 'static) -> EstablishError {
        EstablishError::new(EstablishErrorKind::Network, error)
    }

    /// Helper for [`EstablishErrorKind::Authentication`].
    pub fn authentication(error: impl std::error::Error + Send + Sync + 'static) -> EstablishError {
        EstablishError::new(EstablishErrorKind::Authentication, error)
    }

    /// Helper for [`EstablishErrorKind::Other`].
    pub fn other(error: impl std::error::Error + Send + Sync + 'static) -> EstablishError {
        EstablishError::new(EstablishErrorKind::Other, error)
    }

    /// The kind of failure.
    pub fn kind(&self) -> EstablishErrorKind {
        self.0.kind
    }

    /// Its labels: `SystemOverloadedError` and `RetryableError` for a
    /// network failure, none otherwise.
    pub fn labels(&self) -> &'static [&'static str] {
        self.0.kind.labels()
    }

    /// Whether it carries `label`.
    pub fn has_label(&self, label: &str) -> bool {
        self.labels().contains(&label)
    }

    /// Whether it may come from an overloaded server (it carries
    /// `SystemOverloadedError`): such a failure never clears the pool.
    pub fn is_overload(&self) -> bool {
        self.0.kind == EstablishErrorKind::Network
    }

    /// Whether the operation may be retried as is (`RetryableError`).
    pub fn is_retryable(&self) -> bool {
        self.has_label(RETRYABLE_ERROR)
    }

    /// The manager's error itself.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0.error
    }

    /// The manager's error, if it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.0.error.downcast_ref::<T>()
    }
}

impl fmt::Debug for EstablishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EstablishError")
            .field("kind", &self.0.kind)
            .field("labels", &self.labels())
            .field("error", &self.0.error)
            .finish()
    }
}

impl EstablishError {
    /// Its labels as the messages show them: ` [A, B]`, or nothing.
    fn write_labels(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [first, rest @ ..] = self.labels() {
            write!(f, " [{first}")?;
            for label in rest {
                write!(f, ", {label}")?;
            }
            f.write_str("]")?;
        }
        Ok(())
    }
}

/// The manager's error, then each cause in its `source()` chain whose
/// text is not already shown (a driver often keeps the server's own
/// reason there: tokio-postgres's "db error" has "FATAL: database ...
/// does not exist" behind it), then the labels: the root cause is always
/// in the message, each link once.
impl fmt::Display for EstablishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_chain(f, &*self.0.error)?;
        self.write_labels(f)
    }
}

/// Writes `error`, then each cause of its chain whose text the message
/// does not hold yet, `: `-separated, at most [`MAX_CAUSES`] deep.
fn write_chain(f: &mut fmt::Formatter<'_>, error: &(dyn std::error::Error + 'static)) -> fmt::Result {
    let mut shown = error.to_string();
    f.write_str(&shown)?;
    let mut cause = error.source();
    for _ in 0..MAX_CAUSES {
        let Some(c) = cause else { break };
        let text = c.to_string();
        if !shown.contains(&text) {
            write!(f, ": {text}")?;
            shown.push_str(&text);
        }
        cause = c.source();
    }
    Ok(())
}

impl std::error::Error for EstablishError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0.error)
    }
}

/// Two are equal when they are the same failure (clones of one error).
impl PartialEq for EstablishError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for EstablishError {}

/// The most causes of an establishment error a timeout's message shows.
const MAX_CAUSES: usize = 8;

/// The state of the pool when a checkout timed out, for its message
/// (after HikariCP's "total=10, active=10, idle=0, waiting=37").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeoutContext {
    /// How long the checkout waited.
    pub waited: Duration,
    /// `maxPoolSize` (0: no limit).
    pub max_pool_size: u32,
    /// The pool's counts at that instant; `waiting` counts the checkout
    /// that timed out.
    pub status: Status,
    /// The last establishment failure, while the pool has had no success
    /// since: why no new connection came.
    pub last_error: Option<EstablishError>,
}

impl fmt::Display for TimeoutContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.status;
        write!(
            f,
            " after {} ms (maxPoolSize {}, total {}, idle {}, in use {}, connecting {}, waiting {})",
            self.waited.as_millis(),
            self.max_pool_size,
            s.total,
            s.available,
            s.in_use,
            s.pending,
            s.waiting
        )?;
        if let Some(error) = &self.last_error {
            // A timeout has no `source()`: its text is the only place the
            // cause can show.
            write!(f, "; the last connection attempt failed: {error}")?;
        }
        Ok(())
    }
}

/// Why a checkout failed. Messages are the spec's ("Connection Pool
/// Errors").
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CheckOutError {
    /// `PoolClosedError`: the pool was closed.
    #[error("Attempted to check out a Connection from closed connection pool")]
    PoolClosed {
        /// The pool's address.
        address: Address,
    },
    /// `PoolClearedError`: the pool is paused, or was cleared while the
    /// checkout waited. Retryable.
    #[error("Connection pool for {address} was cleared because another operation failed with: {cause}")]
    PoolCleared {
        /// The pool's address.
        address: Address,
        /// What cleared the pool.
        #[source]
        cause: ClearCause,
    },
    /// `WaitQueueTimeoutError`: no connection within the checkout's
    /// timeout. The message is the spec's, followed by the pool's state
    /// and the last establishment failure.
    #[error("{WAIT_QUEUE_TIMEOUT}{context}")]
    WaitQueueTimeout {
        /// The pool's address.
        address: Address,
        /// The pool's state when it timed out (boxed: rare and large).
        context: Box<TimeoutContext>,
    },
    /// Establishing the connection made for this checkout failed.
    #[error("Connection to {address} could not be established: {source}")]
    ConnectionError {
        /// The pool's address.
        address: Address,
        /// The connection whose establishment failed.
        connection_id: ConnectionId,
        /// The establishment error itself, with its labels.
        source: EstablishError,
    },
}

const WAIT_QUEUE_TIMEOUT: &str = "Timed out while checking out a Connection from connection pool";

impl CheckOutError {
    /// Whether the operation may be retried as is: a cleared pool is
    /// retryable and must not mark the server unknown (spec: "Clearing a
    /// Connection Pool").
    /// An establishment error labelled `RetryableError` is retryable too.
    pub fn is_retryable(&self) -> bool {
        match self {
            CheckOutError::PoolCleared { .. } => true,
            CheckOutError::ConnectionError { source, .. } => source.is_retryable(),
            _ => false,
        }
    }

    /// The error's labels: those of the establishment error behind it.
    pub fn labels(&self) -> &'static [&'static str] {
        match self {
            CheckOutError::ConnectionError { source, .. } => source.labels(),
            _ => &[],
        }
    }

    /// Whether it carries `label` (`SystemOverloadedError`,
    /// `RetryableError`).
    pub fn has_label(&self, label: &str) -> bool {
        self.labels().contains(&label)
    }

    /// The spec's message for this error, without the context this crate
    /// adds (the pool's state after a timeout).
    pub fn spec_message(&self) -> String {
        match self {
            CheckOutError::WaitQueueTimeout { .. } => WAIT_QUEUE_TIMEOUT.to_owned(),
            other => other.to_string(),
        }
    }

    /// The spec's name of the error type (`PoolClosedError`, ...).
    pub fn spec_name(&self) -> &'static str {
        match self {
            CheckOutError::PoolClosed { .. } => "PoolClosedError",
            CheckOutError::PoolCleared { .. } => "PoolClearedError",
            CheckOutError::WaitQueueTimeout { .. } => "WaitQueueTimeoutError",
            CheckOutError::ConnectionError { .. } => "ConnectionError",
        }
    }
}

/// What put the pool in the paused state. As an error, its source is the
/// establishment failure that cleared the pool, if that is the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClearCause {
    /// Pools start paused until they are marked ready.
    NeverReady,
    /// `clear()` was called; the text says why, when the caller said.
    Cleared(Option<Arc<str>>),
    /// Establishing a connection failed, and the pool reacted by clearing.
    EstablishFailed(EstablishError),
    /// An in-use connection was interrupted by a clear with
    /// `interruptInUseConnections`.
    Interrupted,
    /// The pool was reset in a forked child process.
    Forked,
}

impl fmt::Display for ClearCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClearCause::NeverReady => f.write_str("the pool has not been marked ready yet"),
            ClearCause::Cleared(Some(why)) => f.write_str(why),
            ClearCause::Cleared(None) => f.write_str("the pool was cleared"),
            ClearCause::EstablishFailed(err) => fmt::Display::fmt(err, f),
            ClearCause::Interrupted => f.write_str("server monitor timeout"),
            ClearCause::Forked => f.write_str("the process forked; connections belong to the parent"),
        }
    }
}

impl std::error::Error for ClearCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClearCause::EstablishFailed(error) => Some(error),
            _ => None,
        }
    }
}

/// The error an operation on an interrupted in-use connection should fail
/// with (spec: "Connection to \<pool address\> interrupted due to server
/// monitor timeout"). Retryable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Connection to {address} interrupted due to server monitor timeout")]
pub struct InterruptedError {
    /// The pool's address.
    pub address: Address,
}

impl InterruptedError {
    /// Always retryable (spec: operations on interrupted connections "MUST
    /// fail with a retryable error").
    pub fn is_retryable(&self) -> bool {
        true
    }

    /// The spec's error type for it: a `PoolClearedError`.
    pub fn spec_name(&self) -> &'static str {
        "PoolClearedError"
    }
}

/// Misuse of the core by its driver or user. The pool's state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// No pending connection has this id.
    #[error("no pending connection with id {0}")]
    UnknownConnection(ConnectionId),
    /// No queued checkout has this id (it was served, failed or cancelled).
    #[error("no queued checkout with id {0}")]
    UnknownWaiter(WaiterId),
    /// A load-balanced pool can only be cleared for a service id, and a
    /// non-load-balanced pool only without one (spec: "Clearing a
    /// Connection Pool").
    #[error("{0}")]
    ClearMode(&'static str),
    /// A closed pool cannot be marked ready again (spec: `ready()`).
    #[error("the pool is closed and cannot be marked ready")]
    PoolClosed,
    /// Forcing the connections in use closed needs a closed pool.
    #[error("the pool is not closed: close it before forcing its connections closed")]
    NotClosed,
    /// A closed pool cannot be resized.
    #[error("the pool is closed and cannot be resized")]
    ResizeClosed,
    /// The sizes of a resize are invalid (minPoolSize above a non-zero
    /// maxPoolSize); the pool keeps its sizes.
    #[error("invalid resize: {0}")]
    InvalidSize(OptionsError),
}

/// A connection was handed to a pool that cannot take it; the connection is
/// returned untouched so nothing is lost.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum CheckInError<C> {
    /// The connection was created by another pool.
    #[error("connection {} was checked in to a pool that did not create it", .0.id())]
    WrongPool(Pooled<C>),
}

impl<C> fmt::Debug for CheckInError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckInError::WrongPool(p) => f.debug_tuple("WrongPool").field(&p.id()).finish(),
        }
    }
}

impl<C> CheckInError<C> {
    /// Takes back the connection that was refused.
    pub fn into_connection(self) -> Pooled<C> {
        match self {
            CheckInError::WrongPool(p) => p,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that keeps its cause in `source()` only, as tokio-postgres's does.
    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("error connecting to server")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    fn context(error: EstablishError) -> String {
        TimeoutContext {
            waited: Duration::from_millis(5000),
            max_pool_size: 10,
            status: Status {
                state: crate::PoolState::Ready,
                generation: 0,
                total: 0,
                available: 0,
                pending: 0,
                in_use: 0,
                waiting: 1,
            },
            last_error: Some(error),
        }
        .to_string()
    }

    #[test]
    fn a_timeout_names_the_cause_kept_in_source() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let text = context(EstablishError::network(Outer(refused)));
        assert!(
            text.ends_with(
                "; the last connection attempt failed: error connecting to server: Connection refused \
                 [SystemOverloadedError, RetryableError]"
            ),
            "{text}"
        );
    }

    #[test]
    fn an_establishment_error_shows_its_root_cause_once() {
        /// `text`, with `cause` behind it.
        #[derive(Debug)]
        struct Link(&'static str, Option<Box<Link>>);
        impl fmt::Display for Link {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Link {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|l| l as _)
            }
        }
        // tokio-postgres's shape: "db error" wraps the server's reason.
        let root = Link("FATAL: database \"nosuchdb\" does not exist", None);
        let chain = Link(
            "postgres: db error",
            Some(Box::new(Link("db error", Some(Box::new(root))))),
        );
        let error = EstablishError::new(EstablishErrorKind::Other, chain);
        assert_eq!(
            error.to_string(),
            "postgres: db error: FATAL: database \"nosuchdb\" does not exist"
        );
        let checkout = CheckOutError::ConnectionError {
            address: Address::new("db", 5432),
            connection_id: ConnectionId(1),
            source: error,
        };
        assert_eq!(
            checkout.to_string(),
            "Connection to db:5432 could not be established: postgres: db error: \
             FATAL: database \"nosuchdb\" does not exist"
        );
    }

    #[test]
    fn a_cause_already_in_the_text_is_not_repeated() {
        #[derive(Debug)]
        struct Both(std::io::Error);
        impl fmt::Display for Both {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "error connecting to server: {}", self.0)
            }
        }
        impl std::error::Error for Both {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let text = context(EstablishError::authentication(Both(refused)));
        assert!(
            text.ends_with(
                "; the last connection attempt failed: error connecting to server: Connection refused"
            ),
            "{text}"
        );
    }
}
