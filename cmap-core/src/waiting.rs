//! Queued checkouts (spec: "Checking Out a Connection", the wait queue's
//! part): serving the queue in arrival order, handing a checked-in
//! connection to the oldest waiter, starting connections for those still
//! waiting, expiring and failing checkouts, and cancelling one whose
//! caller went away. The queue itself, plain data, is `wait_queue.rs`.

use std::time::Instant;

use crate::connection::{ConnectionId, WaiterId};
use crate::connection_set::Available;
use crate::error::{CheckOutError, TimeoutContext, UsageError};
use crate::event::{CheckOutFailedReason, ClosedReason, Event};
use crate::measure::Measure;
use crate::output::Action;
use crate::pool::{HandOver, Pool, PoolState, Serve};
use crate::wait_queue::Waiter;

/// Whether a connection handed to a waiter at check-in still holds its
/// cell in the in-use table (see `Pool::check_in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InUseCell {
    Held,
    Released,
}

impl<C> Pool<C> {
    /// Withdraws a queued checkout whose caller went away. It ends without
    /// an outcome. If it was already served (its `Deliver` is in flight),
    /// this is `UnknownWaiter` and the caller must check the connection in.
    ///
    /// # Errors
    ///
    /// [`UsageError::UnknownWaiter`] when the checkout is no longer queued
    /// (served, failed or cancelled): if its `Deliver` is in flight, the
    /// caller checks that connection in.
    pub fn handle_cancel(&mut self, now: Instant, waiter: WaiterId) -> Result<(), UsageError> {
        record!(self.record_input(now, || crate::Input::Cancel(waiter)));
        self.advance(now);
        let Some(queued) = self.queue.remove(waiter) else {
            return Err(UsageError::UnknownWaiter(waiter));
        };
        self.stats.requests_cancelled += 1;
        self.forget_request_of(&queued);
        Ok(())
    }

    /// A connection just checked in and judged fit, while checkouts wait:
    /// the oldest waiter (`id`, just taken off the queue) gets it. The same
    /// as making it available and serving the queue (the available stack
    /// is last in, first out, so that serves this very connection first),
    /// without the push, the pop and a second perish check.
    /// Served `Directly`, the connection is returned as a [`HandOver`]
    /// (recorded as the `Deliver` it stands for) instead of queued.
    /// `cell`: whether the connection still holds its in-use cell.
    pub(crate) fn hand_to_oldest(
        &mut self,
        (id, waiter): (WaiterId, Waiter),
        available: Available<C>,
        serve: Serve,
        cell: InUseCell,
    ) -> Option<HandOver<C>> {
        self.forget_request_of(&waiter);
        let waited = self.since(waiter.started_at);
        let connection = match cell {
            InUseCell::Held => self.hand_out_held(waited, available.meta, available.conn),
            InUseCell::Released => self.hand_out(waited, available),
        };
        let handed = match serve {
            Serve::ByAction => {
                self.push_action(Action::Deliver {
                    waiter: id,
                    connection,
                });
                None
            }
            Serve::Directly => {
                record!(self.record_delivered(id, connection.id()));
                Some(HandOver {
                    waiter: id,
                    connection,
                })
            }
        };
        self.serve_queue();
        handed
    }

    /// The rest of `advance`, when a checkout's deadline has passed or a backoff
    /// runs; kept out of line so that `advance` itself is inlined.
    #[inline(never)]
    pub(crate) fn expire_and_resume(&mut self) {
        while let Some((id, waiter)) = self.queue.pop_expired(self.now) {
            self.forget_request_of(&waiter);
            self.time_out(id, waiter.started_at);
            self.abandon_unneeded(waiter.requested);
        }
        // A reconnect backoff that ended since the last input lets the queue
        // ask for connections again at once, as a timer at its end would
        // have; every input, not only `handle_timeout`, may be the first to
        // see it.
        if self.backoff.is_active() {
            let was_waiting = self.backoff.not_before_waiting.is_some();
            let was_populating = self.backoff.not_before.is_some();
            self.backoff.expire(self.now);
            if was_waiting && self.backoff.not_before_waiting.is_none() {
                self.start_connections_for_queue();
            }
            if was_populating && self.backoff.not_before.is_none() && self.state == PoolState::Ready {
                self.populate();
            }
        }
    }

    /// A connection being established for a checkout that just timed out
    /// is abandoned unless another waiter or minPoolSize needs it: a
    /// connect never outlives the deadline of the checkout that asked for
    /// it for nothing. Closed with reason `error`; the pool is not cleared.
    fn abandon_unneeded(&mut self, requested: Option<ConnectionId>) {
        let Some(id) = requested.filter(|&id| Some(id) != self.arriving) else {
            return;
        };
        let needed = self.queue.len() >= self.conns.pending_len()
            || self.conns.total() <= self.options.min_pool_size as usize;
        if needed || self.conns.remove_pending(id).is_none() {
            return;
        }
        self.stats.connections_abandoned += 1;
        self.closed_event(id, None, ClosedReason::Error, None);
        self.push_action(Action::AbortEstablish { id });
    }

    /// Serves queued checkouts in arrival order from available connections,
    /// then starts as many connections as the remaining ones need. Inlined:
    /// in a busy pool's usual case (nothing available, no connection may
    /// start) it is a few comparisons.
    #[inline]
    pub(crate) fn serve_queue(&mut self) {
        if self.state != PoolState::Ready {
            return;
        }
        while !self.queue.is_empty() && self.conns.available_len() > 0 {
            if !self.serve_oldest_from_available() {
                break;
            }
        }
        self.start_connections_for_queue();
    }

    /// One turn of `serve_queue` (out of line: most calls have no turn):
    /// the oldest waiter gets the first available connection that has not
    /// perished. False when every one had (closed, as the spec says).
    #[inline(never)]
    fn serve_oldest_from_available(&mut self) -> bool {
        let Some(available) = self.take_available() else {
            return false;
        };
        match self.queue.pop_front() {
            Some((id, waiter)) => {
                self.forget_request_of(&waiter);
                self.deliver(id, self.since(waiter.started_at), available);
                true
            }
            None => {
                // `serve_queue` asks only while someone waits.
                self.conns.push_available(available);
                false
            }
        }
    }

    /// Spec: create a connection when none is available, total <
    /// maxPoolSize and pending < maxConnecting; every pending connection
    /// will serve the queue head when ready, so only the excess of waiters
    /// over pending connections asks for more. The test is inlined (most
    /// calls find no connection to start), each start is not.
    #[inline]
    fn start_connections_for_queue(&mut self) {
        while self.queue.len() > self.conns.pending_len() && self.can_start_connection(true) {
            self.start_connection_for_queue();
        }
    }

    /// Starts one connection for the queue, for its oldest waiter that
    /// asked for none yet.
    #[inline(never)]
    fn start_connection_for_queue(&mut self) {
        let requester = self.queue.first_without_request_mut().map(|(id, _)| id);
        let id = self.start_connection(requester);
        if let Some(waiter) = requester.and_then(|w| self.queue.get_mut(w)) {
            waiter.requested = Some(id);
        }
    }

    pub(crate) fn fail(&mut self, waiter: WaiterId, started_at: Instant, error: CheckOutError) {
        self.stats.requests_failed += 1;
        let duration = self.since(started_at);
        let reason = CheckOutFailedReason::of(&error);
        self.measure(Measure::CheckOutFailed { reason });
        self.emit(|p| Event::ConnectionCheckOutFailed {
            address: p.address.clone(),
            reason,
            error: Box::new(error.clone()),
            duration,
        });
        self.push_action(Action::Fail { waiter, error });
    }

    pub(crate) fn time_out(&mut self, waiter: WaiterId, started_at: Instant) {
        self.stats.requests_timed_out += 1;
        let mut status = self.status();
        // The queue no longer holds it, but it was waiting.
        status.waiting += 1;
        let error = CheckOutError::WaitQueueTimeout {
            address: self.address.clone(),
            context: Box::new(TimeoutContext {
                waited: self.since(started_at),
                max_pool_size: self.options.max_pool_size,
                status,
                last_error: self.backoff.last_error.clone(),
            }),
        };
        self.fail(waiter, started_at, error);
    }

    pub(crate) fn forget_request_of(&mut self, waiter: &Waiter) {
        if let Some(id) = waiter.requested {
            if let Some(pending) = self.conns.pending_mut(id) {
                pending.requester = None;
            }
        }
    }

    pub(crate) fn forget_request(&mut self, requester: Option<WaiterId>) {
        if let Some(waiter) = requester.and_then(|w| self.queue.get_mut(w)) {
            waiter.requested = None;
        }
    }
}
