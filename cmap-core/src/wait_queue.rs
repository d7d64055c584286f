//! The WaitQueue: checkouts that could not be served at once, in arrival
//! order, with their deadlines. Plain data: it answers questions and
//! changes state, and never produces outputs.
//!
//! Waiter ids are monotonic, so the queue is an [`IdDeque`] (`id_deque.rs`):
//! push and pop-front are O(1), finding a member by id is O(1) or a binary
//! search (O(log n)), and removing one from the middle (a cancelled
//! checkout) leaves a tombstone, dropped once it reaches an end or
//! compacted away when tombstones outnumber the live waiters (amortized
//! O(1)).
//!
//! Deadlines: checkouts that use the pool's own `waitQueueTimeoutMS` get
//! `started + timeout`, non-decreasing in id, so their deadlines form a
//! plain FIFO whose front is the earliest. A deadline that would break that
//! order (a checkout with its own deadline) goes to an ordered set instead.
//! The next expiry is the smaller of the two fronts, exact to the instant;
//! ties go to the earliest arrival.

use std::collections::{BTreeSet, VecDeque};
use std::time::Instant;

use crate::connection::{ConnectionId, WaiterId};
use crate::id_deque::{compaction_due, IdDeque};

/// A queued checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct Waiter {
    /// When its `ConnectionCheckOutStarted` was emitted.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel"))]
    pub(crate) started_at: Instant,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
    pub(crate) deadline: Option<Instant>,
    /// The pending connection created on its behalf, whose failure it hears
    /// about (spec: the thread that creates a connection gets its error).
    pub(crate) requested: Option<ConnectionId>,
}

#[derive(Debug, Default)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct WaitQueue {
    /// The waiters in id order. Serialized as its own fields (`slots` and
    /// `len`), as when they were the queue's.
    #[cfg_attr(feature = "recorder", serde(flatten))]
    slots: IdDeque<Waiter>,
    /// Deadlines in non-decreasing order, which is also id order; entries
    /// of removed waiters may linger behind the front (the front is always
    /// live, or the deque is empty).
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_pairs"))]
    fifo: VecDeque<(Instant, WaiterId)>,
    /// Deadlines that did not fit the FIFO's order.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_pairs"))]
    ordered: BTreeSet<(Instant, WaiterId)>,
    /// Compactions done, for the test that they stay rare.
    #[cfg(test)]
    #[cfg_attr(feature = "recorder", serde(skip))]
    compactions: usize,
}

impl WaitQueue {
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub(crate) fn contains(&self, id: WaiterId) -> bool {
        self.slots.contains(&id)
    }

    /// Adds a checkout; ids must grow, which keeps the queue FIFO.
    pub(crate) fn push(&mut self, id: WaiterId, waiter: Waiter) {
        debug_assert!(self.slots.back().is_none_or(|(last, _)| last < id));
        if let Some(deadline) = waiter.deadline {
            if self.fifo.back().is_none_or(|(last, _)| *last <= deadline) {
                self.fifo.push_back((deadline, id));
            } else {
                self.ordered.insert((deadline, id));
            }
        }
        self.slots.insert(id, waiter);
    }

    pub(crate) fn remove(&mut self, id: WaiterId) -> Option<Waiter> {
        let waiter = self.slots.remove(&id)?;
        self.forget(id, &waiter);
        Some(waiter)
    }

    /// Accounts for a waiter just taken out of `slots`.
    fn forget(&mut self, id: WaiterId, waiter: &Waiter) {
        if let Some(deadline) = waiter.deadline {
            if self.fifo.front() == Some(&(deadline, id)) {
                self.fifo.pop_front();
            } else {
                self.ordered.remove(&(deadline, id));
            }
        }
        self.tidy();
    }

    /// Drops the deadlines of removed waiters at the front, and compacts
    /// when they dominate (`slots` tidies itself).
    fn tidy(&mut self) {
        let first = self.slots.front().map(|(id, _)| id);
        while let Some(&(_, id)) = self.fifo.front() {
            // The front of `slots` is live: no search for the usual
            // deadline, the oldest waiter's.
            if Some(id) == first || self.contains(id) {
                break;
            }
            self.fifo.pop_front();
        }
        if compaction_due(self.fifo.len(), self.slots.len()) {
            let slots = &self.slots;
            self.fifo.retain(|(_, id)| slots.contains(id));
            #[cfg(test)]
            {
                self.compactions += 1;
            }
        }
    }

    /// The longest-waiting checkout.
    pub(crate) fn pop_front(&mut self) -> Option<(WaiterId, Waiter)> {
        let (id, waiter) = self.slots.pop_front()?;
        self.forget(id, &waiter);
        Some((id, waiter))
    }

    /// The earliest (deadline, id) of any queued checkout.
    #[inline]
    fn first_deadline(&self) -> Option<(Instant, WaiterId)> {
        // No live waiter: both sets are empty (their fronts are live).
        if self.slots.is_empty() {
            return None;
        }
        match (self.fifo.front(), self.ordered.first()) {
            (Some(a), Some(b)) => Some(*a.min(b)),
            (a, b) => a.or(b).copied(),
        }
    }

    /// The earliest deadline of any queued checkout.
    #[inline]
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.first_deadline().map(|(at, _)| at)
    }

    /// Removes and returns one checkout whose deadline is at or before `now`,
    /// earliest deadline first (ties: earliest arrival).
    #[inline]
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<(WaiterId, Waiter)> {
        let (at, id) = self.first_deadline()?;
        if at > now {
            return None;
        }
        self.remove(id).map(|w| (id, w))
    }

    /// The first checkout, in arrival order, that has not asked for a
    /// connection yet. Those that have are few (at most the pending count),
    /// so this is O(maxConnecting) (plus tombstones, bounded by the live
    /// count).
    pub(crate) fn first_without_request_mut(&mut self) -> Option<(WaiterId, &mut Waiter)> {
        self.slots.iter_mut().find(|(_, w)| w.requested.is_none())
    }

    pub(crate) fn get_mut(&mut self, id: WaiterId) -> Option<&mut Waiter> {
        self.slots.get_mut(&id)
    }

    /// Queued checkouts in arrival order (for invariant checks).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (WaiterId, &Waiter)> {
        self.slots.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id_deque::COMPACT_SLACK;
    use std::time::Duration;

    fn waiter(t0: Instant, deadline_ms: Option<u64>) -> Waiter {
        Waiter {
            started_at: t0,
            deadline: deadline_ms.map(|ms| t0 + Duration::from_millis(ms)),
            requested: None,
        }
    }

    /// Removals from the middle leave tombstones; they never pile up past
    /// the compaction bound, compactions stay rare (amortized O(1) per
    /// removal), and the iterator shows the live waiters in arrival order.
    /// Both parities of the queue's length: a threshold met only on
    /// equality would be skipped by one of them.
    #[test]
    fn tombstones_stay_bounded_compactions_rare_and_iteration_skips_them() {
        for n in [2000u64, 2001] {
            let t0 = crate::test_clock::origin();
            let mut q = WaitQueue::default();
            for i in 1..=n {
                q.push(WaiterId(i), waiter(t0, Some(i)));
            }
            let mut removed = 0;
            for i in 2..n {
                if i % 10 != 0 {
                    assert!(q.remove(WaiterId(i)).is_some());
                    removed += 1;
                }
                let bound = 2 * q.len() + COMPACT_SLACK;
                assert!(
                    q.slots.stored() <= bound,
                    "{} slots for {} waiters",
                    q.slots.stored(),
                    q.len()
                );
                assert!(
                    q.fifo.len() <= bound,
                    "{} deadlines for {} waiters",
                    q.fifo.len(),
                    q.len()
                );
            }
            let compactions = q.compactions + q.slots.compactions;
            assert!(
                compactions <= removed / 8,
                "{compactions} compactions for {removed} removals"
            );
            let live: Vec<u64> = q.iter().map(|(id, _)| id.0).collect();
            let expected: Vec<u64> = std::iter::once(1)
                .chain((10..n).step_by(10))
                .chain(std::iter::once(n))
                .collect();
            assert_eq!(live, expected);
        }
    }

    #[test]
    fn fifo_order_and_removal_from_the_middle() {
        let t0 = crate::test_clock::origin();
        let mut q = WaitQueue::default();
        for i in 1..=5 {
            q.push(WaiterId(i), waiter(t0, None));
        }
        assert!(q.remove(WaiterId(3)).is_some());
        assert!(q.remove(WaiterId(3)).is_none());
        let order: Vec<u64> = std::iter::from_fn(|| q.pop_front().map(|(id, _)| id.0)).collect();
        assert_eq!(order, [1, 2, 4, 5]);
    }

    #[test]
    fn popping_the_front_keeps_the_next_deadline_exact() {
        let t0 = crate::test_clock::origin();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut q = WaitQueue::default();
        // Deadlines 10, 20, 30 and 40 in arrival order (the FIFO), 5 out of
        // order (the ordered set), and none.
        let deadlines = [Some(10), Some(20), Some(5), Some(30), None, Some(40)];
        for (i, d) in deadlines.iter().enumerate() {
            q.push(WaiterId(i as u64 + 1), waiter(t0, *d));
        }
        // A cancelled waiter's deadline must not linger as the next one.
        assert!(q.remove(WaiterId(4)).is_some());
        let mut rest: Vec<(u64, Option<u64>)> = vec![
            (1, Some(10)),
            (2, Some(20)),
            (3, Some(5)),
            (5, None),
            (6, Some(40)),
        ];
        while !rest.is_empty() {
            let expected = rest.iter().filter_map(|(_, d)| *d).min().map(ms);
            assert_eq!(q.next_deadline(), expected, "waiting: {rest:?}");
            let (id, _) = q.pop_front().expect("a waiter is left");
            assert_eq!(id.0, rest.remove(0).0, "oldest first");
            assert_eq!(q.len(), rest.len());
        }
        assert!(q.pop_front().is_none());
        assert_eq!(q.next_deadline(), None);
    }

    #[test]
    fn expiry_by_deadline_not_arrival() {
        let t0 = crate::test_clock::origin();
        let mut q = WaitQueue::default();
        q.push(WaiterId(1), waiter(t0, Some(50)));
        q.push(WaiterId(2), waiter(t0, Some(10)));
        q.push(WaiterId(3), waiter(t0, None));
        assert_eq!(q.next_deadline(), Some(t0 + Duration::from_millis(10)));
        assert!(q.pop_expired(t0 + Duration::from_millis(9)).is_none());
        assert_eq!(
            q.pop_expired(t0 + Duration::from_millis(10)).unwrap().0,
            WaiterId(2)
        );
        assert!(q.pop_expired(t0 + Duration::from_millis(49)).is_none());
        assert_eq!(
            q.pop_expired(t0 + Duration::from_millis(60)).unwrap().0,
            WaiterId(1)
        );
        assert_eq!(q.next_deadline(), None);
        assert_eq!(q.len(), 1);
    }
}
