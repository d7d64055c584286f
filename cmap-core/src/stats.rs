//! What the pool reports about itself: a snapshot of its counts
//! ([`Status`]) and counters since creation ([`Stats`], after psycopg3's
//! `get_stats`).

use std::time::Duration;

use std::time::Instant;

use crate::connection::ServiceId;
use crate::error::EstablishError;
use crate::options::PoolOptions;
use crate::pool::{HotCounters, Pool, PoolState};
use crate::Address;

/// The spec's connection counts and the wait-queue length, at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// Paused, ready or closed.
    pub state: PoolState,
    /// The pool's generation.
    pub generation: u32,
    /// `totalConnectionCount`: pending + available + in use.
    pub total: usize,
    /// `availableConnectionCount`.
    pub available: usize,
    /// `pendingConnectionCount`.
    pub pending: usize,
    /// Connections checked out.
    pub in_use: usize,
    /// Checkouts in the wait queue.
    pub waiting: usize,
}

/// Counters since the pool was created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub struct Stats {
    /// Checkouts started.
    pub requests: u64,
    /// Checkouts that had to wait in the queue.
    pub requests_queued: u64,
    /// Checkouts that timed out.
    pub requests_timed_out: u64,
    /// Checkouts that failed, timeouts included.
    pub requests_failed: u64,
    /// Checkouts withdrawn by their caller.
    pub requests_cancelled: u64,
    /// Total time from checkout start to checked out.
    pub wait_time: Duration,
    /// Connections established.
    pub connections_opened: u64,
    /// Establishment attempts that failed.
    pub connections_failed: u64,
    /// Establishments abandoned because the checkout that asked for them
    /// timed out and nobody else needed them.
    pub connections_abandoned: u64,
    /// Connections closed, for any reason.
    pub connections_closed: u64,
    /// In-use connections lost to an interrupting clear.
    pub connections_lost: u64,
    /// Connections returned marked errored.
    pub returns_bad: u64,
    /// How many connections may be established at once when the stats
    /// were taken: `maxConnecting`, or where the adaptive pace stands
    /// (`PoolOptionsBuilder::adaptive_connecting`); 1, with either, while
    /// the pool probes a server whose last connect failed with a network
    /// error. Not a counter.
    pub connecting_limit: u32,
    /// Times the adaptive pace fell back to its minimum: a connect refused
    /// with a backpressure label, or one much slower than the recent
    /// fastest. Zero with a fixed `maxConnecting`.
    pub connecting_cuts: u64,
    /// Total time connections spent checked out.
    pub usage_time: Duration,
    /// Panics caught in user code the pool called (event callbacks, the
    /// manager's hooks). The core calls no user code: its driver counts
    /// them, and this stays zero in the core's own [`Stats`].
    pub panics_caught: u64,
    /// Guards held past the driver's leak detection threshold, reported
    /// once each. Counted by the driver, as `panics_caught`: zero in the
    /// core's own [`Stats`].
    pub leaks_detected: u64,
}

/// What the pool says about itself: its settings, counts and counters.
impl<C> Pool<C> {
    /// The pool's address.
    pub fn address(&self) -> &Address {
        &self.address
    }
    /// The pool's options.
    pub fn options(&self) -> &PoolOptions {
        &self.options
    }
    /// The pool's state.
    pub fn state(&self) -> PoolState {
        self.state
    }
    /// The pool's generation (non-load-balanced mode).
    pub fn generation(&self) -> u32 {
        self.generation
    }
    /// The generation and connection count of a service (load-balanced
    /// mode); `None` once its last connection is gone.
    pub fn service_generation(&self, service: ServiceId) -> Option<(u32, u32)> {
        self.services.get(&service).map(|s| (s.generation, s.count))
    }
    /// The spec's counts and the wait-queue length.
    pub fn status(&self) -> Status {
        Status {
            state: self.state,
            generation: self.generation,
            total: self.conns.total(),
            available: self.conns.available_len(),
            pending: self.conns.pending_len(),
            in_use: self.conns.in_use_len(),
            waiting: self.queue.len(),
        }
    }
    /// The pool's clock: the latest `now` an input gave it (at first, the
    /// one it was created with). It never goes backwards.
    #[inline]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The last establishment failure, while the pool has had no success
    /// since (a timed-out checkout's message names it).
    pub fn last_establish_error(&self) -> Option<EstablishError> {
        self.backoff.last_error.clone()
    }

    /// Counters since the pool was created.
    pub fn stats(&self) -> Stats {
        let HotCounters {
            requests,
            usage_time,
            wait_time,
        } = self.hot;
        Stats {
            requests,
            usage_time,
            wait_time,
            connecting_limit: self.connecting_limit(),
            ..self.stats.clone()
        }
    }
}
