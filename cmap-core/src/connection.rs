//! Connections as the pool sees them: ids, metadata, and the checked-out
//! [`Pooled`] value that travels with its metadata back to check-in.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A connection's id: assigned in order of creation, from 1, never reused
/// within a pool (spec: "Monotonically Increasing ID").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub struct ConnectionId(pub u64);

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A checkout request's id: monotonic within a pool, never reused. Lower
/// ids arrived earlier, which is what keeps the wait queue FIFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub struct WaiterId(pub u64);

impl fmt::Display for WaiterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A load balancer's service id (the 12 bytes of a BSON ObjectId), learnt
/// from the handshake in load-balanced mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub struct ServiceId(pub [u8; 12]);

impl fmt::Display for ServiceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// Identifies a pool, so that a connection checked in to a pool that did not
/// create it is refused (spec: "Checking In a Connection"). Drawn from a
/// process-wide counter; it never appears in outputs, so replay stays exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolId(u64);

impl PoolId {
    pub(crate) fn next() -> PoolId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        PoolId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// No pool's: what a recording reads back, until the replaying pool
    /// adopts it.
    #[cfg(feature = "recorder")]
    pub(crate) fn unset() -> PoolId {
        PoolId(0)
    }
}

/// What the pool knows about an established connection.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct Meta {
    pub(crate) id: ConnectionId,
    #[cfg_attr(feature = "recorder", serde(skip, default = "PoolId::unset"))]
    pub(crate) pool: PoolId,
    pub(crate) generation: u32,
    pub(crate) service_id: Option<ServiceId>,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel"))]
    pub(crate) created_at: Instant,
    /// When the connection was last checked in (or became available).
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel"))]
    pub(crate) last_used: Instant,
    /// When it was handed out, for the time-in-use statistic.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel"))]
    pub(crate) checked_out_at: Instant,
    /// The end of its life, with jitter already applied.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
    pub(crate) expires_at: Option<Instant>,
    /// Slot in the in-use table while checked out.
    pub(crate) slot: usize,
    /// The user reported an error on it ("Errored" perished connection).
    pub(crate) errored: bool,
}

/// A checked-out connection with its metadata. It derefs to the connection;
/// hand it back with `handle_check_in` (or `handle_detach`).
pub struct Pooled<C> {
    pub(crate) meta: Box<Meta>,
    pub(crate) conn: C,
}

impl<C> Pooled<C> {
    /// The connection's id.
    pub fn id(&self) -> ConnectionId {
        self.meta.id
    }
    /// The pool generation it belongs to (per service in load-balanced mode).
    pub fn generation(&self) -> u32 {
        self.meta.generation
    }
    /// The service it is connected to, in load-balanced mode.
    pub fn service_id(&self) -> Option<ServiceId> {
        self.meta.service_id
    }
    /// When it was created (its `ConnectionCreated` instant).
    pub fn created_at(&self) -> Instant {
        self.meta.created_at
    }
    /// Marks it errored: it will be closed with reason `error` at check-in
    /// instead of becoming available again.
    pub fn mark_errored(&mut self) {
        self.meta.errored = true;
    }
    /// Whether it has been marked errored.
    pub fn is_errored(&self) -> bool {
        self.meta.errored
    }
}

impl<C> std::ops::Deref for Pooled<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.conn
    }
}

impl<C> std::ops::DerefMut for Pooled<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.conn
    }
}

impl<C> fmt::Debug for Pooled<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pooled")
            .field("id", &self.meta.id)
            .field("generation", &self.meta.generation)
            .field("service_id", &self.meta.service_id)
            .field("errored", &self.meta.errored)
            .finish_non_exhaustive()
    }
}
