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
//! Deadlines live in the same deque. Checkouts that use the pool's own
//! `waitQueueTimeoutMS` get `started + timeout`, non-decreasing in id: such
//! a deadline joins the *chain* (its entry is marked), whose first live
//! member, in id order, has the earliest chained deadline. The queue keeps
//! that member's id (`chain_head`); when it leaves, the next chained entry
//! after it becomes the head. The head only moves forward, so each entry
//! is passed over at most once: amortized O(1), and in the common case
//! (the oldest waiter leaves, and the next one is chained) one look at the
//! new front. A deadline that would break the chain's order (a checkout
//! with its own, earlier deadline) goes to an ordered set instead, empty
//! in the common case. The next expiry is the smaller of the chain's head
//! and the set's first, exact to the instant; ties go to the earliest
//! arrival.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::connection::{ConnectionId, WaiterId};
use crate::id_deque::IdDeque;

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

/// A waiter as the queue keeps it.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
struct Entry {
    #[cfg_attr(feature = "recorder", serde(flatten))]
    waiter: Waiter,
    /// Its deadline is part of the chain (see the module doc); a deadline
    /// not chained is in `WaitQueue::ordered`.
    chained: bool,
}

#[derive(Debug, Default)]
#[cfg_attr(
    feature = "recorder",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "Stored")
)]
pub(crate) struct WaitQueue {
    /// The waiters in id order.
    entries: IdDeque<Entry>,
    /// The deadline and id of the first live chained entry: the earliest
    /// chained deadline.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_pair_opt"))]
    chain_head: Option<(Instant, WaiterId)>,
    /// The deadline of the last entry chained, while the chain has a live
    /// member: a deadline joins the chain only if it is not earlier.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
    chain_last: Option<Instant>,
    /// Deadlines that did not fit the chain's order.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_pairs"))]
    ordered: BTreeSet<(Instant, WaiterId)>,
}

/// A [`WaitQueue`] as a recording holds it (feature `recorder`), checked
/// ([`WaitQueue::check`]) before it becomes one.
#[cfg(feature = "recorder")]
#[derive(serde::Deserialize)]
struct Stored {
    entries: IdDeque<Entry>,
    #[serde(with = "crate::recorder::codec::rel_pair_opt")]
    chain_head: Option<(Instant, WaiterId)>,
    #[serde(with = "crate::recorder::codec::rel_opt")]
    chain_last: Option<Instant>,
    #[serde(with = "crate::recorder::codec::rel_pairs")]
    ordered: BTreeSet<(Instant, WaiterId)>,
}

#[cfg(feature = "recorder")]
impl TryFrom<Stored> for WaitQueue {
    type Error = String;

    fn try_from(stored: Stored) -> Result<Self, String> {
        let Stored {
            entries,
            chain_head,
            chain_last,
            ordered,
        } = stored;
        let queue = WaitQueue {
            entries,
            chain_head,
            chain_last,
            ordered,
        };
        queue.check()?;
        Ok(queue)
    }
}

impl WaitQueue {
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn contains(&self, id: WaiterId) -> bool {
        self.entries.contains(&id)
    }

    /// Adds a checkout; ids must grow, which keeps the queue FIFO.
    pub(crate) fn push(&mut self, id: WaiterId, waiter: Waiter) {
        debug_assert!(self.entries.back().is_none_or(|(last, _)| last < id));
        let mut chained = false;
        if let Some(deadline) = waiter.deadline {
            if self.chain_last.is_none_or(|last| last <= deadline) {
                chained = true;
                self.chain_last = Some(deadline);
                self.chain_head.get_or_insert((deadline, id));
            } else {
                self.ordered.insert((deadline, id));
            }
        }
        self.entries.insert(id, Entry { waiter, chained });
    }

    pub(crate) fn remove(&mut self, id: WaiterId) -> Option<Waiter> {
        let entry = self.entries.remove(&id)?;
        self.forget(id, &entry);
        Some(entry.waiter)
    }

    /// Accounts for an entry just taken out of `entries`.
    #[inline]
    fn forget(&mut self, id: WaiterId, entry: &Entry) {
        if entry.chained {
            if self.chain_head.is_some_and(|(_, head)| head == id) {
                self.advance_chain(id);
            }
        } else if let Some(deadline) = entry.waiter.deadline {
            self.forget_ordered(deadline, id);
        }
    }

    /// `forget` of a deadline outside the chain: rare, out of line.
    #[inline(never)]
    fn forget_ordered(&mut self, deadline: Instant, id: WaiterId) {
        self.ordered.remove(&(deadline, id));
    }

    /// The chain's head `gone` left: the next chained entry after it
    /// becomes the head, or the chain ends. Its common case, a chained
    /// front, is inlined: `gone` was the first chained entry, so a chained
    /// entry left in front of all others is the first now.
    #[inline]
    fn advance_chain(&mut self, gone: WaiterId) {
        if let Some((id, front)) = self.entries.front() {
            if front.chained {
                if let Some(deadline) = front.waiter.deadline {
                    self.chain_head = Some((deadline, id));
                    return;
                }
            }
        }
        self.seek_chain_head(gone);
    }

    /// `advance_chain` past its common case: the first chained entry after
    /// `gone`, if any.
    #[inline(never)]
    fn seek_chain_head(&mut self, gone: WaiterId) {
        let chained =
            |(id, entry): (WaiterId, &Entry)| Some((entry.waiter.deadline?, id)).filter(|_| entry.chained);
        self.chain_head = self.entries.iter_after(gone).find_map(chained);
        if self.chain_head.is_none() {
            // No live member: the next deadline starts a new chain.
            self.chain_last = None;
        }
    }

    /// The longest-waiting checkout.
    pub(crate) fn pop_front(&mut self) -> Option<(WaiterId, Waiter)> {
        let (id, entry) = self.entries.pop_front()?;
        self.forget(id, &entry);
        Some((id, entry.waiter))
    }

    /// The earliest (deadline, id) of any queued checkout.
    #[inline]
    fn first_deadline(&self) -> Option<(Instant, WaiterId)> {
        // The ordered set is empty in the common case: no look into it.
        if self.ordered.is_empty() {
            return self.chain_head;
        }
        match (self.chain_head, self.ordered.first()) {
            (Some(a), Some(b)) => Some(a.min(*b)),
            (a, b) => a.or(b.copied()),
        }
    }

    /// Whether a checkout's deadline is at or before `now`. Asked by every
    /// input: an empty queue answers with one comparison.
    #[inline]
    pub(crate) fn any_expired(&self, now: Instant) -> bool {
        !self.is_empty() && self.first_deadline().is_some_and(|(at, _)| at <= now)
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
        self.entries
            .iter_mut()
            .map(|(id, entry)| (id, &mut entry.waiter))
            .find(|(_, w)| w.requested.is_none())
    }

    pub(crate) fn get_mut(&mut self, id: WaiterId) -> Option<&mut Waiter> {
        self.entries.get_mut(&id).map(|entry| &mut entry.waiter)
    }

    pub(crate) fn get(&self, id: WaiterId) -> Option<&Waiter> {
        self.entries.get(&id).map(|entry| &entry.waiter)
    }

    /// Queued checkouts in arrival order (for invariant checks).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (WaiterId, &Waiter)> {
        self.entries.iter().map(|(id, entry)| (id, &entry.waiter))
    }

    /// Whether the deadlines are kept as the module doc says: the chained
    /// ones non-decreasing in id order, none after `chain_last`, the head
    /// the first of them; every other deadline in `ordered`, and nothing
    /// else there.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut chained = self.entries.iter().filter(|(_, e)| e.chained);
        let head = chained.next();
        let first = head.and_then(|(id, e)| Some((e.waiter.deadline?, id)));
        if first != self.chain_head {
            return Err(format!(
                "the chain's head is {:?}, its first member {:?}",
                self.chain_head, first
            ));
        }
        if head.is_none() && self.chain_last.is_some() {
            return Err("an empty chain keeps a last deadline".to_owned());
        }
        let mut last = None;
        for (id, entry) in head.into_iter().chain(chained) {
            let Some(deadline) = entry.waiter.deadline else {
                return Err(format!("checkout {id} is chained without a deadline"));
            };
            if last.is_some_and(|l| l > deadline) || self.chain_last.is_none_or(|l| l < deadline) {
                return Err(format!("checkout {id}'s deadline breaks the chain's order"));
            }
            last = Some(deadline);
        }
        let unchained: BTreeSet<(Instant, WaiterId)> = self
            .entries
            .iter()
            .filter(|(_, e)| !e.chained)
            .filter_map(|(id, e)| Some((e.waiter.deadline?, id)))
            .collect();
        if unchained != self.ordered {
            return Err("the ordered deadlines are not those of the checkouts outside the chain".to_owned());
        }
        Ok(())
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
                    q.entries.stored() <= bound,
                    "{} entries for {} waiters",
                    q.entries.stored(),
                    q.len()
                );
                q.check().unwrap();
            }
            let compactions = q.entries.compactions;
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

    /// Checkouts with no deadline between chained ones, a cancelled head,
    /// a chain that empties and starts again, and an out-of-order deadline:
    /// the next deadline stays exact and the bookkeeping consistent.
    #[test]
    fn the_chain_skips_waiters_without_a_deadline_and_restarts_when_empty() {
        let t0 = crate::test_clock::origin();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut q = WaitQueue::default();
        q.push(WaiterId(1), waiter(t0, None));
        q.push(WaiterId(2), waiter(t0, Some(20)));
        q.push(WaiterId(3), waiter(t0, None));
        q.push(WaiterId(4), waiter(t0, Some(30)));
        q.push(WaiterId(5), waiter(t0, Some(10))); // out of order
        q.check().unwrap();
        assert_eq!(q.chain_head, Some((ms(20), WaiterId(2))));
        assert_eq!(q.next_deadline(), Some(ms(10)));
        assert_eq!(q.pop_expired(ms(10)).map(|(id, _)| id), Some(WaiterId(5)));
        assert_eq!(q.next_deadline(), Some(ms(20)));
        // The head cancelled: the next chained one, past one without.
        assert!(q.remove(WaiterId(2)).is_some());
        q.check().unwrap();
        assert_eq!(q.chain_head, Some((ms(30), WaiterId(4))));
        assert_eq!(q.next_deadline(), Some(ms(30)));
        assert!(q.remove(WaiterId(4)).is_some());
        q.check().unwrap();
        assert_eq!((q.chain_head, q.chain_last), (None, None));
        assert_eq!(q.next_deadline(), None);
        // Empty, the chain takes any deadline again, even an earlier one.
        q.push(WaiterId(6), waiter(t0, Some(5)));
        q.check().unwrap();
        assert_eq!(q.chain_head, Some((ms(5), WaiterId(6))));
        assert!(q.ordered.is_empty());
        assert_eq!(q.next_deadline(), Some(ms(5)));
        let order: Vec<u64> = std::iter::from_fn(|| q.pop_front().map(|(id, _)| id.0)).collect();
        assert_eq!(order, [1, 3, 6]);
        q.check().unwrap();
    }

    /// A snapshot whose deadlines do not match its entries is refused
    /// when read back, as an `IdDeque` that breaks its own rules is.
    #[cfg(feature = "recorder")]
    #[test]
    fn a_recording_reads_back_only_a_consistent_queue() {
        let t0 = crate::test_clock::origin();
        let mut q = WaitQueue::default();
        q.push(WaiterId(1), waiter(t0, Some(20)));
        q.push(WaiterId(2), waiter(t0, Some(10)));
        let text = crate::recorder::codec::with_base(t0, || serde_json::to_value(&q).unwrap());
        let back: WaitQueue =
            crate::recorder::codec::with_base(t0, || serde_json::from_value(text.clone()).unwrap());
        assert_eq!(back.next_deadline(), q.next_deadline());
        let tamper = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut bad = text.clone();
            f(&mut bad);
            crate::recorder::codec::with_base(t0, || serde_json::from_value::<WaitQueue>(bad))
        };
        let head = text["chain_head"].clone();
        assert!(tamper(&|v| v["chain_head"][1] = serde_json::json!(2)).is_err());
        assert!(tamper(&|v| v["chain_head"][0] = head[0].as_i64().map(|n| n + 1).into()).is_err());
        assert!(tamper(&|v| v["ordered"] = serde_json::json!([])).is_err());
        assert!(tamper(&|v| v["chain_last"] = serde_json::Value::Null).is_err());
        assert!(tamper(&|v| {
            v["chain_head"] = serde_json::Value::Null;
            v["entries"]["slots"] = serde_json::json!([]);
            v["entries"]["len"] = serde_json::json!(0);
            v["ordered"] = serde_json::json!([]);
        })
        .is_err());
    }
}
