//! Errors. Two kinds, kept apart on purpose:
//!
//! - [`CheckOutError`]: the outcome of a checkout that did not get a
//!   connection. It reaches the waiter through [`crate::Action::Fail`], never
//!   as an `Err` of a `handle_*` call, and carries the spec's message.
//! - [`UsageError`] and [`OptionsError`]: misuse by the driver or the user
//!   (an unknown id, a connection from another pool, a bad option value).

use std::fmt;
use std::sync::Arc;

use crate::connection::{ConnectionId, Pooled, WaiterId};
use crate::Address;

/// An error from establishing a connection (connect, handshake, auth), shared
/// because one failure can reach a waiter and the clear it causes.
pub type SharedError = Arc<dyn std::error::Error + Send + Sync + 'static>;

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
        cause: ClearCause,
    },
    /// `WaitQueueTimeoutError`: no connection within the checkout's timeout.
    #[error("Timed out while checking out a Connection from connection pool")]
    WaitQueueTimeout {
        /// The pool's address.
        address: Address,
    },
    /// Establishing the connection made for this checkout failed.
    #[error("Connection to {address} could not be established: {source}")]
    ConnectionError {
        /// The pool's address.
        address: Address,
        /// The connection whose establishment failed.
        connection_id: ConnectionId,
        /// The establishment error itself.
        source: SharedError,
    },
}

impl CheckOutError {
    /// Whether the operation may be retried as is: a cleared pool is
    /// retryable and must not mark the server unknown (spec: "Clearing a
    /// Connection Pool").
    pub fn is_retryable(&self) -> bool {
        matches!(self, CheckOutError::PoolCleared { .. })
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

/// What put the pool in the paused state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClearCause {
    /// Pools start paused until they are marked ready.
    NeverReady,
    /// `clear()` was called; the text says why, when the caller said.
    Cleared(Option<Arc<str>>),
    /// Establishing a connection failed, and the pool reacted by clearing.
    EstablishFailed(Arc<str>),
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
            ClearCause::EstablishFailed(err) => f.write_str(err),
            ClearCause::Interrupted => f.write_str("server monitor timeout"),
            ClearCause::Forked => f.write_str("the process forked; connections belong to the parent"),
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

/// An invalid pool option, naming the option and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// The value is out of the option's range or not a number.
    #[error("invalid value {value:?} for pool option {option}: {reason}")]
    Invalid {
        /// The option's spec name.
        option: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `minPoolSize` is larger than a non-zero `maxPoolSize`.
    #[error("minPoolSize ({min}) must not exceed maxPoolSize ({max})")]
    MinExceedsMax {
        /// The minPoolSize given.
        min: u32,
        /// The maxPoolSize given.
        max: u32,
    },
    /// In strict mode, an option this pool does not know.
    #[error("unknown pool option {option:?}")]
    Unknown {
        /// The option's name as given.
        option: String,
    },
}
