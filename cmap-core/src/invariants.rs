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
        // A fixed pace never lets more be pending; an adaptive one may fall
        // below the connects in flight (they are not abandoned), never
        // below its minimum nor above its maximum.
        self.pace.check(o.max_connecting)?;
        let most = o.adaptive_connecting.map_or(o.max_connecting, |a| a.max);
        ensure(pending <= most as usize, "pending exceeds maxConnecting")?;
        self.queue.check()?;
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

#[cfg(test)]
mod tests {
    //! A correct pool never breaks an invariant, so these tests break one
    //! field at a time by hand and require `check_invariants` to say so.

    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::connection::{ConnectionId, WaiterId};
    use crate::connection_set::Pending;
    use crate::pool::{Pool, PoolState};
    use crate::test_clock::{origin, served};
    use crate::wait_queue::Waiter;
    use crate::PoolOptions;

    /// A ready pool of at most `max` connections without background runs,
    /// holding `available` established connections, all available.
    fn pool_with(max: u32, available: usize) -> (Pool<()>, Instant) {
        let now = origin();
        let options = PoolOptions::builder()
            .max_pool_size(max)
            .max_connecting(4)
            .maintenance_interval(None)
            .build()
            .unwrap();
        let mut pool: Pool<()> = Pool::new(now, "db:27017".parse().unwrap(), options);
        pool.handle_ready(now).unwrap();
        for connection in served(&mut pool, now, available) {
            pool.handle_check_in(now, connection).unwrap();
        }
        while pool.poll_output().is_some() {}
        assert_eq!(pool.conns.available_len(), available);
        assert_eq!(pool.check_invariants(), Ok(()));
        (pool, now)
    }

    fn waiter(now: Instant, deadline: Option<Instant>, requested: Option<ConnectionId>) -> Waiter {
        Waiter {
            started_at: now,
            deadline,
            requested,
        }
    }

    fn pending(now: Instant, requester: Option<WaiterId>) -> Pending {
        Pending {
            created_at: now,
            generation: 0,
            requester,
        }
    }

    #[test]
    fn a_shrinking_pool_above_its_size_may_hold_nothing_idle() {
        let (mut pool, _) = pool_with(2, 2);
        Arc::make_mut(&mut pool.options).max_pool_size = 1;
        pool.shrinking = Some(2);
        assert_eq!(
            pool.check_invariants(),
            Err("total exceeds maxPoolSize".to_owned())
        );
    }

    #[test]
    fn a_queued_checkout_must_be_named_by_the_connection_it_names() {
        let (mut pool, now) = pool_with(2, 0);
        let id = ConnectionId(pool.next_connection_id);
        pool.next_connection_id += 1;
        pool.conns.insert_pending(id, pending(now, None));
        pool.queue.push(WaiterId(1), waiter(now, None, Some(id)));
        assert_eq!(
            pool.check_invariants(),
            Err("a queued checkout names a pending connection that does not name it".to_owned())
        );
    }

    #[test]
    fn a_pending_connection_may_only_name_a_queued_checkout() {
        let (mut pool, now) = pool_with(2, 0);
        let id = ConnectionId(pool.next_connection_id);
        pool.next_connection_id += 1;
        pool.conns.insert_pending(id, pending(now, Some(WaiterId(9))));
        assert_eq!(
            pool.check_invariants(),
            Err(format!(
                "pending connection {id} names checkout {}, which is not queued",
                WaiterId(9)
            ))
        );
    }

    #[test]
    fn a_checkout_may_not_wait_at_its_deadline() {
        let (mut pool, now) = pool_with(1, 0);
        pool.queue.push(WaiterId(1), waiter(now, Some(now), None));
        assert_eq!(
            pool.check_invariants(),
            Err("a queued checkout outlived its deadline".to_owned())
        );
        // A deadline still ahead is fine (one connection, being made).
        let (mut pool, now) = pool_with(1, 0);
        let id = ConnectionId(pool.next_connection_id);
        pool.next_connection_id += 1;
        pool.conns.insert_pending(id, pending(now, Some(WaiterId(1))));
        let ahead = now + Duration::from_millis(1);
        pool.queue.push(WaiterId(1), waiter(now, Some(ahead), Some(id)));
        assert_eq!(pool.check_invariants(), Ok(()));
    }

    #[test]
    fn a_ready_pool_serves_its_queue_from_what_is_available() {
        let (mut pool, now) = pool_with(2, 1);
        pool.queue.push(WaiterId(9), waiter(now, None, None));
        assert_eq!(
            pool.check_invariants(),
            Err("a checkout waits while a connection is available".to_owned())
        );
    }

    #[test]
    fn a_closed_pool_holds_nothing_available_or_pending() {
        // One available and none pending: a product of the counts would
        // be zero.
        let (mut pool, _) = pool_with(2, 1);
        pool.state = PoolState::Closed;
        assert_eq!(
            pool.check_invariants(),
            Err("a closed pool holds available or pending connections".to_owned())
        );
        // One of each: a difference would be zero.
        let (mut pool, now) = pool_with(2, 1);
        let id = ConnectionId(pool.next_connection_id);
        pool.next_connection_id += 1;
        pool.conns.insert_pending(id, pending(now, None));
        pool.state = PoolState::Closed;
        assert_eq!(
            pool.check_invariants(),
            Err("a closed pool holds available or pending connections".to_owned())
        );
    }
}
