//! The reconnect backoff (beyond the spec, from psycopg3's pool; paced as
//! the current spec's "Backpressure-enabled" asks): consecutive
//! establishment failures, the instants before which no connection is
//! started, the single probe while the server refuses, the pool's return
//! to ready after its own failure reaction, and the loud give-up.
//!
//! While checkouts wait, the pace of retries is the pool's to choose (the
//! spec leaves it open). Here it is a probe: after a network error, one
//! connect at a time (not maxConnecting), each started after a pause that
//! doubles from [`WAITING_FIRST_DELAY`] up to
//! [`Reconnect::max_delay_while_waiting`](crate::Reconnect), between half
//! and all of it at random; the first success ends both. The numbers and
//! the measurements behind them are in docs/spec-compliance.md.

use std::time::{Duration, Instant};

use crate::error::EstablishError;
use crate::event::Event;
use crate::options::EstablishFailure;
use crate::pool::{Pool, PoolState};

/// The first pause between attempts while checkouts wait, doubled at each
/// failure up to `max_delay_while_waiting`: a single failed connect (a
/// blip) is retried within 15 ms. A smaller start costs a fleet more
/// failed checkouts after a failover (the pools that just got a
/// connection, back at the smallest pause, outpace the starved ones at a
/// limiter): 4 ms gave 0.6 % more on `bench fleet`'s seeds 1-7, 15 ms
/// about as many as before the probe (docs/fleet.md).
pub(crate) const WAITING_FIRST_DELAY: Duration = Duration::from_millis(15);

/// Connects in flight while the last attempt failed with a network error:
/// one probe. A second connect in the same pause tells the pool nothing
/// more about a refusing server.
const PROBE: u32 = 1;

/// State of consecutive establishment failures.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct Backoff {
    failures: u32,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
    failing_since: Option<Instant>,
    /// When a pool paused by its own failure reaction marks itself ready.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
    pub(crate) auto_ready_at: Option<Instant>,
    /// No connection is started for `minPoolSize` alone before this
    /// instant (the full backoff).
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
    pub(crate) not_before: Option<Instant>,
    /// No connection is started for waiting checkouts before this instant:
    /// the backoff capped by `max_delay_while_waiting`, so that a server
    /// that comes back serves them soon.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
    pub(crate) not_before_waiting: Option<Instant>,
    /// The last attempt failed with a network error (the labelled kind):
    /// one connect at a time until one succeeds.
    #[cfg_attr(feature = "recorder", serde(default))]
    pub(crate) probing: bool,
    /// The last failure since the last success, for the message of a
    /// checkout that times out meanwhile.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::error_opt"))]
    pub(crate) last_error: Option<EstablishError>,
}

impl Backoff {
    /// A connection was established: the failures and their backoff end.
    /// A return to ready that a failure scheduled stays: the success does
    /// not mark the pool ready (the connection may predate the clear), and
    /// a pool paused by its own failure reaction would otherwise stay
    /// paused with nothing left to wake it.
    pub(crate) fn on_success(&mut self) {
        *self = Backoff {
            auto_ready_at: self.auto_ready_at,
            ..Backoff::default()
        };
    }

    /// Whether a backoff holds connections back at all.
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.not_before.is_some() || self.not_before_waiting.is_some()
    }

    /// The instant before which no connection is started, for waiting
    /// checkouts (`for_waiters`) or for `minPoolSize`.
    pub(crate) fn hold_until(&self, for_waiters: bool) -> Option<Instant> {
        if for_waiters {
            self.not_before_waiting
        } else {
            self.not_before
        }
    }

    /// Forgets the ends that have passed.
    pub(crate) fn expire(&mut self, now: Instant) {
        if self.not_before.is_some_and(|t| t <= now) {
            self.not_before = None;
        }
        if self.not_before_waiting.is_some_and(|t| t <= now) {
            self.not_before_waiting = None;
        }
    }
}

impl<C> Pool<C> {
    /// How many connections may be pending before another is started: the
    /// pace's limit (`maxConnecting`, or where the adaptive pace stands),
    /// or a single probe while the server refuses.
    #[inline]
    pub(crate) fn connecting_limit(&self) -> u32 {
        if self.backoff.probing {
            PROBE.min(self.pace.limit)
        } else {
            self.pace.limit
        }
    }

    /// After an establishment failure: count it, give up loudly past the
    /// limit, and otherwise schedule the next attempt.
    pub(crate) fn on_establish_failure(&mut self, error: EstablishError) {
        self.backoff.last_error = Some(error.clone());
        self.backoff.probing = error.is_overload();
        let Some(policy) = self.options.reconnect else {
            return;
        };
        let now = self.now;
        let since = *self.backoff.failing_since.get_or_insert(now);
        self.backoff.failures = self.backoff.failures.saturating_add(1);
        let failing_for = now.saturating_duration_since(since);
        if policy.give_up_after.is_some_and(|limit| failing_for >= limit) {
            self.backoff = Backoff {
                last_error: self.backoff.last_error.take(),
                probing: self.backoff.probing,
                ..Backoff::default()
            };
            // Loud by design: emitted even with events off, since nobody
            // would otherwise learn that the pool stopped trying.
            let event = Event::ReconnectGaveUp {
                address: self.address.clone(),
                failing_for,
                last_error: error,
            };
            self.push_event(event);
            return;
        }
        let doublings = self.backoff.failures.saturating_sub(1).min(31);
        let delay = policy
            .initial_delay
            .saturating_mul(1u32 << doublings)
            .min(policy.max_delay);
        // Between half and all of the delay, so that pools failing together
        // do not retry together.
        let spread = 0.5 + 0.5 * self.rng.next_f64();
        let at = now.checked_add(delay.mul_f64(spread));
        match self.options.establish_failure {
            EstablishFailure::ClearPool if self.state == PoolState::Paused => self.backoff.auto_ready_at = at,
            _ => {
                self.backoff.not_before = at;
                // Its own doubling, from 15 ms to a low cap: a blip is
                // retried soon, an outage a few times a second, and a
                // server that returns serves the waiters within about
                // half the cap.
                let waiting = WAITING_FIRST_DELAY
                    .saturating_mul(1u32 << doublings)
                    .min(policy.max_delay_while_waiting)
                    .min(delay);
                self.backoff.not_before_waiting = now.checked_add(waiting.mul_f64(spread));
            }
        }
    }
}
