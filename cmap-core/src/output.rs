//! What the core asks its driver to do, and tell its subscribers.

use crate::connection::{ConnectionId, Pooled, WaiterId};
use crate::error::CheckOutError;
use crate::event::{ClosedReason, Event};

/// One output of the core, drained with `Pool::poll_output` in the order the
/// spec requires: actions and events share one stream.
#[derive(Debug)]
pub enum Output<C> {
    /// Something the driver must do.
    Action(Action<C>),
    /// A monitoring event to deliver to subscribers (and log).
    Event(Event),
}

/// An instruction to the driver. Each must be carried out; none is urgent
/// enough to be done under the pool's lock.
///
/// Not `#[non_exhaustive]`, on purpose: a driver must perform every action,
/// so a new one is a breaking change that should stop every driver's match
/// from compiling rather than be dropped by a wildcard arm.
#[derive(Debug)]
pub enum Action<C> {
    /// Establish connection `id` (connect, handshake, authenticate) and
    /// report with `handle_established` or `handle_establish_failed`.
    Establish {
        /// The pending connection.
        id: ConnectionId,
    },
    /// Stop establishing `id`: the pool no longer wants it (a clear with
    /// interruptInUseConnections, or close). A late result for it is still
    /// accepted and disposed of.
    AbortEstablish {
        /// The pending connection.
        id: ConnectionId,
    },
    /// Give this connection to the checkout `waiter`.
    Deliver {
        /// The checkout served.
        waiter: WaiterId,
        /// The connection, now in use.
        connection: Pooled<C>,
    },
    /// Fail the checkout `waiter` with `error`.
    Fail {
        /// The checkout failed.
        waiter: WaiterId,
        /// Why.
        error: CheckOutError,
    },
    /// Tear this connection down; the pool has already forgotten it. The
    /// spec asks that this not block, so do it off the caller's path.
    Close {
        /// The connection's id.
        id: ConnectionId,
        /// The connection itself.
        connection: C,
        /// Why it was closed.
        reason: ClosedReason,
    },
    /// Interrupt the in-use connection `id`: cancel what it is doing, and
    /// fail its operation with a retryable `InterruptedError`. The pool
    /// already counts it closed; it is disposed of when checked in.
    Interrupt {
        /// The in-use connection.
        id: ConnectionId,
    },
}
