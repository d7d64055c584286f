//! The pool's own state (spec: "Clearing a Connection Pool", "Marking a
//! Connection Pool as Ready", "Closing a Connection Pool", "Forking"):
//! clearing, per generation or per service, with the interruption of what
//! the cleared generation holds; readying; closing; and resetting in a
//! forked child.

use std::time::Instant;

use crate::connection::ServiceId;
use crate::connection_set::{InUse, Pending};
use crate::error::{CheckOutError, ClearCause, UsageError};
use crate::event::{ClosedReason, Event};
use crate::output::Action;
use crate::pool::{Clear, Pool, PoolState};

impl<C> Pool<C> {
    /// Clears the pool (spec: "Clearing a Connection Pool"): a new
    /// generation, the pool paused and every queued checkout failed with a
    /// retryable `PoolClearedError`; in load-balanced mode, only the
    /// service's generation moves.
    ///
    /// # Errors
    ///
    /// [`UsageError::ClearMode`]: a load-balanced pool is cleared per
    /// service id, and any other pool without one.
    pub fn handle_clear(&mut self, now: Instant, clear: Clear) -> Result<(), UsageError> {
        record!(self.record_input(now, || crate::Input::Clear(clear.clone())));
        self.advance(now);
        if self.options.load_balanced {
            let Some(service) = clear.service_id else {
                return Err(UsageError::ClearMode(
                    "a load-balanced pool is cleared per service id",
                ));
            };
            self.clear_service(service, clear.interrupt_in_use);
            return Ok(());
        }
        if clear.service_id.is_some() {
            return Err(UsageError::ClearMode(
                "only a load-balanced pool is cleared per service id",
            ));
        }
        // A clear by the user (or its SDAM) takes over from auto-ready.
        self.backoff.auto_ready_at = None;
        self.clear(ClearCause::Cleared(clear.cause), clear.interrupt_in_use);
        Ok(())
    }

    /// Resets the pool in a forked child (spec: "Forking"): the pool clears
    /// itself, interrupting what it lent out, and closes every connection it
    /// holds, since their sockets belong to the parent too.
    pub fn handle_reset_after_fork(&mut self, now: Instant) {
        record!(self.record_input(now, || crate::Input::ResetAfterFork));
        self.advance(now);
        if self.state == PoolState::Closed {
            return;
        }
        self.backoff.auto_ready_at = None;
        self.clear(ClearCause::Forked, true);
        // Every connection lent out or pending is the parent's, whatever
        // its generation: a load-balanced one carries its service's, which
        // the whole-pool clear above does not compare.
        self.interrupt(|_| true, |_| true);
        for available in self.conns.extract_available(|_| true) {
            self.close(&available.meta, available.conn, ClosedReason::Stale, None);
        }
    }

    /// Marks the pool ready (spec: "Marking a Connection Pool as Ready").
    /// Ready already: nothing happens. Closed: an error.
    ///
    /// # Errors
    ///
    /// [`UsageError::PoolClosed`] once the pool is closed.
    pub fn handle_ready(&mut self, now: Instant) -> Result<(), UsageError> {
        record!(self.record_input(now, || crate::Input::Ready));
        self.advance(now);
        match self.state {
            PoolState::Ready => Ok(()),
            PoolState::Closed => Err(UsageError::PoolClosed),
            PoolState::Paused => {
                self.backoff.auto_ready_at = None;
                self.mark_ready();
                Ok(())
            }
        }
    }

    /// Closes the pool (spec: "Closing a Connection Pool"): available
    /// connections are closed, pending ones abandoned, queued checkouts
    /// fail with `PoolClosedError`; in-use ones close when checked in.
    /// Closing twice does nothing.
    pub fn handle_close(&mut self, now: Instant) {
        record!(self.record_input(now, || crate::Input::Close));
        self.advance(now);
        if self.state == PoolState::Closed {
            return;
        }
        self.state = PoolState::Closed;
        self.next_run = None;
        self.backoff.auto_ready_at = None;
        for available in self.conns.extract_available(|_| true) {
            self.close(&available.meta, available.conn, ClosedReason::PoolClosed, None);
        }
        for (id, _) in self.conns.extract_pending(|_| true) {
            self.closed_event(id, None, ClosedReason::PoolClosed, None);
            self.push_action(Action::AbortEstablish { id });
        }
        while let Some((id, waiter)) = self.queue.pop_front() {
            self.fail(id, waiter.started_at, self.pool_closed_error());
        }
        self.emit(|p| Event::PoolClosed {
            address: p.address.clone(),
        });
    }

    pub(crate) fn mark_ready(&mut self) {
        self.state = PoolState::Ready;
        self.emit(|p| Event::PoolReady {
            address: p.address.clone(),
        });
        // The PoolReady event comes first; population starts in the run.
        self.schedule_run_now();
    }

    /// Non-load-balanced clear: bump the generation, pause, interrupt if
    /// asked, and evict the wait queue eagerly.
    pub(crate) fn clear(&mut self, cause: ClearCause, interrupt_in_use: bool) {
        if self.state == PoolState::Closed {
            return;
        }
        let cleared = self.generation;
        self.generation = self.generation.wrapping_add(1);
        self.pace_after_clear();
        let was_paused = self.state == PoolState::Paused;
        self.state = PoolState::Paused;
        self.clear_cause = cause;
        // Spec: no PoolCleared event when already paused; the generation
        // still moves.
        if !was_paused {
            self.emit(|p| Event::PoolCleared {
                address: p.address.clone(),
                service_id: None,
                interrupt_in_use_connections: interrupt_in_use,
            });
        }
        if interrupt_in_use {
            self.interrupt(|e| e.generation <= cleared, |p| p.generation <= cleared);
        }
        while let Some((id, waiter)) = self.queue.pop_front() {
            self.forget_request_of(&waiter);
            self.fail(id, waiter.started_at, self.pool_cleared_error());
        }
        self.schedule_run_now();
    }

    /// Load-balanced clear: only the service's generation moves; the pool
    /// stays ready and its queue stays (spec: "Clearing a load balanced
    /// pool").
    fn clear_service(&mut self, service: ServiceId, interrupt_in_use: bool) {
        if self.state == PoolState::Closed {
            return;
        }
        self.pace_after_clear();
        let cleared = self.services.get_mut(&service).map(|entry| {
            entry.generation = entry.generation.wrapping_add(1);
            entry.generation.wrapping_sub(1)
        });
        self.emit(|p| Event::PoolCleared {
            address: p.address.clone(),
            service_id: Some(service),
            interrupt_in_use_connections: interrupt_in_use,
        });
        if let (true, Some(cleared)) = (interrupt_in_use, cleared) {
            self.interrupt(
                |e| e.service_id == Some(service) && e.generation <= cleared,
                |_| false,
            );
        }
        self.schedule_run_now();
        self.serve_queue();
    }

    /// Spec: interrupt in-use connections of the cleared generation (they
    /// count as closed now) and abandon pending ones.
    fn interrupt(&mut self, in_use: impl FnMut(&InUse) -> bool, pending: impl FnMut(&Pending) -> bool) {
        for entry in self.conns.interrupt_in_use(in_use) {
            self.stats.connections_lost += 1;
            self.closed_event(entry.id, entry.service_id, ClosedReason::Stale, None);
            self.push_action(Action::Interrupt { id: entry.id });
        }
        for (id, abandoned) in self.conns.extract_pending(pending) {
            self.forget_request(abandoned.requester);
            self.closed_event(id, None, ClosedReason::Stale, None);
            self.push_action(Action::AbortEstablish { id });
        }
    }

    pub(crate) fn pool_closed_error(&self) -> CheckOutError {
        CheckOutError::PoolClosed {
            address: self.address.clone(),
        }
    }

    pub(crate) fn pool_cleared_error(&self) -> CheckOutError {
        CheckOutError::PoolCleared {
            address: self.address.clone(),
            cause: self.clear_cause.clone(),
        }
    }
}
