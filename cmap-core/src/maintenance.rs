//! Time-driven work: background runs (spec: "Background Thread"), the
//! reconnect backoff, and the timer table behind `poll_timeout`.

use std::time::{Duration, Instant};

use crate::error::EstablishError;
use crate::event::Event;
use crate::options::EstablishFailure;
use crate::perish::PerishRules;
use crate::pool::{Pool, PoolState};

/// A tiny deterministic generator (SplitMix64) for jitter: the seed is an
/// option, so a replay with the same inputs gives the same outputs.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

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
    /// Asks for a background run at once (spec: after a clear, "the next
    /// background thread iteration" SHOULD be scheduled immediately).
    /// Without a maintenance interval, runs never happen.
    pub(crate) fn schedule_run_now(&mut self) {
        if self.options.maintenance_interval.is_some() && self.state != PoolState::Closed {
            self.next_run = Some(self.now);
        }
    }

    pub(crate) fn run_due_timers(&mut self) {
        if self.state == PoolState::Paused && self.backoff.auto_ready_at.is_some_and(|t| t <= self.now) {
            self.backoff.auto_ready_at = None;
            self.mark_ready();
        }
        if self.next_run.is_some_and(|t| t <= self.now) {
            self.run_background();
        }
    }

    /// One background run: close perished available connections, then
    /// populate towards minPoolSize within maxConnecting. It never waits:
    /// whatever cannot be done now is left to the next run.
    fn run_background(&mut self) {
        self.next_run = self
            .options
            .maintenance_interval
            .and_then(|interval| self.now.checked_add(interval));
        let rules = PerishRules {
            now: self.now,
            generation: self.generation,
            services: &self.services,
            options: &self.options,
        };
        let perished = self
            .conns
            .extract_available(|meta| rules.perished(meta, true).is_some());
        for available in perished {
            let reason = self
                .perished(&available.meta, true)
                .expect("extracted as perished");
            self.close(&available.meta, available.conn, reason, None);
        }
        self.populate();
    }

    /// Starts connections towards minPoolSize, within maxConnecting and
    /// outside a backoff.
    pub(crate) fn populate(&mut self) {
        let min = self.options.min_pool_size as usize;
        while self.conns.total() < min && self.can_start_connection(false) {
            self.start_connection(None);
        }
    }

    /// After an establishment failure: count it, give up loudly past the
    /// limit, and otherwise schedule the next attempt.
    pub(crate) fn on_establish_failure(&mut self, error: EstablishError) {
        self.backoff.last_error = Some(error.clone());
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
                let waiting = delay.min(policy.max_delay_while_waiting);
                self.backoff.not_before_waiting = now.checked_add(waiting.mul_f64(spread));
            }
        }
    }

    /// The next instant the core wants a `handle_timeout`: the earliest
    /// checkout deadline, background run, auto-ready or backoff end that
    /// matters now. `None`: nothing is scheduled.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Called after every input: the common case (a ready pool, nobody
        // waiting, no backoff) is the next background run alone, inlined.
        if self.state == PoolState::Ready && self.queue.is_empty() && !self.backoff.is_active() {
            return self.next_run;
        }
        self.poll_timeout_otherwise()
    }

    /// `poll_timeout` when someone waits, the pool is not ready or a
    /// backoff runs.
    #[inline(never)]
    fn poll_timeout_otherwise(&self) -> Option<Instant> {
        let mut next = earliest(self.queue.next_deadline(), self.next_run);
        if self.state == PoolState::Paused {
            next = earliest(next, self.backoff.auto_ready_at);
        }
        // Only a backoff end still ahead is worth a wake-up: once it has
        // passed, whatever it held back is started by the inputs that
        // follow, and reporting it would make the driver spin.
        if self.backoff.is_active() && self.state == PoolState::Ready {
            let ahead = |end: Option<Instant>| end.filter(|&end| end > self.now);
            if self.queue.len() > self.conns.pending_len() {
                next = earliest(next, ahead(self.backoff.not_before_waiting));
            }
            if self.conns.total() < self.options.min_pool_size as usize {
                next = earliest(next, ahead(self.backoff.not_before));
            }
        }
        next
    }

    /// How long until `poll_timeout`, from `now` (zero if it has passed).
    pub fn time_until_timeout(&self, now: Instant) -> Option<Duration> {
        self.poll_timeout().map(|t| t.saturating_duration_since(now))
    }
}

/// The earlier of two optional instants (`None`: no instant).
#[inline]
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_deterministic_and_in_range() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..1000 {
            let x = a.next_f64();
            assert_eq!(x, b.next_f64());
            assert!((0.0..1.0).contains(&x));
        }
    }
}
