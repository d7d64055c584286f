//! The CMAP monitoring events (spec: "Connection Pool Monitoring"), plus
//! two extensions, [`Event::ReconnectGaveUp`] and [`Event::PoolResized`].

use std::sync::Arc;
use std::time::Duration;

use crate::connection::{ConnectionId, ServiceId};
use crate::error::{CheckOutError, EstablishError};
use crate::options::PoolOptions;
use crate::Address;

/// Why a connection was closed (`ConnectionClosedEvent.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClosedReason {
    /// The pool was cleared, making the connection stale.
    Stale,
    /// The connection was available for longer than `maxIdleTimeMS`.
    Idle,
    /// The connection experienced an error.
    Error,
    /// The pool was closed.
    PoolClosed,
    /// Extension: the connection reached its maximum lifetime.
    Lifetime,
    /// Extension: the user detached the connection from the pool.
    Detached,
    /// Extension: the pool was resized below the connections it held
    /// (see `Pool::handle_resize`).
    Shrunk,
}

impl ClosedReason {
    /// Every reason, for a driver that registers something per reason (a
    /// metric label) up front.
    pub const ALL: [ClosedReason; 7] = [
        ClosedReason::Stale,
        ClosedReason::Idle,
        ClosedReason::Error,
        ClosedReason::PoolClosed,
        ClosedReason::Lifetime,
        ClosedReason::Detached,
        ClosedReason::Shrunk,
    ];

    /// The spec's value (`"stale"`, `"idle"`, `"error"`, `"poolClosed"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ClosedReason::Stale => "stale",
            ClosedReason::Idle => "idle",
            ClosedReason::Error => "error",
            ClosedReason::PoolClosed => "poolClosed",
            ClosedReason::Lifetime => "lifetime",
            ClosedReason::Detached => "detached",
            ClosedReason::Shrunk => "shrunk",
        }
    }

    /// The spec's log message text for this reason.
    pub fn log_message(self) -> &'static str {
        match self {
            ClosedReason::Stale => "Connection became stale because the pool was cleared",
            ClosedReason::Idle => {
                "Connection has been available but unused for longer than the configured max idle time"
            }
            ClosedReason::Error => "An error occurred while using the connection",
            ClosedReason::PoolClosed => "Connection pool was closed",
            ClosedReason::Lifetime => "Connection reached its maximum lifetime",
            ClosedReason::Detached => "Connection was detached from the pool",
            ClosedReason::Shrunk => "Connection pool was resized below its size",
        }
    }
}

/// Why a checkout failed (`ConnectionCheckOutFailedEvent.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckOutFailedReason {
    /// The pool was closed.
    PoolClosed,
    /// The checkout's timeout elapsed.
    Timeout,
    /// The pool was paused or cleared, or establishing failed.
    ConnectionError,
}

impl CheckOutFailedReason {
    /// Every reason (see [`ClosedReason::ALL`]).
    pub const ALL: [CheckOutFailedReason; 3] = [
        CheckOutFailedReason::PoolClosed,
        CheckOutFailedReason::Timeout,
        CheckOutFailedReason::ConnectionError,
    ];

    /// The spec's value (`"poolClosed"`, `"timeout"`, `"connectionError"`).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckOutFailedReason::PoolClosed => "poolClosed",
            CheckOutFailedReason::Timeout => "timeout",
            CheckOutFailedReason::ConnectionError => "connectionError",
        }
    }

    /// The spec's log message text for this reason.
    pub fn log_message(self) -> &'static str {
        match self {
            CheckOutFailedReason::PoolClosed => "Connection pool was closed",
            CheckOutFailedReason::Timeout => {
                "Wait queue timeout elapsed without a connection becoming available"
            }
            CheckOutFailedReason::ConnectionError => {
                "An error occurred while trying to establish a new connection"
            }
        }
    }

    pub(crate) fn of(error: &CheckOutError) -> CheckOutFailedReason {
        match error {
            CheckOutError::PoolClosed { .. } => CheckOutFailedReason::PoolClosed,
            CheckOutError::WaitQueueTimeout { .. } => CheckOutFailedReason::Timeout,
            _ => CheckOutFailedReason::ConnectionError,
        }
    }
}

/// A pool event, in the order the pool emitted it. Durations are measured
/// on the `now` the driver passed in.
///
/// Not `#[non_exhaustive]`, on purpose: the spec fixes the events, and a
/// new one should stop the matches that log or count every event from
/// compiling rather than be skipped by a wildcard arm.
#[derive(Debug, Clone)]
#[allow(missing_docs)] // the fields are the spec's, under the same names
pub enum Event {
    /// `PoolCreatedEvent`; `options` lists the options the user set.
    PoolCreated {
        address: Address,
        options: Arc<PoolOptions>,
    },
    /// `PoolReadyEvent`.
    PoolReady { address: Address },
    /// `PoolClearedEvent`.
    PoolCleared {
        address: Address,
        service_id: Option<ServiceId>,
        interrupt_in_use_connections: bool,
    },
    /// `PoolClosedEvent`.
    PoolClosed { address: Address },
    /// `ConnectionCreatedEvent`.
    ConnectionCreated {
        address: Address,
        connection_id: ConnectionId,
    },
    /// `ConnectionReadyEvent`; `duration` since its creation.
    ConnectionReady {
        address: Address,
        connection_id: ConnectionId,
        duration: Duration,
    },
    /// `ConnectionClosedEvent`; `error` when the reason is an error.
    ConnectionClosed {
        address: Address,
        connection_id: ConnectionId,
        reason: ClosedReason,
        error: Option<EstablishError>,
    },
    /// `ConnectionCheckOutStartedEvent`.
    ConnectionCheckOutStarted { address: Address },
    /// `ConnectionCheckOutFailedEvent`; `duration` since checkout started.
    /// The error is boxed: a failure is rare, and an inline error would
    /// make every event 120 bytes instead of 72.
    ConnectionCheckOutFailed {
        address: Address,
        reason: CheckOutFailedReason,
        error: Box<CheckOutError>,
        duration: Duration,
    },
    /// `ConnectionCheckedOutEvent`; `duration` since checkout started.
    ConnectionCheckedOut {
        address: Address,
        connection_id: ConnectionId,
        duration: Duration,
    },
    /// `ConnectionCheckedInEvent`; `held`, an extension: how long the
    /// connection was checked out, so that a subscriber timing use (a
    /// metrics exporter) needs no clock and no table of its own.
    ConnectionCheckedIn {
        address: Address,
        connection_id: ConnectionId,
        held: Duration,
    },
    /// Extension: reconnecting failed for longer than `give_up_after`; the
    /// pool stays paused until it is marked ready again.
    ReconnectGaveUp {
        address: Address,
        failing_for: Duration,
        last_error: EstablishError,
    },
    /// Extension: minPoolSize and maxPoolSize changed while the pool ran
    /// (see `Pool::handle_resize`).
    PoolResized {
        address: Address,
        min_pool_size: u32,
        max_pool_size: u32,
    },
}

impl Event {
    /// The spec's event type name without the `Event` suffix, as the CMAP
    /// tests spell it (`ConnectionPoolCreated`, `ConnectionCheckedOut`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Event::PoolCreated { .. } => "ConnectionPoolCreated",
            Event::PoolReady { .. } => "ConnectionPoolReady",
            Event::PoolCleared { .. } => "ConnectionPoolCleared",
            Event::PoolClosed { .. } => "ConnectionPoolClosed",
            Event::ConnectionCreated { .. } => "ConnectionCreated",
            Event::ConnectionReady { .. } => "ConnectionReady",
            Event::ConnectionClosed { .. } => "ConnectionClosed",
            Event::ConnectionCheckOutStarted { .. } => "ConnectionCheckOutStarted",
            Event::ConnectionCheckOutFailed { .. } => "ConnectionCheckOutFailed",
            Event::ConnectionCheckedOut { .. } => "ConnectionCheckedOut",
            Event::ConnectionCheckedIn { .. } => "ConnectionCheckedIn",
            Event::ReconnectGaveUp { .. } => "ReconnectGaveUp",
            Event::PoolResized { .. } => "ConnectionPoolResized",
        }
    }

    /// The address of the pool that emitted it.
    pub fn address(&self) -> &Address {
        match self {
            Event::PoolCreated { address, .. }
            | Event::PoolReady { address }
            | Event::PoolCleared { address, .. }
            | Event::PoolClosed { address }
            | Event::ConnectionCreated { address, .. }
            | Event::ConnectionReady { address, .. }
            | Event::ConnectionClosed { address, .. }
            | Event::ConnectionCheckOutStarted { address }
            | Event::ConnectionCheckOutFailed { address, .. }
            | Event::ConnectionCheckedOut { address, .. }
            | Event::ConnectionCheckedIn { address, .. }
            | Event::ReconnectGaveUp { address, .. }
            | Event::PoolResized { address, .. } => address,
        }
    }

    /// The connection it is about, if any.
    pub fn connection_id(&self) -> Option<ConnectionId> {
        match self {
            Event::ConnectionCreated { connection_id, .. }
            | Event::ConnectionReady { connection_id, .. }
            | Event::ConnectionClosed { connection_id, .. }
            | Event::ConnectionCheckedOut { connection_id, .. }
            | Event::ConnectionCheckedIn { connection_id, .. } => Some(*connection_id),
            Event::ConnectionCheckOutFailed { error, .. } => match **error {
                CheckOutError::ConnectionError { connection_id, .. } => Some(connection_id),
                _ => None,
            },
            _ => None,
        }
    }

    /// The duration it carries (`ConnectionReady`, `ConnectionCheckedOut`,
    /// `ConnectionCheckOutFailed`).
    pub fn duration(&self) -> Option<Duration> {
        match self {
            Event::ConnectionReady { duration, .. }
            | Event::ConnectionCheckedOut { duration, .. }
            | Event::ConnectionCheckOutFailed { duration, .. } => Some(*duration),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every check out and check in builds events of this size and moves
    /// them between cores when someone listens: a rare variant that grows
    /// past the common ones (a `ConnectionCheckedOut` is 56 bytes of
    /// fields) must box its payload, as `ConnectionCheckOutFailed` does.
    #[test]
    fn an_event_stays_within_72_bytes() {
        assert!(
            std::mem::size_of::<Event>() <= 72,
            "{}",
            std::mem::size_of::<Event>()
        );
    }

    /// `ALL` holds each reason once; a new variant breaks the matches
    /// below until it is listed (and counted) there too.
    #[test]
    fn all_lists_every_reason_once() {
        let closed = ClosedReason::ALL.map(|r| match r {
            ClosedReason::Stale
            | ClosedReason::Idle
            | ClosedReason::Error
            | ClosedReason::PoolClosed
            | ClosedReason::Lifetime
            | ClosedReason::Detached
            | ClosedReason::Shrunk => r.as_str(),
        });
        let failed = CheckOutFailedReason::ALL.map(|r| match r {
            CheckOutFailedReason::PoolClosed
            | CheckOutFailedReason::Timeout
            | CheckOutFailedReason::ConnectionError => r.as_str(),
        });
        for names in [&closed[..], &failed[..]] {
            let distinct: std::collections::BTreeSet<_> = names.iter().collect();
            assert_eq!(distinct.len(), names.len(), "{names:?}");
        }
    }
}
