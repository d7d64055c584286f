//! The event scheduler: virtual time in nanoseconds from the run's start,
//! and a priority queue of timed events, earliest first and, at one
//! instant, in the order they were scheduled (so a run is a function of
//! its seed alone).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Virtual nanoseconds since the start of the run.
pub type Nanos = u64;

pub const MS: Nanos = 1_000_000;
pub const SEC: Nanos = 1_000_000_000;

/// The instant `t` after `base`: what the cores are given as `now`.
pub fn instant(base: Instant, t: Nanos) -> Instant {
    base + Duration::from_nanos(t)
}

struct Timed<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Timed<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Timed<E> {}

impl<E> PartialOrd for Timed<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Timed<E> {
    /// Reversed: `BinaryHeap` is a max-heap, and the earliest comes first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

pub struct Scheduler<E> {
    heap: BinaryHeap<Timed<E>>,
    seq: u64,
    now: Nanos,
}

impl<E> Scheduler<E> {
    pub fn new() -> Scheduler<E> {
        Scheduler {
            heap: BinaryHeap::with_capacity(4096),
            seq: 0,
            now: 0,
        }
    }

    /// The instant of the event being handled.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Schedules `event` at `at` (at the current instant if `at` is past).
    pub fn at(&mut self, at: Nanos, event: E) {
        self.seq += 1;
        self.heap.push(Timed {
            at: at.max(self.now),
            seq: self.seq,
            event,
        });
    }

    /// The next event due at or before `until`, with the clock moved to it.
    pub fn next(&mut self, until: Nanos) -> Option<E> {
        if self.heap.peek()?.at > until {
            return None;
        }
        let Timed { at, event, .. } = self.heap.pop()?;
        self.now = at;
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_in_scheduling_order() {
        let mut s = Scheduler::new();
        s.at(30, "c");
        s.at(10, "a");
        s.at(30, "d");
        s.at(10, "b");
        let mut got = Vec::new();
        while let Some(e) = s.next(u64::MAX) {
            got.push((s.now(), e));
        }
        assert_eq!(got, [(10, "a"), (10, "b"), (30, "c"), (30, "d")]);
        s.at(5, "past");
        assert_eq!(s.next(u64::MAX), Some("past"));
        assert_eq!(s.now(), 30);
    }
}
