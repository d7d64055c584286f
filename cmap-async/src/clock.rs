//! A cheap clock for the inputs whose instant only dates idle and use
//! times: a checkout served at once, a check-in nobody waits for.
//!
//! Reading the precise monotonic clock costs about 20–25 ns (a vDSO
//! `clock_gettime` with its seqlock and TSC scaling), two reads per
//! check out and check in: a third of an uncontended cycle. Linux keeps a
//! coarse copy of the same clock, updated at every scheduler tick
//! (`CLOCK_MONOTONIC_COARSE`, about 5 ns to read through glibc), which is all a
//! maxIdleTime check or a usage counter needs. Deadlines and the durations
//! of waited checkouts keep the precise clock (see `Shared::read_clock`).

use std::time::{Duration, Instant};

/// A clock reading that may lag the precise clock: [`Runtime::now_coarse`].
///
/// [`Runtime::now_coarse`]: crate::Runtime::now_coarse
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoarseNow {
    /// Never later than [`Runtime::now`](crate::Runtime::now) read at the
    /// same moment.
    pub at: Instant,
    /// How much earlier than the precise clock `at` may be. A deadline
    /// computed from `at` is pushed back by this much, so that it never
    /// passes early.
    pub lag: Duration,
}

impl CoarseNow {
    /// The deadline of a checkout that waits as `wait` says, from this
    /// reading: a timeout also covers the reading's lag, so that it never
    /// ends early.
    #[inline]
    pub fn deadline(self, wait: cmap_core::Wait) -> Option<std::time::Instant> {
        match wait {
            cmap_core::Wait::For(timeout) => self.at.checked_add(timeout.saturating_add(self.lag)),
            cmap_core::Wait::Until(deadline) => deadline,
        }
    }

    /// A precise reading: no lag.
    pub fn exact(at: Instant) -> CoarseNow {
        CoarseNow {
            at,
            lag: Duration::ZERO,
        }
    }
}

/// The system's monotonic clock, read cheaply: on Linux and Android its
/// coarse copy (lagging by one scheduler tick, 1–10 ms, reported as two), elsewhere
/// the precise clock. Only for runtimes whose [`Runtime::now`] is the
/// system clock ([`std::time::Instant::now`]).
///
/// [`Runtime::now`]: crate::Runtime::now
#[inline]
pub fn system_coarse_now() -> CoarseNow {
    imp::now()
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use std::cell::Cell;
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    use rustix::time::{clock_getres, clock_gettime, ClockId, Timespec};

    use super::CoarseNow;

    /// An `Instant` and the same moment as nanoseconds of the kernel's
    /// monotonic clock, which `Instant` reads on these systems: a coarse
    /// reading converts to an `Instant` by its distance from here.
    struct Anchor {
        instant: Instant,
        nanos: u64,
        lag: Duration,
    }

    static ANCHOR: OnceLock<Anchor> = OnceLock::new();

    fn nanos(ts: Timespec) -> u64 {
        let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
        let subsec = u64::try_from(ts.tv_nsec).unwrap_or(0);
        secs.saturating_mul(1_000_000_000).saturating_add(subsec)
    }

    impl Anchor {
        fn new() -> Anchor {
            // The instant first, the kernel's clock second: the anchor's
            // nanoseconds are then never earlier than its instant, and
            // converted readings never later than the precise clock.
            let instant = Instant::now();
            let nanos = nanos(clock_gettime(ClockId::Monotonic));
            // Two ticks: the clock is updated at each tick, and a tick
            // can be late (a busy or preempted CPU).
            let lag =
                Duration::from_nanos(nanos_or(clock_getres(ClockId::MonotonicCoarse)).saturating_mul(2));
            Anchor { instant, nanos, lag }
        }

        fn convert(&self, ts: Timespec) -> Instant {
            // Just after the anchor was taken, the coarse clock may still
            // be behind it: the anchor's instant is then the reading
            // (still no later than the precise clock).
            let since = nanos(ts).saturating_sub(self.nanos);
            self.instant
                .checked_add(Duration::from_nanos(since))
                .unwrap_or(self.instant)
        }
    }

    /// A resolution the kernel did not report is taken as 10 ms (HZ=100,
    /// the coarsest tick Linux has).
    fn nanos_or(res: Timespec) -> u64 {
        match nanos(res) {
            0 => 10_000_000,
            n => n,
        }
    }

    thread_local! {
        /// This thread's last conversion: the coarse clock moves once a
        /// tick, so most readings convert to the reading just computed.
        static LAST: Cell<Option<(Timespec, CoarseNow)>> = const { Cell::new(None) };
    }

    #[inline]
    pub(super) fn now() -> CoarseNow {
        let ts = clock_gettime(ClockId::MonotonicCoarse);
        // The usual reading: the same tick as the last one, one compare.
        match LAST.get() {
            Some((last, reading)) if last == ts => reading,
            _ => convert(ts),
        }
    }

    #[cold]
    #[inline(never)]
    fn convert(ts: Timespec) -> CoarseNow {
        let anchor = ANCHOR.get_or_init(Anchor::new);
        let reading = CoarseNow {
            at: anchor.convert(ts),
            lag: anchor.lag,
        };
        LAST.set(Some((ts, reading)));
        reading
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use std::time::Instant;

    use super::CoarseNow;

    pub(super) fn now() -> CoarseNow {
        CoarseNow::exact(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coarse_reading_is_never_later_than_the_precise_clock() {
        for _ in 0..100_000 {
            let coarse = system_coarse_now();
            let precise = Instant::now();
            assert!(coarse.at <= precise, "{coarse:?} is after {precise:?}");
        }
    }

    #[test]
    fn a_coarse_reading_is_the_precise_clocks_instant_not_another_clocks() {
        // Were `Instant` ever another clock than the one the coarse copy
        // follows, the two would be apart by seconds (the time since boot
        // differs from the time since boot minus suspends, say).
        for _ in 0..1_000 {
            let before = Instant::now();
            let coarse = system_coarse_now();
            let behind = before.saturating_duration_since(coarse.at);
            assert!(
                behind <= coarse.lag + Duration::from_millis(100),
                "{coarse:?} is {behind:?} behind {before:?}"
            );
        }
    }

    #[test]
    fn the_coarse_clock_moves_with_the_precise_one() {
        let first = system_coarse_now();
        std::thread::sleep(first.lag * 3 + Duration::from_millis(5));
        let second = system_coarse_now();
        assert!(second.at > first.at, "{first:?} then {second:?}");
    }
}
