//! Measures: what a metrics exporter needs from a check out, a check in,
//! an establishment, a close and a failed checkout, without building their
//! events.
//!
//! An exporter fed from [`Event`](crate::Event)s pays for what it never
//! reads (the address cloned into each, a 72-byte value moved through a
//! driver's delivery) on the two inputs every request makes. A [`Measure`]
//! is the part it reads: a duration or a reason, `Copy`, with no drop
//! glue. The core queues one wherever it emits the matching event, in the
//! same order, while measures are on ([`Pool::set_measures_enabled`]),
//! whether events are on or off; a driver takes them in bulk after each input
//! ([`Pool::measures`], then [`Pool::clear_measures`]), as HikariCP's metrics tracker is called on
//! the checkout and check-in paths themselves rather than through events.
//!
//! The switch is not recorded by the flight recorder: measures change no
//! output and no state, so a replay, which checks outputs, has nothing of
//! them to reproduce.

use std::time::Duration;

use crate::error::EstablishErrorKind;
use crate::event::{CheckOutFailedReason, ClosedReason};
use crate::pool::Pool;

/// What a metrics exporter reads of one event; each variant is queued
/// where the event it names is emitted, with that event's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Measure {
    /// `ConnectionCheckedOut`: how long the checkout waited.
    CheckedOut {
        /// As the event's `duration`.
        duration: Duration,
    },
    /// `ConnectionCheckedIn`: how long the connection was checked out.
    CheckedIn {
        /// As the event's `held`.
        held: Duration,
    },
    /// `ConnectionReady`: how long establishing the connection took.
    Ready {
        /// As the event's `duration`.
        duration: Duration,
    },
    /// `ConnectionClosed`.
    Closed {
        /// As the event's `reason`.
        reason: ClosedReason,
    },
    /// `ConnectionCheckOutFailed`.
    CheckOutFailed {
        /// As the event's `reason`.
        reason: CheckOutFailedReason,
    },
    /// A connection that could not be established (queued before its
    /// `ConnectionClosed` with reason `error`): its failure's kind, which
    /// says whether it carries the overload labels.
    EstablishFailed {
        /// As the failure's [`EstablishError::kind`](crate::EstablishError::kind).
        kind: EstablishErrorKind,
    },
}

impl<C> Pool<C> {
    /// Whether measures are queued (off when the pool is created). Unlike
    /// [`set_events_enabled`](Self::set_events_enabled), a driver sets it
    /// once, when it knows whether it exports metrics.
    pub fn set_measures_enabled(&mut self, enabled: bool) {
        self.measures_enabled = enabled;
    }

    /// The measures queued since [`clear_measures`](Self::clear_measures),
    /// oldest first. A driver copies out what it needs under its lock (a
    /// `Measure` is a few words, and most inputs leave one or two), then
    /// clears them, to apply once the lock is released.
    #[inline]
    pub fn measures(&self) -> &[Measure] {
        &self.measures
    }

    /// Forgets the measures queued; the queue keeps its capacity.
    #[inline]
    pub fn clear_measures(&mut self) {
        self.measures.clear();
    }

    /// Queues `measure` if measures are on.
    #[inline]
    pub(crate) fn measure(&mut self, measure: Measure) {
        if self.measures_enabled {
            self.push_measure(measure);
        }
    }

    /// The rest of [`measure`](Self::measure), out of line: the check
    /// inlined in the hot paths stays one test of a flag.
    #[inline(never)]
    fn push_measure(&mut self, measure: Measure) {
        self.measures.push(measure);
    }
}
