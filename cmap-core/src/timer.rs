//! The timer table behind [`Pool::poll_timeout`]: every instant at which
//! the pool wants a `handle_timeout`, one [`Timer`] each, and what firing
//! them does (`run_due_timers`). A driver keeps one sleep until the
//! earliest (quinn-proto's `connection/timer.rs` is the model).

use std::time::{Duration, Instant};

use crate::pool::{Pool, PoolState};

/// One timer of the pool. (Without debug assertions, only the table's
/// own tests read it: `poll_timeout_otherwise` writes its rows out.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(debug_assertions), allow(dead_code))]
pub(crate) enum Timer {
    /// The earliest deadline of a queued checkout (`waitQueueTimeoutMS`,
    /// or the caller's own).
    CheckOutDeadline,
    /// The next background run (spec: "Background Thread").
    BackgroundRun,
    /// A pool paused by its own failure reaction marks itself ready.
    AutoReady,
    /// A backoff holding connections back from waiting checkouts ends.
    BackoffForWaiters,
    /// A backoff holding connections back from `minPoolSize` ends.
    BackoffForMinPool,
}

#[cfg_attr(not(debug_assertions), allow(dead_code))]
impl Timer {
    /// Every timer.
    pub(crate) const ALL: [Timer; 5] = [
        Timer::CheckOutDeadline,
        Timer::BackgroundRun,
        Timer::AutoReady,
        Timer::BackoffForWaiters,
        Timer::BackoffForMinPool,
    ];
}

impl<C> Pool<C> {
    /// The next instant the core wants a `handle_timeout`: the earliest
    /// checkout deadline, background run, auto-ready or backoff end that
    /// matters now. `None`: nothing is scheduled.
    ///
    /// A checkout [`handle_check_out_direct`](Self::handle_check_out_direct)
    /// serves at once, or a [`handle_check_in_direct`](Self::handle_check_in_direct),
    /// that leaves no action never moves it earlier (neither queues,
    /// closes or starts anything; the property tests check it): a driver
    /// may skip this look after them.
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
        // The table's rows written out, in its order: a loop over
        // `Timer::ALL` through `timer_at` is measurably dearer on the
        // waiting path (regime (b) of docs/benchmarks.md), so the table
        // checks this at the end instead, in every build with debug
        // assertions (the tests').
        let mut next = earliest(self.queue.next_deadline(), self.next_run);
        if self.state == PoolState::Paused {
            next = earliest(next, self.backoff.auto_ready_at);
        }
        if self.backoff.is_active() && self.state == PoolState::Ready {
            let ahead = |end: Option<Instant>| end.filter(|&end| end > self.now);
            if self.queue.len() > self.conns.pending_len() {
                next = earliest(next, ahead(self.backoff.not_before_waiting));
            }
            if self.conns.total() < self.options.min_pool_size as usize {
                next = earliest(next, ahead(self.backoff.not_before));
            }
        }
        debug_assert_eq!(
            next,
            Timer::ALL
                .into_iter()
                .filter_map(|timer| self.timer_at(timer))
                .min(),
            "poll_timeout is the earliest timer of the table"
        );
        next
    }

    /// When `timer` fires, if it matters now: the table `poll_timeout`
    /// takes the earliest of.
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    pub(crate) fn timer_at(&self, timer: Timer) -> Option<Instant> {
        // Only a backoff end still ahead, of a ready pool, is worth a
        // wake-up: once it has passed, whatever it held back is started by
        // the inputs that follow, and reporting it would make the driver
        // spin.
        let backing_off = self.state == PoolState::Ready && self.backoff.is_active();
        let ahead = |end: Option<Instant>| end.filter(|&end| end > self.now);
        match timer {
            Timer::CheckOutDeadline => self.queue.next_deadline(),
            Timer::BackgroundRun => self.next_run,
            Timer::AutoReady if self.state == PoolState::Paused => self.backoff.auto_ready_at,
            Timer::BackoffForWaiters if backing_off && self.queue.len() > self.conns.pending_len() => {
                ahead(self.backoff.not_before_waiting)
            }
            Timer::BackoffForMinPool
                if backing_off && self.conns.total() < self.options.min_pool_size as usize =>
            {
                ahead(self.backoff.not_before)
            }
            Timer::AutoReady | Timer::BackoffForWaiters | Timer::BackoffForMinPool => None,
        }
    }

    /// How long until `poll_timeout`, from `now` (zero if it has passed).
    pub fn time_until_timeout(&self, now: Instant) -> Option<Duration> {
        self.poll_timeout().map(|t| t.saturating_duration_since(now))
    }

    /// Fires the timers that are due: the return to ready, then the
    /// background run. (Checkout deadlines expire in `advance`, before any
    /// input; a backoff's end needs nothing but the inputs that follow.)
    pub(crate) fn run_due_timers(&mut self) {
        if self.state == PoolState::Paused && self.backoff.auto_ready_at.is_some_and(|t| t <= self.now) {
            self.backoff.auto_ready_at = None;
            self.mark_ready();
        }
        if self.next_run.is_some_and(|t| t <= self.now) {
            self.run_background();
        }
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
