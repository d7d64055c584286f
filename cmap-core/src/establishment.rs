//! A connection's creation and its establishment's result (spec:
//! "Creating a Connection", "Establishing a Connection"): starting one
//! within maxPoolSize, maxConnecting and the reconnect backoff, then the
//! inputs that report how its establishment went.

use std::time::Instant;

use crate::connection::{ConnectionId, Meta, ServiceId, WaiterId};
use crate::connection_set::{Available, Pending};
use crate::error::{CheckOutError, ClearCause, EstablishError, UsageError};
use crate::event::{ClosedReason, Event};
use crate::measure::Measure;
use crate::options::EstablishFailure;
use crate::output::Action;
use crate::pace::Reaction;
use crate::pool::{Pool, PoolState};

impl<C> Pool<C> {
    /// Reports that connection `id` is established; `service_id` is what the
    /// handshake said in load-balanced mode (spec: "Establishing a
    /// Connection").
    ///
    /// # Errors
    ///
    /// [`UsageError::UnknownConnection`] for an id the pool never issued. A
    /// result for a connection the pool abandoned is accepted and the
    /// connection disposed of.
    pub fn handle_established(
        &mut self,
        now: Instant,
        id: ConnectionId,
        conn: C,
        service_id: Option<ServiceId>,
    ) -> Result<(), UsageError> {
        record!(self.record_input(now, || crate::Input::Established {
            id,
            connection: (),
            service_id
        }));
        self.advance_with_result_of(now, id);
        let Some(pending) = self.conns.remove_pending(id) else {
            return self.late_result(id, Some(conn));
        };
        self.forget_request(pending.requester);
        let generation = match (self.options.load_balanced, service_id) {
            (true, Some(service)) => {
                let entry = self.services.entry(service).or_default();
                entry.count += 1;
                entry.generation
            }
            _ => pending.generation,
        };
        self.backoff.on_success();
        self.stats.connections_opened += 1;
        let duration = self.since(pending.created_at);
        if self.pace.on_established(duration) == Reaction::Cut {
            self.stats.connecting_cuts += 1;
        }
        self.measure(Measure::Ready { duration });
        self.emit(|p| Event::ConnectionReady {
            address: p.address.clone(),
            connection_id: id,
            duration,
        });
        // Boxed once per connection: checking it out and in then moves a
        // pointer, not the whole record.
        let meta = Box::new(Meta {
            id,
            pool: self.id,
            generation,
            service_id: service_id.filter(|_| self.options.load_balanced),
            created_at: pending.created_at,
            last_used: self.now,
            checked_out_at: self.now,
            expires_at: self.lifetime_end(pending.created_at),
            slot: 0,
            errored: false,
        });
        if self.state == PoolState::Closed {
            self.close(&meta, conn, ClosedReason::PoolClosed, None);
            return Ok(());
        }
        if self.over_size() {
            self.close(&meta, conn, ClosedReason::Shrunk, None);
            return Ok(());
        }
        // Spec ("Populating the Pool"): the connection is available before
        // the pending count drops, so nobody starts another one needlessly.
        self.conns.push_available(Available { meta, conn });
        self.serve_queue();
        // Its maxConnecting slot is free: population towards minPoolSize
        // goes on at once rather than at the next background run.
        if self.state == PoolState::Ready && self.options.maintenance_interval.is_some() {
            self.populate();
        }
        Ok(())
    }

    /// Reports that establishing connection `id` failed. The connection is
    /// closed with reason `error`, and then:
    ///
    /// - an error labelled `SystemOverloadedError` (a network error or
    ///   timeout before the handshake completed) never clears the pool
    ///   (spec: "Backpressure-enabled"); the checkout the connection was
    ///   made for fails with it, or keeps waiting with
    ///   `keep_waiting_on_overload`, while the pool retries with backoff;
    /// - any other error fails that checkout, and the pool reacts as
    ///   `EstablishFailure` says (by default, SDAM's reaction: clear).
    ///
    /// # Errors
    ///
    /// [`UsageError::UnknownConnection`] for an id the pool never issued.
    pub fn handle_establish_failed(
        &mut self,
        now: Instant,
        id: ConnectionId,
        error: EstablishError,
    ) -> Result<(), UsageError> {
        record!(self.record_input(now, || crate::Input::EstablishFailed {
            id,
            error: error.clone(),
        }));
        self.advance_with_result_of(now, id);
        let Some(pending) = self.conns.remove_pending(id) else {
            return self.late_result(id, None);
        };
        self.stats.connections_failed += 1;
        let overload = error.is_overload();
        // The server said it is overloaded: an adaptive pace falls back.
        if overload && self.pace.on_overload() == Reaction::Cut {
            self.stats.connecting_cuts += 1;
        }
        let fails_requester = !(overload && self.options.keep_waiting_on_overload);
        let victim = pending
            .requester
            .filter(|_| fails_requester)
            .and_then(|w| self.queue.remove(w).map(|waiter| (w, waiter)));
        if !fails_requester {
            self.forget_request(pending.requester);
        }
        // SDAM ignores a labelled error, and a stale one: a connection
        // started before the last clear already had its pool cleared, so it
        // must not clear (and pause) the new generation again.
        if !overload
            && self.options.establish_failure == EstablishFailure::ClearPool
            && !self.options.load_balanced
            && self.state != PoolState::Closed
            && pending.generation == self.generation
        {
            self.clear(ClearCause::EstablishFailed(error.clone()), false);
        }
        self.measure(Measure::EstablishFailed { kind: error.kind() });
        self.closed_event(id, None, ClosedReason::Error, Some(error.clone()));
        if let Some((waiter, queued)) = victim {
            let failure = CheckOutError::ConnectionError {
                address: self.address.clone(),
                connection_id: id,
                source: error.clone(),
            };
            self.fail(waiter, queued.started_at, failure);
        }
        self.on_establish_failure(error);
        self.serve_queue();
        Ok(())
    }

    /// The deadline of the checkout that connection `id`, being
    /// established, was started for, while that checkout still waits for
    /// it; `None` for a connection started for minPoolSize, a checkout
    /// without a deadline, and one served otherwise, timed out or
    /// cancelled. A driver asks when it starts the `Action::Establish`,
    /// to bound the establishment by what is left of the operation that
    /// asked for it (client-side operations timeout, "Server Selection":
    /// `min(connectTimeoutMS, what is left)`).
    pub fn establishment_deadline(&self, id: ConnectionId) -> Option<Instant> {
        let requester = self.conns.pending(id)?.requester?;
        self.queue.get(requester)?.deadline
    }

    /// `advance` for an input that reports connection `id`'s result: a
    /// checkout that expires now must not abandon the connection that has
    /// just arrived.
    fn advance_with_result_of(&mut self, now: Instant, id: ConnectionId) {
        self.arriving = Some(id);
        self.advance(now);
        self.arriving = None;
    }

    /// A clear: an adaptive pace falls back to its minimum, and grows
    /// one at a time from there.
    pub(crate) fn pace_after_clear(&mut self) {
        if self.pace.on_clear() == Reaction::Cut {
            self.stats.connecting_cuts += 1;
        }
    }

    /// Whether a connection may be started now, for waiting checkouts
    /// (`for_waiters`) or for minPoolSize: ready, under maxPoolSize and
    /// maxConnecting (or the adaptive pace's limit; one probe while the
    /// server refuses), and past the reconnect backoff that applies.
    #[inline]
    pub(crate) fn can_start_connection(&self, for_waiters: bool) -> bool {
        let o = &self.options;
        self.state == PoolState::Ready
            && (!o.is_capped() || self.conns.total() < o.max_pool_size as usize)
            && self.conns.pending_len() < self.connecting_limit() as usize
            && self.backoff.hold_until(for_waiters).is_none_or(|t| t <= self.now)
    }

    /// Spec: "Creating a Connection".
    pub(crate) fn start_connection(&mut self, requester: Option<WaiterId>) -> ConnectionId {
        let id = ConnectionId(self.next_connection_id);
        self.next_connection_id += 1;
        self.conns.insert_pending(
            id,
            Pending {
                created_at: self.now,
                generation: self.generation,
                requester,
            },
        );
        self.emit(|p| Event::ConnectionCreated {
            address: p.address.clone(),
            connection_id: id,
        });
        self.push_action(Action::Establish { id });
        id
    }

    /// A result for a connection that is no longer pending: one the pool
    /// abandoned (its Closed event is out; the connection is disposed of),
    /// or an id it never issued (misuse).
    fn late_result(&mut self, id: ConnectionId, conn: Option<C>) -> Result<(), UsageError> {
        if id.0 == 0 || id.0 >= self.next_connection_id {
            return Err(UsageError::UnknownConnection(id));
        }
        if let Some(connection) = conn {
            let reason = match self.state {
                PoolState::Closed => ClosedReason::PoolClosed,
                _ => ClosedReason::Stale,
            };
            self.dispose(id, connection, reason);
        }
        Ok(())
    }

    /// The instant a connection created at `created_at` reaches its end of
    /// life, shortened by up to `jitter` of the lifetime at random.
    fn lifetime_end(&mut self, created_at: Instant) -> Option<Instant> {
        let lifetime = self.options.max_lifetime?;
        let shorten = self.options.lifetime_jitter * self.rng.next_f64();
        created_at.checked_add(lifetime.mul_f64(1.0 - shorten))
    }
}
