//! The establishment pace: how many connections may be established at
//! once. Fixed, it is the spec's `maxConnecting`. Adaptive (an extension,
//! [`AdaptiveConnecting`]), it is a congestion window on connects, moved
//! by what the server says about each one:
//!
//! - **slow start**: from `min`, each success doubles the limit, up to the
//!   threshold (at first `max`): a healthy server with a long round trip
//!   gets the connects a burst asks for after a few successes;
//! - **additive increase**: at or above the threshold, one more once as
//!   many successes as the limit came (one per round of connects, as
//!   TCP's congestion avoidance adds one segment per round trip);
//! - **back to the minimum** at once on a congestion signal (below it
//!   after a refusal: the next item): an establishment that failed with a
//!   backpressure label (the server or its limiter refused it: spec
//!   "Backpressure-enabled"), one whose
//!   latency rose well above the recent floor (connects queueing at the
//!   server), or a clear (the server failed, or its monitor lost it: what
//!   the pace learnt is about a server that is gone, and a pool readied
//!   after it must not meet a recovering server at full pace). The
//!   threshold becomes half the limit the signal found
//!   (multiplicative decrease, at least `min`), so growth after it is
//!   doubling only up to where the trouble began, and additive beyond;
//!   after a clear, additive from the minimum;
//! - **one probe while refused**: after a labelled refusal the limit is a
//!   single connect until one succeeds, then `min` again (TCP's loss
//!   window of one segment after a timeout, below its initial window). The
//!   pool probes so whatever its pace (`backoff.rs`); here the probe's
//!   success also sets where the window starts again.
//!
//! Connects already in flight are never abandoned by a fall: the limit
//! only gates new ones. The state is plain data, moved by the instants and
//! results the pool is given, so a replay moves it the same way.

use std::time::Duration;

use crate::options::AdaptiveConnecting;

/// A connect is slow (a congestion signal) when it took more than
/// `RISE_FACTOR` times the floor plus `RISE_SLACK`: twice the usual time
/// means it queued about as long as it worked, and the slack keeps a
/// loopback connect of a millisecond or two from reading scheduler noise
/// as congestion.
const RISE_FACTOR: u32 = 2;
const RISE_SLACK: Duration = Duration::from_millis(10);
/// Each connect slower than the floor lets it rise by a sixteenth of
/// itself (at least `CREEP_MIN`): the floor is the *recent* fastest
/// connect, so a lasting change of route (a longer round trip) becomes the
/// new floor after a few dozen connects rather than reading as congestion
/// forever, while one slow connect moves it by 6 %.
const CREEP_DIVISOR: u32 = 16;
const CREEP_MIN: Duration = Duration::from_millis(1);
/// The limit while the server refuses: one connect at a time.
const PROBE: u32 = 1;

/// What a signal did to an adaptive pace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// The limit grew or stayed.
    Kept,
    /// The limit fell back to the minimum.
    Cut,
}

/// The pace's state (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct Pace {
    /// How many connections may be pending at once now.
    pub(crate) limit: u32,
    /// Below it, a success doubles the limit; at or above it, `limit`
    /// successes add 1.
    pub(crate) threshold: u32,
    /// Successes counted towards the next additive step.
    pub(crate) credit: u32,
    /// The recent fastest connect; `None` before the first.
    pub(crate) floor: Option<Duration>,
    /// The bounds, `None` when the pace is fixed (`maxConnecting`).
    pub(crate) adaptive: Option<AdaptiveConnecting>,
}

impl Pace {
    /// The pace a new pool starts with: `max_connecting` when fixed, the
    /// minimum when adaptive.
    pub(crate) fn new(max_connecting: u32, adaptive: Option<AdaptiveConnecting>) -> Pace {
        match adaptive {
            None => Pace {
                limit: max_connecting,
                threshold: max_connecting,
                credit: 0,
                floor: None,
                adaptive: None,
            },
            Some(bounds) => Pace {
                limit: bounds.min,
                threshold: bounds.max,
                credit: 0,
                floor: None,
                adaptive: Some(bounds),
            },
        }
    }

    /// A connection was established after `latency`.
    pub(crate) fn on_established(&mut self, latency: Duration) -> Reaction {
        let Some(bounds) = self.adaptive else {
            return Reaction::Kept;
        };
        let floor = self.floor.unwrap_or(latency);
        let creep = (floor / CREEP_DIVISOR).max(CREEP_MIN);
        self.floor = Some(latency.min(floor.saturating_add(creep)));
        let slow = floor.saturating_mul(RISE_FACTOR).saturating_add(RISE_SLACK);
        if latency > slow {
            return self.cut(bounds);
        }
        if self.limit < bounds.min {
            // The probe got through: the server accepts again.
            self.limit = bounds.min;
        } else if self.limit < self.threshold {
            self.limit = self.limit.saturating_mul(2).min(self.threshold);
        } else {
            self.credit += 1;
            if self.credit >= self.limit {
                self.credit = 0;
                self.limit = self.limit.saturating_add(1);
            }
        }
        self.limit = self.limit.min(bounds.max);
        Reaction::Kept
    }

    /// An establishment failed with a backpressure label: a cut, and a
    /// single probe until a connect succeeds.
    pub(crate) fn on_overload(&mut self) -> Reaction {
        let Some(bounds) = self.adaptive else {
            return Reaction::Kept;
        };
        self.cut(bounds);
        self.limit = PROBE.min(bounds.min);
        Reaction::Cut
    }

    /// The pool was cleared: the server failed, or its monitor lost it.
    /// The pace falls to the minimum and grows one at a time from there:
    /// a server coming back meets every pool of the fleet at once.
    pub(crate) fn on_clear(&mut self) -> Reaction {
        let Some(bounds) = self.adaptive else {
            return Reaction::Kept;
        };
        self.cut(bounds);
        self.threshold = bounds.min;
        Reaction::Cut
    }

    fn cut(&mut self, bounds: AdaptiveConnecting) -> Reaction {
        self.threshold = (self.limit / 2).max(bounds.min);
        self.limit = bounds.min;
        self.credit = 0;
        Reaction::Cut
    }

    /// Whether the state keeps its bounds.
    pub(crate) fn check(&self, max_connecting: u32) -> Result<(), String> {
        let ok = match self.adaptive {
            None => self.limit == max_connecting,
            Some(b) => (PROBE..=b.max).contains(&self.limit) && (b.min..=b.max).contains(&self.threshold),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "the establishment pace's limit {} (threshold {}) is out of its bounds",
                self.limit, self.threshold
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn adaptive(min: u32, max: u32) -> Pace {
        Pace::new(2, Some(AdaptiveConnecting { min, max }))
    }

    #[test]
    fn the_check_refuses_a_limit_or_threshold_out_of_bounds() {
        let mut fixed = Pace::new(3, None);
        fixed.limit = 4;
        assert!(fixed.check(3).is_err(), "a fixed limit is maxConnecting");
        let mut p = adaptive(2, 50);
        p.limit = 51;
        assert!(p.check(2).is_err(), "a limit above the maximum");
        p.limit = 0;
        assert!(p.check(2).is_err(), "no connect at all, not even a probe");
        let mut p = adaptive(2, 50);
        p.threshold = 1;
        assert!(p.check(2).is_err(), "a threshold below the minimum");
        p.threshold = 51;
        assert!(p.check(2).is_err(), "a threshold above the maximum");
    }

    #[test]
    fn fixed_never_moves() {
        let mut p = Pace::new(3, None);
        assert_eq!(p.on_established(MS), Reaction::Kept);
        assert_eq!(p.on_established(MS * 1000), Reaction::Kept);
        assert_eq!(p.on_overload(), Reaction::Kept);
        assert_eq!((p.limit, p.floor), (3, None));
        assert_eq!(p.check(3), Ok(()));
    }

    #[test]
    fn slow_start_doubles_up_to_the_maximum() {
        let mut p = adaptive(2, 50);
        let limits: Vec<u32> = (0..6)
            .map(|_| {
                p.on_established(MS * 100);
                p.limit
            })
            .collect();
        assert_eq!(limits, [4, 8, 16, 32, 50, 50]);
    }

    #[test]
    fn a_labelled_failure_leaves_one_probe_and_halves_the_threshold() {
        let mut p = adaptive(2, 50);
        for _ in 0..4 {
            p.on_established(MS * 100);
        }
        assert_eq!(p.limit, 32);
        assert_eq!(p.on_overload(), Reaction::Cut);
        assert_eq!((p.limit, p.threshold), (1, 16));
        assert_eq!(p.check(2), Ok(()), "a probe is within the bounds");
        // The probe gets through: the minimum, then doubling up to where
        // the trouble began, then one at a time.
        let limits: Vec<u32> = (0..6)
            .map(|_| {
                p.on_established(MS * 100);
                p.limit
            })
            .collect();
        assert_eq!(limits, [2, 4, 8, 16, 16, 16]);
        // One more per 16 successes from there.
        for _ in 0..14 {
            p.on_established(MS * 100);
        }
        assert_eq!(p.limit, 17);
        // A second failure at the minimum leaves a threshold of the minimum.
        p.on_overload();
        p.on_overload();
        assert_eq!((p.limit, p.threshold), (1, 2));
        p.on_established(MS * 100);
        assert_eq!(p.limit, 2);
        p.on_established(MS * 100);
        assert_eq!(p.limit, 2);
        p.on_established(MS * 100);
        assert_eq!(p.limit, 3);
    }

    #[test]
    fn a_clear_falls_to_the_minimum_without_slow_start() {
        let mut p = adaptive(2, 50);
        for _ in 0..4 {
            p.on_established(MS * 100);
        }
        assert_eq!(p.on_clear(), Reaction::Cut);
        assert_eq!((p.limit, p.threshold), (2, 2));
        p.on_established(MS * 100);
        p.on_established(MS * 100);
        assert_eq!(p.limit, 3);
        assert_eq!(Pace::new(2, None).on_clear(), Reaction::Kept);
    }

    #[test]
    fn a_latency_rise_is_a_cut_and_noise_is_not() {
        let mut p = adaptive(2, 50);
        p.on_established(MS * 100);
        p.on_established(MS * 100);
        assert_eq!(p.limit, 8);
        // Up to twice the floor plus 10 ms: no signal.
        assert_eq!(p.on_established(MS * 210), Reaction::Kept);
        assert_eq!(p.limit, 16);
        // The floor crept up by a sixteenth: 106.25 ms; twice it + 10 ms
        // is 222.5 ms.
        assert_eq!(p.floor, Some(Duration::from_micros(106_250)));
        assert_eq!(p.on_established(MS * 223), Reaction::Cut);
        assert_eq!((p.limit, p.threshold), (2, 8));
    }

    #[test]
    fn a_lasting_longer_round_trip_becomes_the_floor() {
        let mut p = adaptive(2, 50);
        p.on_established(MS * 10);
        let mut cuts = 0;
        for _ in 0..2000 {
            if p.on_established(MS * 100) == Reaction::Cut {
                cuts += 1;
            }
        }
        assert!(cuts > 0 && cuts < 40, "{cuts} cuts");
        assert_eq!(p.floor, Some(MS * 100));
        assert_eq!(p.limit, 50);
    }

    #[test]
    fn a_zero_floor_still_creeps() {
        let mut p = adaptive(1, 4);
        p.on_established(Duration::ZERO);
        for _ in 0..40 {
            p.on_established(MS * 30);
        }
        assert_eq!(p.floor, Some(MS * 30));
        assert_eq!(p.limit, 4);
    }
}
