//! A map keyed by the core's monotonic waiter ids: the checkouts waiting
//! in the adapter, in id order. Inserts come in id order (a checkout is
//! queued in the same input that took its id), so insert is a push at the
//! back (O(1)), lookup is a binary search (O(log n)), and removal leaves a
//! tombstone, dropped at the ends at once and compacted when tombstones
//! outnumber the live entries (amortized O(1)). No allocation in steady
//! state.

use std::collections::VecDeque;

use cmap_core::WaiterId;

pub(crate) struct IdMap<T> {
    /// Sorted by id; `None`: removed, not compacted yet. Both ends are live.
    slots: VecDeque<(WaiterId, Option<T>)>,
    len: usize,
}

impl<T> Default for IdMap<T> {
    fn default() -> Self {
        IdMap {
            slots: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T> IdMap<T> {
    fn index(&self, id: WaiterId) -> Result<usize, usize> {
        // Ids are sorted and unique, so `id` is at most `id - first` in;
        // exactly there when no id in between is missing (the usual case:
        // under contention every checkout queues).
        if let Some(guess) = self
            .slots
            .front()
            .and_then(|(first, _)| id.0.checked_sub(first.0))
            .and_then(|d| usize::try_from(d).ok())
        {
            if self.slots.get(guess).is_some_and(|(i, _)| *i == id) {
                return Ok(guess);
            }
        }
        self.slots.binary_search_by_key(&id, |(i, _)| *i)
    }

    /// Inserts `value` under `id` (replacing an entry already there).
    pub(crate) fn insert(&mut self, id: WaiterId, value: T) {
        if self.slots.back().is_none_or(|(last, _)| *last < id) {
            self.slots.push_back((id, Some(value)));
            self.len += 1;
            return;
        }
        // Out of order: not expected, but kept correct.
        match self.index(id) {
            Ok(at) => {
                if self.slots[at].1.replace(value).is_none() {
                    self.len += 1;
                }
            }
            Err(at) => {
                self.slots.insert(at, (id, Some(value)));
                self.len += 1;
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn get_mut(&mut self, id: &WaiterId) -> Option<&mut T> {
        let at = self.index(*id).ok()?;
        self.slots[at].1.as_mut()
    }

    pub(crate) fn remove(&mut self, id: &WaiterId) -> Option<T> {
        let value = if self
            .slots
            .front()
            .is_some_and(|(first, v)| first == id && v.is_some())
        {
            // The usual case: waiters are served oldest first.
            self.slots.pop_front().and_then(|(_, v)| v)?
        } else {
            let at = self.index(*id).ok()?;
            self.slots[at].1.take()?
        };
        self.len -= 1;
        while self.slots.front().is_some_and(|(_, v)| v.is_none()) {
            self.slots.pop_front();
        }
        while self.slots.back().is_some_and(|(_, v)| v.is_none()) {
            self.slots.pop_back();
        }
        if self.slots.len() > 2 * self.len + 32 {
            self.slots.retain(|(_, v)| v.is_some());
        }
        Some(value)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_lookup_and_remove_in_any_order() {
        let mut m = IdMap::default();
        for i in [1, 2, 3, 5, 8, 13] {
            m.insert(WaiterId(i), i * 10);
        }
        m.insert(WaiterId(4), 40); // out of order still works
        assert_eq!(m.remove(&WaiterId(5)), Some(50));
        assert_eq!(m.remove(&WaiterId(5)), None);
        assert_eq!(m.get_mut(&WaiterId(13)).copied(), Some(130));
        assert_eq!(m.remove(&WaiterId(1)), Some(10));
        assert_eq!(m.remove(&WaiterId(13)), Some(130));
        assert_eq!(m.len(), 4);
        for i in [2, 3, 4, 8] {
            assert_eq!(m.remove(&WaiterId(i)), Some(i * 10));
        }
        assert_eq!(m.len(), 0);
        assert!(m.slots.is_empty());
        // Many removals from the middle compact the tombstones.
        for i in 100..1100 {
            m.insert(WaiterId(i), i);
        }
        for i in 101..1099 {
            m.remove(&WaiterId(i));
        }
        assert!(m.slots.len() <= 2 * m.len() + 32);
        assert_eq!(m.get_mut(&WaiterId(1099)).copied(), Some(1099));
    }
}
