//! Closing gracefully, beyond the spec (psycopg_pool's `close(timeout)`,
//! HikariCP's `close()`): the driver closes the pool (spec: "Closing a
//! Connection Pool"), which fails queued checkouts at once and closes
//! connections in use as they come back; it gives them time to come back,
//! and then forces the rest with [`Pool::handle_force_close`].

use std::time::Instant;

use crate::error::UsageError;
use crate::event::ClosedReason;
use crate::output::Action;
use crate::pool::{Pool, PoolState};

impl<C> Pool<C> {
    /// Interrupts every connection still in use in a closed pool: each is
    /// closed in the pool's books (`ConnectionClosed`, reason
    /// `poolClosed`, counted in `connections_lost`) and gets an
    /// [`Action::Interrupt`]; its holder's handle is disposed of when it
    /// comes back. Returns how many were forced.
    ///
    /// # Errors
    ///
    /// [`UsageError::NotClosed`] while the pool is not closed: close it
    /// first, so that no checkout is served meanwhile.
    pub fn handle_force_close(&mut self, now: Instant) -> Result<usize, UsageError> {
        record!(self.record_input(now, || crate::Input::ForceClose));
        self.advance(now);
        if self.state != PoolState::Closed {
            return Err(UsageError::NotClosed);
        }
        let forced = self.conns.interrupt_in_use(|_| true);
        for entry in &forced {
            self.stats.connections_lost += 1;
            self.closed_event(entry.id, entry.service_id, ClosedReason::PoolClosed, None);
            self.push_action(Action::Interrupt { id: entry.id });
        }
        Ok(forced.len())
    }
}
