//! [`IdDeque`]: values kept in the order of their monotonic [`WaiterId`]s,
//! with removal from anywhere by id. The wait queue (`wait_queue.rs`)
//! keeps its checkouts in one; cmap-async keeps its waiter map in another.

use std::collections::VecDeque;

use crate::connection::WaiterId;

/// How much slack the compaction threshold leaves: see [`compaction_due`].
pub(crate) const COMPACT_SLACK: usize = 32;

/// Whether a deque that stores `stored` entries, `live` of them live (the
/// rest tombstones), is due for a compaction: when it holds more than
/// twice the live entries plus [`COMPACT_SLACK`].
///
/// - **Amortized O(1) per removal.** A compaction costs O(`stored`) and
///   leaves no tombstone. The next one comes when tombstones outnumber the
///   live entries by more than 32, so more than half of what is stored
///   then is tombstones, each left by a removal since: a compaction costs
///   less than two entries per removal that paid for it.
/// - **Bounded memory.** Between inputs a deque never stores more than
///   2 × `live` + 32 entries: a constant factor of what it holds, however
///   many removals from the middle it sees.
/// - **Nothing to do for short deques.** Below 32 tombstones nothing is
///   compacted: tombstones at either end go at once, and those in the
///   middle of a short queue usually reach an end soon.
///
/// The wait queue's deadline FIFO, which also removes lazily, uses the
/// same rule.
#[inline]
pub(crate) fn compaction_due(stored: usize, live: usize) -> bool {
    stored > 2 * live + COMPACT_SLACK
}

/// Values kept in the order of their [`WaiterId`]s, removable by id from
/// anywhere: the pool's wait queue, and a driver's waiter map (cmap-async
/// keeps each waiting checkout's slot in one, by the id
/// [`Pool::handle_check_out`](crate::Pool::handle_check_out) gave it).
///
/// Waiter ids are monotonic, so entries nearly always arrive in id order:
///
/// - [`insert`](Self::insert) of an id above every other is a push at the
///   back, O(1); an id out of order is still put in its place (O(n)).
/// - [`pop_front`](Self::pop_front), and [`remove`](Self::remove) of the
///   first id, are O(1): waiters leave oldest first.
/// - Finding an id is O(1) while no id in between has gone (an entry is at
///   most `id - first` in, and exactly there then), a binary search
///   otherwise.
/// - Removing from the middle leaves a tombstone: an entry without a value
///   that keeps every other id where it was. Tombstones at either end go
///   at once (both ends are always live), and the rest are compacted
///   away when they outnumber the live entries by more than 32, which
///   keeps removal amortized O(1) and memory within
///   2 × [`len`](Self::len) + 32 entries.
///
/// Nothing allocates in a steady state: the buffer only grows to the most
/// entries held at once.
///
/// ```
/// use cmap_core::{IdDeque, WaiterId};
///
/// let mut waiting = IdDeque::new();
/// for id in 1..=4 {
///     waiting.insert(WaiterId(id), id * 10);
/// }
/// assert_eq!(waiting.remove(&WaiterId(2)), Some(20)); // a cancelled one
/// assert_eq!(waiting.pop_front(), Some((WaiterId(1), 10)));
/// assert_eq!(waiting.pop_front(), Some((WaiterId(3), 30))); // 2 is skipped
/// assert_eq!(waiting.get(&WaiterId(4)), Some(&40));
/// assert_eq!(waiting.len(), 1);
/// ```
#[derive(Debug, Clone)]
#[cfg_attr(
    feature = "recorder",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "Stored<T>")
)]
pub struct IdDeque<T> {
    /// Sorted by id; `None` is a removed entry not compacted yet. Both ends
    /// are live (or the deque is empty).
    slots: VecDeque<(WaiterId, Option<T>)>,
    /// Live entries.
    len: usize,
    /// Compactions done, for the tests that they stay rare.
    #[cfg(test)]
    #[cfg_attr(feature = "recorder", serde(skip))]
    pub(crate) compactions: usize,
}

/// An [`IdDeque`] as a recording holds it (feature `recorder`), checked
/// before it becomes one: what is read back keeps the deque's rules.
#[cfg(feature = "recorder")]
#[derive(serde::Deserialize)]
struct Stored<T> {
    slots: VecDeque<(WaiterId, Option<T>)>,
    len: usize,
}

#[cfg(feature = "recorder")]
impl<T> TryFrom<Stored<T>> for IdDeque<T> {
    type Error = &'static str;

    fn try_from(stored: Stored<T>) -> Result<Self, Self::Error> {
        let Stored { slots, len } = stored;
        if !slots.iter().zip(slots.iter().skip(1)).all(|(a, b)| a.0 < b.0) {
            return Err("an IdDeque's ids out of order");
        }
        let tombstone = |end: Option<&(WaiterId, Option<T>)>| end.is_some_and(|(_, v)| v.is_none());
        if tombstone(slots.front()) || tombstone(slots.back()) {
            return Err("an IdDeque with a tombstone at an end");
        }
        if slots.iter().filter(|(_, v)| v.is_some()).count() != len {
            return Err("an IdDeque whose length is not its count of entries");
        }
        Ok(IdDeque {
            slots,
            len,
            #[cfg(test)]
            compactions: 0,
        })
    }
}

impl<T> Default for IdDeque<T> {
    fn default() -> Self {
        IdDeque::new()
    }
}

impl<T> IdDeque<T> {
    /// An empty deque; it allocates nothing until the first insert.
    pub const fn new() -> Self {
        IdDeque {
            slots: VecDeque::new(),
            len: 0,
            #[cfg(test)]
            compactions: 0,
        }
    }

    /// The number of entries (tombstones not counted).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slots stored, tombstones included.
    #[cfg(test)]
    pub(crate) fn stored(&self) -> usize {
        self.slots.len()
    }

    /// Where `id` is (`Ok`), or would go (`Err`), in `slots`.
    fn search(&self, id: WaiterId) -> Result<usize, usize> {
        let Some((first, _)) = self.slots.front() else {
            return Err(0);
        };
        // Ids are sorted and unique: the entry is at most `id - first` in.
        let Some(guess) = id.0.checked_sub(first.0).and_then(|d| usize::try_from(d).ok()) else {
            return Err(0);
        };
        if self.slots.get(guess).is_some_and(|(i, _)| *i == id) {
            // No id in between is missing: the usual case.
            return Ok(guess);
        }
        let end = guess.saturating_add(1).min(self.slots.len());
        let (a, b) = self.slots.as_slices();
        let key = |(i, _): &(WaiterId, Option<T>)| *i;
        if end <= a.len() {
            return a[..end].binary_search_by_key(&id, key);
        }
        match a.binary_search_by_key(&id, key) {
            Err(at) if at == a.len() => b[..end - a.len()]
                .binary_search_by_key(&id, key)
                .map(|at| at + a.len())
                .map_err(|at| at + a.len()),
            found => found,
        }
    }

    /// Whether `id` has an entry.
    pub fn contains(&self, id: &WaiterId) -> bool {
        self.search(*id).is_ok_and(|at| self.slots[at].1.is_some())
    }

    /// The value of `id`.
    pub fn get(&self, id: &WaiterId) -> Option<&T> {
        let at = self.search(*id).ok()?;
        self.slots[at].1.as_ref()
    }

    /// The value of `id`, to change it.
    pub fn get_mut(&mut self, id: &WaiterId) -> Option<&mut T> {
        let at = self.search(*id).ok()?;
        self.slots[at].1.as_mut()
    }

    /// Puts `value` under `id`, and returns the value it replaces, if `id`
    /// had one. An id above every other (the usual case) goes at the back.
    #[inline]
    pub fn insert(&mut self, id: WaiterId, value: T) -> Option<T> {
        if self.slots.back().is_none_or(|(last, _)| *last < id) {
            self.slots.push_back((id, Some(value)));
            self.len += 1;
            return None;
        }
        self.insert_out_of_order(id, value)
    }

    /// `insert` of an id not above every other: not expected, but kept
    /// correct, out of the way of the usual push.
    #[cold]
    #[inline(never)]
    fn insert_out_of_order(&mut self, id: WaiterId, value: T) -> Option<T> {
        match self.search(id) {
            Ok(at) => {
                let old = self.slots[at].1.replace(value);
                if old.is_none() {
                    self.len += 1;
                }
                old
            }
            Err(at) => {
                self.slots.insert(at, (id, Some(value)));
                self.len += 1;
                None
            }
        }
    }

    /// Takes the value of `id` out.
    pub fn remove(&mut self, id: &WaiterId) -> Option<T> {
        if self.slots.front().is_some_and(|(first, _)| first == id) {
            // The usual case: waiters leave oldest first. No search, and no
            // tombstone.
            return self.pop_front().map(|(_, value)| value);
        }
        let at = self.search(*id).ok()?;
        let value = self.slots[at].1.take()?;
        self.len -= 1;
        self.tidy();
        Some(value)
    }

    /// Takes the entry of the lowest id out.
    #[inline]
    pub fn pop_front(&mut self) -> Option<(WaiterId, T)> {
        // The front entry is live (see `slots`): no search. A tombstone
        // found there anyway is skipped, not returned.
        loop {
            let (id, value) = self.slots.pop_front()?;
            if let Some(value) = value {
                self.len -= 1;
                self.tidy_front();
                return Some((id, value));
            }
        }
    }

    /// The entry of the lowest id.
    #[inline]
    pub fn front(&self) -> Option<(WaiterId, &T)> {
        // Both ends are live (see `slots`).
        let (id, value) = self.slots.front()?;
        Some((*id, value.as_ref()?))
    }

    /// The entry of the highest id.
    #[inline]
    pub fn back(&self) -> Option<(WaiterId, &T)> {
        // Both ends are live (see `slots`).
        let (id, value) = self.slots.back()?;
        Some((*id, value.as_ref()?))
    }

    /// The entries in id order.
    pub fn iter(&self) -> impl Iterator<Item = (WaiterId, &T)> {
        self.slots
            .iter()
            .filter_map(|(id, v)| v.as_ref().map(|v| (*id, v)))
    }

    /// The entries after `id` (not `id` itself), in id order.
    pub fn iter_after(&self, id: WaiterId) -> impl Iterator<Item = (WaiterId, &T)> {
        let from = match self.search(id) {
            Ok(at) => at + 1,
            Err(at) => at,
        };
        self.slots
            .range(from..)
            .filter_map(|(id, v)| v.as_ref().map(|v| (*id, v)))
    }

    /// The entries in id order, their values to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (WaiterId, &mut T)> {
        self.slots
            .iter_mut()
            .filter_map(|(id, v)| v.as_mut().map(|v| (*id, v)))
    }

    /// After a removal: drops the tombstones at both ends, and compacts
    /// when tombstones dominate (see [`compaction_due`]).
    fn tidy(&mut self) {
        while self.slots.back().is_some_and(|(_, v)| v.is_none()) {
            self.slots.pop_back();
        }
        self.tidy_front();
    }

    /// `tidy` after the front entry went: the back is as live as it was
    /// (or the deque is empty), so only the front can hold a tombstone.
    #[inline]
    fn tidy_front(&mut self) {
        while self.slots.front().is_some_and(|(_, v)| v.is_none()) {
            self.slots.pop_front();
        }
        if compaction_due(self.slots.len(), self.len) {
            self.compact();
        }
    }

    /// Drops every tombstone: rare (see [`compaction_due`]), so out of
    /// the way of `tidy_front`, which is inlined.
    #[cold]
    #[inline(never)]
    fn compact(&mut self) {
        self.slots.retain(|(_, v)| v.is_some());
        #[cfg(test)]
        {
            self.compactions += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deque of `ids`, each its own value.
    fn filled(ids: impl IntoIterator<Item = u64>) -> IdDeque<u64> {
        let mut d = IdDeque::new();
        for i in ids {
            assert_eq!(d.insert(WaiterId(i), i), None);
        }
        d
    }

    fn ids<T>(d: &IdDeque<T>) -> Vec<u64> {
        d.iter().map(|(id, _)| id.0).collect()
    }

    #[test]
    fn push_pop_front_and_remove_by_id() {
        assert!(IdDeque::<u64>::new().is_empty());
        let mut d = filled(1..=5);
        assert_eq!(d.len(), 5);
        assert_eq!(d.front(), Some((WaiterId(1), &1)));
        assert_eq!(d.back(), Some((WaiterId(5), &5)));
        assert_eq!(d.remove(&WaiterId(3)), Some(3));
        assert_eq!(d.remove(&WaiterId(3)), None, "removed once");
        assert!(!d.contains(&WaiterId(3)));
        assert_eq!(d.remove(&WaiterId(9)), None, "never there");
        assert_eq!(d.remove(&WaiterId(0)), None, "below the first id");
        let order: Vec<(u64, u64)> = std::iter::from_fn(|| d.pop_front().map(|(id, v)| (id.0, v))).collect();
        assert_eq!(order, [(1, 1), (2, 2), (4, 4), (5, 5)]);
        assert!(d.is_empty());
        assert_eq!(d.stored(), 0, "no tombstone outlives the last entry");
        assert_eq!(d.pop_front(), None);
    }

    #[test]
    fn pop_front_skips_the_tombstones_behind_it() {
        let mut d = filled(1..=6);
        for i in [2, 3, 5] {
            assert_eq!(d.remove(&WaiterId(i)), Some(i));
        }
        assert_eq!(d.stored(), 6, "tombstones in the middle stay");
        assert_eq!(d.pop_front(), Some((WaiterId(1), 1)));
        // 2 and 3 went with 1: the front is live.
        assert_eq!(d.stored(), 3);
        assert_eq!(d.front(), Some((WaiterId(4), &4)));
        assert_eq!(d.pop_front(), Some((WaiterId(4), 4)));
        assert_eq!(d.pop_front(), Some((WaiterId(6), 6)));
        assert_eq!(d.pop_front(), None);
    }

    #[test]
    fn tombstones_at_the_back_go_at_once() {
        let mut d = filled(1..=4);
        d.remove(&WaiterId(3));
        d.remove(&WaiterId(4));
        assert_eq!(d.stored(), 2);
        assert_eq!(ids(&d), [1, 2]);
    }

    #[test]
    fn out_of_order_inserts_take_their_place_or_replace() {
        let mut d = filled([1, 2, 3, 5, 8, 13]);
        assert_eq!(d.insert(WaiterId(4), 4), None);
        assert_eq!(d.insert(WaiterId(0), 0), None);
        assert_eq!(d.insert(WaiterId(8), 81), Some(8));
        assert_eq!(ids(&d), [0, 1, 2, 3, 4, 5, 8, 13]);
        assert_eq!(d.len(), 8);
        // Into a tombstone's place.
        assert_eq!(d.remove(&WaiterId(5)), Some(5));
        assert_eq!(d.insert(WaiterId(5), 51), None);
        assert_eq!(d.len(), 8);
        assert_eq!(d.get(&WaiterId(5)), Some(&51));
        assert_eq!(d.get(&WaiterId(8)), Some(&81));
        for i in [0, 1, 2, 3, 4, 5, 8, 13] {
            assert!(d.remove(&WaiterId(i)).is_some(), "{i}");
        }
        assert!(d.is_empty());
        assert_eq!(d.stored(), 0);
    }

    #[test]
    fn iter_after_starts_past_the_id_whether_or_not_it_is_there() {
        let d = filled([1, 2, 3, 5]);
        let after = |id| d.iter_after(WaiterId(id)).map(|(i, _)| i.0).collect::<Vec<_>>();
        assert_eq!(after(2), [3, 5]);
        assert_eq!(after(4), [5]);
        assert_eq!(after(0), [1, 2, 3, 5]);
        assert_eq!(after(5), [0; 0]);
    }

    #[test]
    fn the_last_id_inserted_again_is_replaced_not_repeated() {
        let mut d = filled([1, 2, 3]);
        assert_eq!(d.insert(WaiterId(3), 31), Some(3));
        assert_eq!((d.len(), d.stored()), (3, 3));
        assert_eq!(ids(&d), [1, 2, 3]);
    }

    /// An id inserted out of order into a deque whose ring has wrapped
    /// (its slots in two slices) takes its place in the first slice.
    #[test]
    fn an_out_of_order_insert_finds_its_place_in_a_wrapped_ring() {
        let mut d = filled([0, 10, 20, 30]);
        d.pop_front();
        d.pop_front();
        d.insert(WaiterId(40), 40);
        d.insert(WaiterId(50), 50);
        let (front, back) = d.slots.as_slices();
        assert_eq!((front.len(), back.len()), (2, 2), "the ring wrapped");
        assert_eq!(d.insert(WaiterId(25), 25), None);
        assert_eq!(ids(&d), [20, 25, 30, 40, 50]);
        assert_eq!(d.get(&WaiterId(25)), Some(&25));
    }

    /// Every id stays findable, whatever was removed around it and
    /// whether or not a compaction moved it.
    #[test]
    fn ids_stay_valid_across_removals_and_compactions() {
        let mut d = filled(100..1100);
        for i in (101..1099).filter(|i| i % 7 != 0) {
            assert_eq!(d.remove(&WaiterId(i)), Some(i));
        }
        assert!(d.compactions > 0, "removals from the middle compact");
        for i in 100..1100 {
            let live = i == 100 || i == 1099 || i % 7 == 0;
            assert_eq!(d.contains(&WaiterId(i)), live, "{i}");
            assert_eq!(d.get(&WaiterId(i)).copied(), live.then_some(i), "{i}");
        }
        if let Some(v) = d.get_mut(&WaiterId(1099)) {
            *v += 1;
        }
        assert_eq!(d.get(&WaiterId(1099)), Some(&1100));
        for (_, v) in d.iter_mut() {
            *v *= 2;
        }
        assert_eq!(d.front(), Some((WaiterId(100), &200)));
    }

    /// Removals from the middle never pile tombstones up past the bound,
    /// compactions stay rare (amortized O(1) per removal) and keep the
    /// order. Both parities of the length: a threshold met only on
    /// equality would be skipped by one of them.
    #[test]
    fn compaction_keeps_the_order_and_the_bound() {
        for n in [2000u64, 2001] {
            let mut d = filled(1..=n);
            let mut removed = 0;
            for i in 2..n {
                if i % 10 != 0 {
                    assert_eq!(d.remove(&WaiterId(i)), Some(i));
                    removed += 1;
                }
                let bound = 2 * d.len() + COMPACT_SLACK;
                assert!(
                    d.stored() <= bound,
                    "{} slots for {} entries",
                    d.stored(),
                    d.len()
                );
            }
            assert!(d.compactions > 0);
            assert!(
                d.compactions <= removed / 16,
                "{} compactions for {removed} removals",
                d.compactions
            );
            let expected: Vec<u64> = std::iter::once(1)
                .chain((10..n).step_by(10))
                .chain(std::iter::once(n))
                .collect();
            assert_eq!(ids(&d), expected);
            let values: Vec<u64> = d.iter().map(|(_, v)| *v).collect();
            assert_eq!(values, expected);
        }
    }

    /// A recording reads back what it wrote, and refuses a deque that
    /// breaks its rules.
    #[cfg(feature = "recorder")]
    #[test]
    fn a_recording_reads_back_only_a_valid_deque() {
        let mut d = filled(1..=4);
        d.remove(&WaiterId(2));
        let text = serde_json::to_string(&d).unwrap();
        assert_eq!(text, r#"{"slots":[[1,1],[2,null],[3,3],[4,4]],"len":3}"#);
        let back: IdDeque<u64> = serde_json::from_str(&text).unwrap();
        assert_eq!(ids(&back), [1, 3, 4]);
        assert_eq!((back.len(), back.stored()), (3, 4));
        for bad in [
            r#"{"slots":[[3,3],[1,1]],"len":2}"#,
            r#"{"slots":[[1,1],[1,1]],"len":2}"#,
            r#"{"slots":[[1,null],[3,3]],"len":1}"#,
            r#"{"slots":[[1,1],[3,null]],"len":1}"#,
            r#"{"slots":[[1,1],[3,3]],"len":3}"#,
        ] {
            assert!(serde_json::from_str::<IdDeque<u64>>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_threshold() {
        assert!(!compaction_due(2 * 10 + COMPACT_SLACK, 10));
        assert!(compaction_due(2 * 10 + COMPACT_SLACK + 1, 10));
        assert!(!compaction_due(COMPACT_SLACK, 0));
    }
}
