//! The connections a pool holds: available (owned here), pending and in
//! use (owned by whoever establishes or uses them; only their bookkeeping
//! is here). Plain data: no outputs.
//!
//! Counts follow the spec: total = pending + available + in use.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::connection::{ConnectionId, Meta, ServiceId, WaiterId};

/// A connection being established (spec state "pending").
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct Pending {
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel"))]
    pub(crate) created_at: Instant,
    pub(crate) generation: u32,
    /// The checkout it was created for, while that checkout still waits.
    pub(crate) requester: Option<WaiterId>,
}

/// An established connection waiting in the pool (spec state "available").
#[cfg_attr(
    feature = "recorder",
    derive(serde::Serialize, serde::Deserialize),
    serde(bound(serialize = "", deserialize = "C: Default"))
)]
pub(crate) struct Available<C> {
    pub(crate) meta: Box<Meta>,
    /// A recording keeps no connection: a replay has `()` here.
    #[cfg_attr(feature = "recorder", serde(skip))]
    pub(crate) conn: C,
}

/// Bookkeeping of a checked-out connection (spec state "in use").
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct InUse {
    pub(crate) id: ConnectionId,
    pub(crate) generation: u32,
    pub(crate) service_id: Option<ServiceId>,
    /// Interrupted by a clear: already counted closed, disposed of at
    /// check-in.
    pub(crate) interrupted: bool,
}

/// A cell of the in-use table: a checked-out connection's bookkeeping, or
/// a free cell that links to the next free one.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
enum Cell {
    Used(InUse),
    Free { next: usize },
}

/// Ends the free list of the in-use table.
const NO_FREE_CELL: usize = usize::MAX;

/// Laid out in declaration order: the fields every check out and check in
/// write come first, so that they share the cache lines of the driver's
/// lock (see `Pool`).
#[repr(C)]
#[cfg_attr(
    feature = "recorder",
    derive(serde::Serialize, serde::Deserialize),
    serde(bound(serialize = "", deserialize = "C: Default"))
)]
pub(crate) struct ConnectionSet<C> {
    /// A stack: the most recently returned connection is reused first, so
    /// the surplus sinks to the bottom and perishes (psycopg3: LIFO).
    available: Vec<Available<C>>,
    in_use_count: usize,
    /// The first free cell of `in_use`; the free cells link to each other,
    /// so checking out and in allocates nothing once warm and writes no
    /// second vector.
    free_head: usize,
    /// In-use table indexed by slot.
    in_use: Vec<Cell>,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::pairs"))]
    pending: BTreeMap<ConnectionId, Pending>,
}

impl<C> Default for ConnectionSet<C> {
    fn default() -> Self {
        ConnectionSet {
            available: Vec::new(),
            in_use_count: 0,
            free_head: NO_FREE_CELL,
            in_use: Vec::new(),
            pending: BTreeMap::new(),
        }
    }
}

impl<C> ConnectionSet<C> {
    pub(crate) fn total(&self) -> usize {
        self.available.len() + self.pending.len() + self.in_use_len()
    }
    pub(crate) fn available_len(&self) -> usize {
        self.available.len()
    }
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len()
    }
    pub(crate) fn in_use_len(&self) -> usize {
        self.in_use_count
    }

    #[inline]
    pub(crate) fn push_available(&mut self, available: Available<C>) {
        self.available.push(available);
    }
    pub(crate) fn pop_available(&mut self) -> Option<Available<C>> {
        self.available.pop()
    }
    /// Removes the available connections `perished` picks, oldest first.
    pub(crate) fn extract_available<F>(&mut self, mut perished: F) -> Vec<Available<C>>
    where
        F: FnMut(&Meta) -> bool,
    {
        self.available.extract_if(.., |a| perished(&a.meta)).collect()
    }
    pub(crate) fn available_metas(&self) -> impl Iterator<Item = &Meta> {
        self.available.iter().map(|a| &*a.meta)
    }

    pub(crate) fn insert_pending(&mut self, id: ConnectionId, pending: Pending) {
        self.pending.insert(id, pending);
    }
    pub(crate) fn remove_pending(&mut self, id: ConnectionId) -> Option<Pending> {
        self.pending.remove(&id)
    }
    pub(crate) fn pending_mut(&mut self, id: ConnectionId) -> Option<&mut Pending> {
        self.pending.get_mut(&id)
    }
    pub(crate) fn pending(&self, id: ConnectionId) -> Option<&Pending> {
        self.pending.get(&id)
    }
    /// Removes the pending connections `pick` selects, in id order.
    pub(crate) fn extract_pending<F>(&mut self, mut pick: F) -> Vec<(ConnectionId, Pending)>
    where
        F: FnMut(&Pending) -> bool,
    {
        let ids: Vec<ConnectionId> = self
            .pending
            .iter()
            .filter(|(_, p)| pick(p))
            .map(|(id, _)| *id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.pending.remove(&id).map(|p| (id, p)))
            .collect()
    }
    pub(crate) fn pending_ids(&self) -> impl Iterator<Item = (&ConnectionId, &Pending)> {
        self.pending.iter()
    }

    /// Records a checked-out connection and returns its slot.
    pub(crate) fn insert_in_use(&mut self, entry: InUse) -> usize {
        self.in_use_count += 1;
        match self.free_head {
            NO_FREE_CELL => {
                self.in_use.push(Cell::Used(entry));
                self.in_use.len() - 1
            }
            slot => {
                if let Cell::Free { next } = self.in_use[slot] {
                    self.free_head = next;
                }
                self.in_use[slot] = Cell::Used(entry);
                slot
            }
        }
    }

    /// The entry of the checked-out connection in `slot`, if it is `id`.
    #[inline]
    pub(crate) fn in_use_entry(&self, slot: usize, id: ConnectionId) -> Option<InUse> {
        match self.in_use.get(slot)? {
            Cell::Used(entry) if entry.id == id => Some(*entry),
            _ => None,
        }
    }

    /// Frees the cell `slot` of a checked-out connection whose entry
    /// there is `entry` (as [`in_use_entry`](Self::in_use_entry) found it).
    pub(crate) fn free_in_use(&mut self, slot: usize, entry: InUse) {
        self.in_use[slot] = Cell::Free { next: self.free_head };
        self.free_head = slot;
        if !entry.interrupted {
            self.in_use_count -= 1;
        }
    }

    /// Marks the in-use connections `pick` selects as interrupted (no
    /// longer counted) and returns them in id order.
    pub(crate) fn interrupt_in_use<F>(&mut self, mut pick: F) -> Vec<InUse>
    where
        F: FnMut(&InUse) -> bool,
    {
        let mut picked = Vec::new();
        for cell in &mut self.in_use {
            if let Cell::Used(entry) = cell {
                if !entry.interrupted && pick(entry) {
                    entry.interrupted = true;
                    picked.push(*entry);
                }
            }
        }
        self.in_use_count -= picked.len();
        picked.sort_by_key(|e| e.id);
        picked
    }

    pub(crate) fn in_use_entries(&self) -> impl Iterator<Item = &InUse> {
        self.in_use.iter().filter_map(|cell| match cell {
            Cell::Used(entry) => Some(entry),
            Cell::Free { .. } => None,
        })
    }
}
