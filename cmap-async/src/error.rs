//! The errors of the async pool: a failed `get()`, a bad builder, and the
//! errors the pool itself gives to the core for a failed establishment.

use std::error::Error as StdError;
use std::time::Duration;

use cmap_core::{CheckOutError, OptionsError, SharedError};

/// Why [`Pool::get`](crate::Pool::get) gave no connection.
///
/// # Example
///
/// ```
/// # use cmap_async::{GetError, ManageConnection, Pool, Runtime};
/// async fn query<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) -> Result<(), GetError> {
///     match pool.get().await {
///         Ok(conn) => { /* use it */ Ok(()) }
///         // A cleared pool: the operation may be retried as is.
///         Err(e) if e.is_retryable() => Ok(()),
///         Err(e) => {
///             // For a server that refused, the real error is the source.
///             eprintln!("{e}: {:?}", e.connection_error().map(|c| c.to_string()));
///             Err(e)
///         }
///     }
/// }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GetError {
    /// The pool gave no connection (spec: "Connection Pool Errors"):
    /// `PoolClosedError`, a retryable `PoolClearedError`,
    /// `WaitQueueTimeoutError`, or `ConnectionError` with the error that
    /// establishing the connection made for this checkout met.
    #[error(transparent)]
    CheckOut(#[from] CheckOutError),
    /// [`ManageConnection::check`](crate::ManageConnection::check) refused a
    /// connection established for this very checkout.
    #[error("a new connection failed its check: {0}")]
    CheckFailed(#[source] SharedError),
}

impl GetError {
    /// Whether the operation may be retried as is (a cleared pool, or an
    /// establishment error labelled `RetryableError`).
    pub fn is_retryable(&self) -> bool {
        matches!(self, GetError::CheckOut(e) if e.is_retryable())
    }

    /// Whether it carries the error label `label` (`SystemOverloadedError`,
    /// `RetryableError`: spec "Backpressure-enabled").
    pub fn has_label(&self, label: &str) -> bool {
        matches!(self, GetError::CheckOut(e) if e.has_label(label))
    }

    /// Whether the wait-queue timeout (or `get_timeout`'s) elapsed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, GetError::CheckOut(CheckOutError::WaitQueueTimeout { .. }))
    }

    /// The core's checkout error, if that is what this is.
    pub fn check_out_error(&self) -> Option<&CheckOutError> {
        match self {
            GetError::CheckOut(e) => Some(e),
            GetError::CheckFailed(_) => None,
        }
    }

    /// The error the manager returned, when establishing or checking a
    /// connection failed: downcast it to the manager's `Error` type.
    pub fn connection_error(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match self {
            GetError::CheckOut(CheckOutError::ConnectionError { source, .. }) => Some(source.get_ref()),
            GetError::CheckFailed(source) => Some(&**source),
            _ => None,
        }
    }
}

/// Why [`PoolBuilder::build`](crate::PoolBuilder::build) refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No address was given, and the manager knows none; events and logs
    /// need one.
    #[error("the pool needs the address of its server (PoolBuilder::address, or a manager that knows it)")]
    MissingAddress,
    /// The address is not `host:port`, `[v6]:port`, a host or a path.
    #[error("invalid server address {given:?}: {reason}")]
    Address {
        /// The address as given.
        given: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An invalid pool option.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// [`PoolBuilder::build_and_wait`](crate::PoolBuilder::build_and_wait):
    /// the pool did not open its connections in time (the server refused
    /// or did not answer); the pool was closed.
    #[error(transparent)]
    NotReady(#[from] crate::NotReadyError),
}

/// The error establishment fails with when `connect` takes longer than the
/// builder's `connect_timeout`. It reaches the user as the source of
/// [`GetError::CheckOut`] with `ConnectionError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("connecting took longer than {after:?}")]
pub struct ConnectTimeoutError {
    /// The timeout.
    pub after: Duration,
}

/// The error establishment fails with when its task is dropped before it
/// finished, such as when the runtime shuts down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the task establishing the connection was dropped before it finished")]
pub struct EstablishDroppedError;
