//! The pool's invariants, checked by property tests after every step and
//! available to drivers' own tests.

use std::collections::BTreeMap;

use crate::pool::{Pool, PoolState};

impl<C> Pool<C> {
    /// Checks every invariant of the pool's state and says which one broke.
    /// Cheap enough for tests; not meant for a hot path.
    pub fn check_invariants(&self) -> Result<(), String> {
        let o = &self.options;
        let total = self.conns.total();
        let pending = self.conns.pending_len();
        let ensure = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_owned()) };
        // Above maxPoolSize only after a resize down, never above the total
        // it left, and with nothing idle to close.
        ensure(
            !o.is_capped()
                || total <= o.max_pool_size as usize
                || (self.shrinking.is_some_and(|was| total <= was) && self.conns.available_len() == 0),
            "total exceeds maxPoolSize",
        )?;
        ensure(
            pending <= o.max_connecting as usize,
            "pending exceeds maxConnecting",
        )?;
        ensure(
            self.queue.next_deadline().is_none_or(|d| d > self.now),
            "a queued checkout outlived its deadline",
        )?;
        match self.state {
            PoolState::Ready if !self.queue.is_empty() => {
                ensure(
                    self.conns.available_len() == 0,
                    "a checkout waits while a connection is available",
                )?;
                ensure(
                    self.queue.len() <= pending || !self.can_start_connection(true),
                    "a checkout waits while a connection could be started",
                )?;
            }
            PoolState::Paused => ensure(self.queue.is_empty(), "a paused pool has queued checkouts")?,
            PoolState::Closed => {
                ensure(self.queue.is_empty(), "a closed pool has queued checkouts")?;
                ensure(
                    self.conns.available_len() + pending == 0,
                    "a closed pool holds available or pending connections",
                )?;
            }
            PoolState::Ready => {}
        }
        for (waiter, queued) in self.queue.iter() {
            if let Some(c) = queued.requested {
                let linked = self
                    .conns
                    .pending_ids()
                    .any(|(id, p)| *id == c && p.requester == Some(waiter));
                ensure(
                    linked,
                    "a queued checkout names a pending connection that does not name it",
                )?;
            }
        }
        for (id, p) in self.conns.pending_ids() {
            if id.0 >= self.next_connection_id {
                return Err(format!("pending connection {id} has an id never issued"));
            }
            if let Some(w) = p.requester {
                if !self.queue.contains(w) {
                    return Err(format!(
                        "pending connection {id} names checkout {w}, which is not queued"
                    ));
                }
            }
        }
        if o.load_balanced {
            let mut counts = BTreeMap::new();
            let live = self.conns.available_metas().map(|m| m.service_id).chain(
                self.conns
                    .in_use_entries()
                    .filter(|e| !e.interrupted)
                    .map(|e| e.service_id),
            );
            for service in live.flatten() {
                *counts.entry(service).or_insert(0u32) += 1;
            }
            for (service, entry) in &self.services {
                if counts.get(service).copied().unwrap_or(0) != entry.count {
                    return Err(format!("service {service} counts {} connections", entry.count));
                }
            }
        }
        Ok(())
    }
}
