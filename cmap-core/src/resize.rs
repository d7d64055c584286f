//! Resizing a running pool, beyond the spec (psycopg_pool's and deadpool's
//! `resize`): new minPoolSize and maxPoolSize arrive as an input like any
//! other, so a resize is deterministic and replayable.
//!
//! - Growing serves waiting checkouts at once (connections start for them
//!   within maxConnecting) and populates to the new minimum.
//! - Shrinking never interrupts work: available connections above the new
//!   maximum are closed at once, least recently used first; connections in
//!   use close as they come back, and pending ones as they arrive, while
//!   the pool holds more than the new maximum. Each closes with reason
//!   [`ClosedReason::Shrunk`].

use std::sync::Arc;
use std::time::Instant;

use crate::error::UsageError;
use crate::event::{ClosedReason, Event};
use crate::options::OptionsError;
use crate::pool::{Pool, PoolState};

impl<C> Pool<C> {
    /// Sets minPoolSize and maxPoolSize (0: no limit) of a running pool,
    /// and emits [`Event::PoolResized`]. See the module doc for what
    /// happens to the connections.
    ///
    /// # Errors
    ///
    /// [`UsageError::InvalidSize`] when `min` exceeds a non-zero `max`;
    /// [`UsageError::ResizeClosed`] once the pool is closed. The pool keeps
    /// its sizes either way.
    pub fn handle_resize(&mut self, now: Instant, min: u32, max: u32) -> Result<(), UsageError> {
        record!(self.record_input(now, || crate::Input::Resize { min, max }));
        self.advance(now);
        if self.state == PoolState::Closed {
            return Err(UsageError::ResizeClosed);
        }
        if max > 0 && min > max {
            return Err(UsageError::InvalidSize(OptionsError::MinExceedsMax { min, max }));
        }
        let options = Arc::make_mut(&mut self.options);
        options.min_pool_size = min;
        options.max_pool_size = max;
        self.emit(|p| Event::PoolResized {
            address: p.address.clone(),
            min_pool_size: min,
            max_pool_size: max,
        });
        let mut excess = self.excess();
        let idle = self.conns.extract_available(|_| {
            let close = excess > 0;
            excess = excess.saturating_sub(1);
            close
        });
        for available in idle {
            self.close(&available.meta, available.conn, ClosedReason::Shrunk, None);
        }
        self.note_size();
        // Growing: waiters get connections started for them now, and the
        // new minimum is populated without waiting for the next run.
        self.serve_queue();
        if self.state == PoolState::Ready && self.options.maintenance_interval.is_some() {
            self.populate();
        }
        Ok(())
    }

    /// How many connections the pool holds above maxPoolSize: none, except
    /// after a resize down, until enough of them are gone.
    fn excess(&self) -> usize {
        let o = &self.options;
        if !o.is_capped() {
            return 0;
        }
        self.conns.total().saturating_sub(o.max_pool_size as usize)
    }

    /// Whether a connection arriving now (checked in, or just established)
    /// would take the pool above maxPoolSize: it is closed instead. Only
    /// after a resize down; the common input reads one field.
    #[inline]
    pub(crate) fn over_size(&self) -> bool {
        self.shrinking.is_some() && {
            let o = &self.options;
            o.is_capped() && self.conns.total() >= o.max_pool_size as usize
        }
    }

    /// Records how far above maxPoolSize the pool is, after a resize or a
    /// connection closed while it shrinks: the bound `check_invariants`
    /// allows until the pool is back within its size.
    pub(crate) fn note_size(&mut self) {
        let total = self.conns.total();
        self.shrinking = (self.excess() > 0).then_some(total);
    }
}

#[cfg(test)]
mod tests {
    //! When a resize down is over: the common check-in is taken only while
    //! the pool is not shrinking, so a shrink that never ends leaves every
    //! later check-in on the slow path (nothing else tells).

    use crate::pool::Pool;
    use crate::test_clock::{origin, served};
    use crate::{PoolOptions, Pooled};

    /// A ready pool of 3, its 3 connections checked out, resized to 1.
    fn shrinking_with_three_in_use() -> (Pool<()>, Vec<Pooled<()>>) {
        let now = origin();
        let options = PoolOptions::builder()
            .max_pool_size(3)
            .maintenance_interval(None)
            .build()
            .unwrap();
        let mut pool: Pool<()> = Pool::new(now, "db:27017".parse().unwrap(), options);
        pool.handle_ready(now).unwrap();
        let held = served(&mut pool, now, 3);
        assert_eq!(held.len(), 3);
        pool.handle_resize(now, 0, 1).unwrap();
        assert_eq!(pool.shrinking, Some(3), "above its size, all in use");
        (pool, held)
    }

    #[test]
    fn a_shrink_ends_once_connections_closed_for_the_size_bring_the_pool_back() {
        let (mut pool, mut held) = shrinking_with_three_in_use();
        let now = pool.now;
        pool.handle_check_in(now, held.pop().unwrap()).unwrap();
        assert_eq!(pool.shrinking, Some(2), "still above its size");
        pool.handle_check_in(now, held.pop().unwrap()).unwrap();
        assert_eq!(pool.shrinking, None, "back at its size");
        assert_eq!(pool.check_invariants(), Ok(()));
    }

    #[test]
    fn a_shrink_ends_when_connections_taken_for_good_bring_the_pool_back() {
        let (mut pool, mut held) = shrinking_with_three_in_use();
        let now = pool.now;
        for _ in 0..2 {
            pool.handle_detach(now, held.pop().unwrap()).unwrap();
        }
        assert_eq!(pool.status().total, 1);
        assert_eq!(pool.shrinking, None, "back at its size");
        assert_eq!(pool.check_invariants(), Ok(()));
    }

    #[test]
    fn a_shrink_ends_when_a_clear_interrupts_the_connections_above_the_size() {
        let (mut pool, held) = shrinking_with_three_in_use();
        let now = pool.now;
        let clear = crate::pool::Clear {
            interrupt_in_use: true,
            service_id: None,
            cause: None,
        };
        pool.handle_clear(now, clear).unwrap();
        // Counted closed once interrupted, while they are still out.
        assert_eq!(pool.status().total, 0);
        assert_eq!(pool.shrinking, None, "within its size");
        for conn in held {
            pool.handle_check_in(now, conn).unwrap();
        }
        assert_eq!(pool.check_invariants(), Ok(()));
    }
}
