//! The pool state machine: every transition of the spec's "Connection Pool
//! Behaviors", in one place. Inputs are the `handle_*` methods; outputs go
//! to one ordered queue (`output_queue.rs`) drained by
//! [`Pool::poll_output`].
//!
//! What each input does in each state of the pool (checked against the
//! code, cell by cell, by `state_table.rs`, whose data this is):
//!
//! | input | paused | ready | closed |
//! | --- | --- | --- | --- |
//! | check out | fails: `PoolClearedError` (retryable) | served by an available connection, or queued (and a connection started for it within the limits) | fails: `PoolClosedError` |
//! | check in | pooled, or closed if perished (stale after the clear) | handed to the oldest waiter, or pooled; closed if perished | closed (`poolClosed`) |
//! | established | available (not handed out while paused) | available, then the oldest waiter gets it | disposed of (abandoned at close: its event is out) |
//! | establish failed (unlabelled) | closed (`error`); a stale failure does not clear again | clears (pauses; waiters fail), closed (`error`), its requester fails with the error; a labelled failure leaves the pool ready | ignored (abandoned at close) |
//! | clear | stays paused, generation + 1, no event | paused, generation + 1, every waiter fails (retryable) | nothing |
//! | ready | ready; a background run populates | nothing | `Err(PoolClosed)` |
//! | close | closed: idle closed, pending abandoned | closed: idle closed, pending abandoned, waiters fail | nothing |
//! | resize | new sizes; idle above the maximum closed | new sizes; waiters served, idle above the maximum closed | `Err(ResizeClosed)` |
//! | force close | `Err(NotClosed)` | `Err(NotClosed)` | connections in use interrupted (`poolClosed`) |
//!
//! Background runs, reconnect backoff and the timer table live in
//! `maintenance.rs`, resizing in `resize.rs`, forcing a closed pool's
//! connections in `shutdown.rs`, the getters in `stats.rs`; this file is
//! the spec's pseudocode.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::connection::{ConnectionId, Meta, PoolId, Pooled, ServiceId, WaiterId};
use crate::connection_set::{Available, ConnectionSet, InUse, Pending};
use crate::error::{CheckInError, CheckOutError, ClearCause, EstablishError, TimeoutContext, UsageError};
use crate::event::{CheckOutFailedReason, ClosedReason, Event};
use crate::maintenance::{Backoff, SplitMix64};
use crate::options::{EstablishFailure, PoolOptions};
use crate::output::{Action, Output};
use crate::perish::PerishRules;
use crate::stats::Stats;
use crate::wait_queue::{WaitQueue, Waiter};
use crate::Address;

/// The jitter seed of a pool whose options set none and whose driver drew
/// none (a driver draws a random one: see `PoolOptionsBuilder::seed`).
const DEFAULT_SEED: u64 = 0x5EED_C0DE;

/// The pool's state (spec: `ConnectionPool.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub enum PoolState {
    /// The initial state, and the state after a clear: no checkouts, no
    /// background population.
    Paused,
    /// Serving checkouts and populating to `minPoolSize`.
    Ready,
    /// Closed for good.
    Closed,
}

/// What a clear applies to. `Clear::default()` is a plain clear.
#[derive(Debug, Clone, Default)]
pub struct Clear {
    /// Interrupt in-use (and pending) connections of the cleared
    /// generation (spec: `interruptInUseConnections`).
    pub interrupt_in_use: bool,
    /// In load-balanced mode, the service to clear; required there and
    /// refused elsewhere.
    pub service_id: Option<ServiceId>,
    /// Why, for the `PoolClearedError` message of the failed checkouts.
    pub cause: Option<Arc<str>>,
}

/// Per-service generation and connection count (spec: "Load Balancer Mode").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct ServiceGeneration {
    pub(crate) generation: u32,
    pub(crate) count: u32,
}

/// The CMAP connection pool as a deterministic state machine, generic over
/// the connection type `C`. The crate documentation states the driver
/// contract with a sketch of its loop; in short:
///
/// - **Inputs** — one `handle_*` call per thing that happened, `now`
///   first: [`handle_check_out`](Self::handle_check_out) /
///   [`handle_check_out_until`](Self::handle_check_out_until) (a
///   checkout, whose outcome comes as `Deliver` or `Fail`),
///   [`handle_check_in`](Self::handle_check_in),
///   [`handle_detach`](Self::handle_detach),
///   [`handle_established`](Self::handle_established),
///   [`handle_establish_failed`](Self::handle_establish_failed),
///   [`handle_cancel`](Self::handle_cancel) (a checkout's caller went
///   away), [`handle_clear`](Self::handle_clear),
///   [`handle_ready`](Self::handle_ready),
///   [`handle_close`](Self::handle_close),
///   [`handle_force_close`](Self::handle_force_close),
///   [`handle_resize`](Self::handle_resize),
///   [`handle_reset_after_fork`](Self::handle_reset_after_fork) and
///   [`handle_timeout`](Self::handle_timeout).
/// - **Outputs** — after *every* input, drain
///   [`poll_output`](Self::poll_output) until `None`
///   ([`has_output`](Self::has_output) says whether there is any), and
///   carry out the actions and deliver the events in that order.
/// - **Timers** — sleep until [`poll_timeout`](Self::poll_timeout), then
///   call `handle_timeout` with the clock's `now`.
/// - **Getters** — [`status`](Self::status), [`stats`](Self::stats),
///   [`options`](Self::options), [`state`](Self::state),
///   [`generation`](Self::generation),
///   [`service_generation`](Self::service_generation),
///   [`address`](Self::address), [`now`](Self::now),
///   [`last_establish_error`](Self::last_establish_error),
///   [`check_invariants`](Self::check_invariants).
/// - **Tuning**, for a driver's fast paths:
///   [`handle_check_out_direct`](Self::handle_check_out_direct) returns a
///   connection served at once instead of queueing a `Deliver` (for a
///   driver that waits for its checkouts itself: cmap-async's `get()`);
///   [`set_events_enabled`](Self::set_events_enabled) stops building
///   events nobody will read; [`set_events_apart`](Self::set_events_apart)
///   with [`take_events`](Self::take_events) and
///   [`pending_events`](Self::pending_events) hands a driver that delivers
///   events on a path of its own each input's events in one swap.
///
/// # Errors
///
/// Pool outcomes (a timeout, a cleared or closed pool, a failed
/// establishment) are outputs. An input returns `Err` only for misuse,
/// and then changes nothing: [`UsageError`] (an unknown connection or
/// waiter id, a clear in the wrong mode, readying or resizing a closed
/// pool, forcing connections of an open one) or [`CheckInError`] (a
/// connection of another pool, handed back so that nothing is lost).
#[repr(C)]
#[cfg_attr(
    feature = "recorder",
    derive(serde::Serialize, serde::Deserialize),
    serde(bound(serialize = "", deserialize = "C: Default"))
)]
pub struct Pool<C> {
    /// The fields are laid out in declaration order (`repr(C)`): those
    /// every check out and check in writes come first and fit in 96
    /// bytes, so that a driver that keeps the pool right behind its lock
    /// word (as cmap-async does, on a 128-byte boundary) moves two cache
    /// lines between cores per input instead of one per scattered field.
    /// Read-mostly state follows.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel"))]
    pub(crate) now: Instant,
    /// The hot counters of [`Stats`]; the rest are in `stats`.
    pub(crate) hot: HotCounters,
    pub(crate) conns: ConnectionSet<C>,
    pub(crate) state: PoolState,
    pub(crate) events_enabled: bool,
    /// Events kept out of `out`, for [`Pool::take_events`].
    pub(crate) events_apart: bool,
    pub(crate) generation: u32,
    pub(crate) options: Arc<PoolOptions>,
    #[cfg_attr(feature = "recorder", serde(skip, default = "PoolId::unset"))]
    pub(crate) id: PoolId,
    pub(crate) queue: WaitQueue,
    pub(crate) backoff: Backoff,
    /// Empty whenever a recording snapshots the pool.
    #[cfg_attr(feature = "recorder", serde(skip))]
    pub(crate) out: VecDeque<Output<C>>,
    #[cfg_attr(feature = "recorder", serde(skip))]
    pub(crate) apart: Vec<Event>,
    pub(crate) address: Address,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::pairs"))]
    pub(crate) services: BTreeMap<ServiceId, ServiceGeneration>,
    pub(crate) next_connection_id: u64,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
    pub(crate) next_run: Option<Instant>,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::clear_cause"))]
    clear_cause: ClearCause,
    /// The connection whose result the current input reports.
    #[cfg_attr(feature = "recorder", serde(skip))]
    arriving: Option<ConnectionId>,
    pub(crate) rng: SplitMix64,
    /// After a resize down, while the pool holds more than maxPoolSize:
    /// its total then, the most `check_invariants` allows (`resize.rs`).
    pub(crate) shrinking: Option<usize>,
    /// The other counters; its `requests`, `usage_time` and `wait_time`
    /// stay zero (they are in `hot`; [`Pool::stats`] puts them together).
    pub(crate) stats: Stats,
    /// The flight recorder, while one runs (`recorder/`).
    #[cfg(feature = "recorder")]
    #[serde(skip)]
    pub(crate) recorder: Option<Box<crate::recorder::Recorder>>,
}

/// The counters of [`Stats`] that every check out or check in moves, kept
/// beside the rest of the hot state (see [`Pool`]).
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub(crate) struct HotCounters {
    /// Checkouts started; also the last `WaiterId` issued.
    pub(crate) requests: u64,
    pub(crate) usage_time: Duration,
    pub(crate) wait_time: Duration,
}

/// What [`Pool::handle_check_out_direct`] did with a checkout.
#[derive(Debug)]
#[must_use = "a connection returned here is checked out: use it, then check it in"]
pub enum CheckOut<C> {
    /// Served at once: the connection is checked out, and no `Deliver`
    /// action follows for it.
    Ready(Pooled<C>),
    /// Queued, or failed: its outcome comes as `Action::Deliver` or
    /// `Action::Fail` for this id.
    Later(WaiterId),
}

/// How a checkout served at once gets its connection.
#[derive(Clone, Copy)]
pub(crate) enum Serve {
    /// In an `Action::Deliver`.
    ByAction,
    /// Returned by the input.
    Directly,
}

impl<C> Pool<C> {
    /// Creates a paused pool and emits `ConnectionPoolCreated` (spec:
    /// "Creating a Connection Pool").
    pub fn new(now: Instant, address: Address, options: PoolOptions) -> Pool<C> {
        let next_run = options.maintenance_interval.map(|i| now + i);
        let rng = SplitMix64::new(options.seed.unwrap_or(DEFAULT_SEED));
        let mut pool = Pool {
            address,
            options: Arc::new(options),
            id: PoolId::next(),
            state: PoolState::Paused,
            generation: 0,
            services: BTreeMap::new(),
            conns: ConnectionSet::default(),
            queue: WaitQueue::default(),
            next_connection_id: 1,
            out: VecDeque::with_capacity(16),
            events_enabled: true,
            events_apart: false,
            apart: Vec::new(),
            now,
            hot: HotCounters::default(),
            next_run,
            clear_cause: ClearCause::NeverReady,
            arriving: None,
            rng,
            shrinking: None,
            stats: Stats::default(),
            backoff: Backoff::default(),
            #[cfg(feature = "recorder")]
            recorder: None,
        };
        pool.emit(|p| Event::PoolCreated {
            address: p.address.clone(),
            options: p.options.clone(),
        });
        pool
    }

    // ----- inputs -------------------------------------------------------

    /// Starts a checkout limited by `waitQueueTimeoutMS`. The outcome comes
    /// later as [`Action::Deliver`] or [`Action::Fail`] for the returned id
    /// (spec: "Checking Out a Connection").
    pub fn handle_check_out(&mut self, now: Instant) -> WaiterId {
        let deadline = self.options.wait_queue_timeout.and_then(|t| now.checked_add(t));
        self.handle_check_out_until(now, deadline)
    }

    /// Starts a checkout with its own deadline (`None`: wait forever), for
    /// a caller that computes timeouts itself (client-side operation
    /// timeouts, `get_timeout`).
    pub fn handle_check_out_until(&mut self, now: Instant, deadline: Option<Instant>) -> WaiterId {
        match self.check_out(now, deadline, Serve::ByAction) {
            CheckOut::Later(id) => id,
            CheckOut::Ready(_) => unreachable!("served by action, a checkout is never returned"),
        }
    }

    /// [`handle_check_out_until`](Self::handle_check_out_until) for a
    /// caller that waits for the outcome itself: a checkout served at once
    /// (a connection is available and nobody is queued) returns its
    /// connection here, and no `Deliver` action follows, which spares the
    /// common checkout a trip through the output queue. Its events are
    /// queued as usual. Any other checkout returns its id, and its outcome
    /// comes as `Deliver` or `Fail`, as from `handle_check_out_until`.
    pub fn handle_check_out_direct(&mut self, now: Instant, deadline: Option<Instant>) -> CheckOut<C> {
        self.check_out(now, deadline, Serve::Directly)
    }

    pub(crate) fn check_out(&mut self, now: Instant, deadline: Option<Instant>, serve: Serve) -> CheckOut<C> {
        record!(self.record_check_out(now, deadline, matches!(serve, Serve::Directly)));
        self.advance(now);
        self.hot.requests += 1;
        let id = WaiterId(self.hot.requests);
        let started_at = self.now;
        self.emit(|p| Event::ConnectionCheckOutStarted {
            address: p.address.clone(),
        });
        match self.state {
            PoolState::Closed => self.fail(id, started_at, self.pool_closed_error()),
            PoolState::Paused => self.fail(id, started_at, self.pool_cleared_error()),
            PoolState::Ready => {
                // A deadline already behind the pool's clock (the caller's
                // own, or a stale `now`) gets nothing, not even a connection
                // that is available; one that is now may still be served.
                let passed = deadline.is_some_and(|d| d < self.now);
                if self.queue.is_empty() && !passed {
                    if let Some(available) = self.take_available() {
                        return match serve {
                            Serve::Directly => {
                                let connection = self.hand_out(started_at, available);
                                record!(self.record_served(id, connection.id()));
                                CheckOut::Ready(connection)
                            }
                            Serve::ByAction => {
                                self.deliver(id, started_at, available);
                                CheckOut::Later(id)
                            }
                        };
                    }
                }
                if deadline.is_some_and(|d| d <= self.now) {
                    self.time_out(id, started_at);
                    return CheckOut::Later(id);
                }
                self.stats.requests_queued += 1;
                self.queue.push(
                    id,
                    Waiter {
                        started_at,
                        deadline,
                        requested: None,
                    },
                );
                self.serve_queue();
            }
        }
        CheckOut::Later(id)
    }

    /// Gives back a checked-out connection (spec: "Checking In a
    /// Connection"). A connection from another pool is refused and returned.
    ///
    /// # Errors
    ///
    /// [`CheckInError::WrongPool`] for a connection another pool created;
    /// it is handed back in the error, and nothing changes.
    pub fn handle_check_in(&mut self, now: Instant, connection: Pooled<C>) -> Result<(), CheckInError<C>> {
        if connection.meta.pool != self.id {
            return Err(CheckInError::WrongPool(connection));
        }
        record!(self.record_check_in(now, &connection.meta));
        self.advance(now);
        let Pooled { mut meta, conn } = connection;
        let entry = self.forget_in_use(&meta);
        self.emit(|p| Event::ConnectionCheckedIn {
            address: p.address.clone(),
            connection_id: meta.id,
        });
        if entry.interrupted {
            // Already counted closed (its event out) when it was
            // interrupted: by a clear, or by forcing a closed pool's
            // connections (`shutdown.rs`).
            self.dispose(meta.id, conn, ClosedReason::Stale);
            return Ok(());
        }
        let reason = if self.state == PoolState::Closed {
            Some(ClosedReason::PoolClosed)
        } else if self.over_size() {
            Some(ClosedReason::Shrunk)
        } else {
            self.perished(&meta, false)
        };
        match reason {
            Some(reason) => {
                if reason == ClosedReason::Error {
                    self.stats.returns_bad += 1;
                }
                self.close(&meta, conn, reason, None);
                if reason == ClosedReason::Shrunk {
                    self.note_size();
                }
                self.serve_queue();
            }
            None => {
                meta.last_used = self.now;
                let available = Available { meta, conn };
                if self.queue.is_empty() || self.state != PoolState::Ready {
                    self.conns.push_available(available);
                } else {
                    self.hand_to_queue(available);
                }
            }
        }
        Ok(())
    }

    /// A connection just checked in and judged fit, while checkouts wait:
    /// the oldest waiter gets it. The same as making it available and
    /// serving the queue (the available stack is last in, first out, so
    /// that serves this very connection first), without the push, the pop
    /// and a second perish check.
    fn hand_to_queue(&mut self, available: Available<C>) {
        let Some((id, waiter)) = self.queue.pop_front() else {
            return self.conns.push_available(available);
        };
        self.forget_request_of(&waiter);
        self.deliver(id, waiter.started_at, available);
        self.serve_queue();
    }

    /// Takes a checked-out connection out of the pool for good: it stops
    /// counting against `maxPoolSize` and is closed with reason `detached`.
    ///
    /// # Errors
    ///
    /// [`CheckInError::WrongPool`] for a connection another pool created;
    /// it is handed back in the error, and nothing changes.
    pub fn handle_detach(&mut self, now: Instant, connection: Pooled<C>) -> Result<C, CheckInError<C>> {
        if connection.meta.pool != self.id {
            return Err(CheckInError::WrongPool(connection));
        }
        record!(self.record_input(now, || crate::recorder::Input::Detach(*connection.meta)));
        self.advance(now);
        let Pooled { meta, conn } = connection;
        if !self.forget_in_use(&meta).interrupted {
            self.closed_event(meta.id, meta.service_id, ClosedReason::Detached, None);
            self.serve_queue();
        }
        Ok(conn)
    }

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
        record!(self.record_input(now, || crate::recorder::Input::Established { id, service_id }));
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
            self.note_size();
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
        record!(
            self.record_input(now, || crate::recorder::Input::EstablishFailed {
                id,
                error: crate::recorder::codec::ErrorText::of(&error),
            })
        );
        self.advance_with_result_of(now, id);
        let Some(pending) = self.conns.remove_pending(id) else {
            return self.late_result(id, None);
        };
        self.stats.connections_failed += 1;
        let overload = error.is_overload();
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
        record!(self.record_input(now, || crate::recorder::Input::Clear {
            interrupt_in_use: clear.interrupt_in_use,
            service_id: clear.service_id,
            cause: clear.cause.clone(),
        }));
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
        record!(self.record_input(now, || crate::recorder::Input::ResetAfterFork));
        self.advance(now);
        self.backoff.auto_ready_at = None;
        self.clear(ClearCause::Forked, true);
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
        record!(self.record_input(now, || crate::recorder::Input::Ready));
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
        record!(self.record_input(now, || crate::recorder::Input::Close));
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
        record!(self.record_input(now, || crate::recorder::Input::Cancel(waiter)));
        self.advance(now);
        let Some(queued) = self.queue.remove(waiter) else {
            return Err(UsageError::UnknownWaiter(waiter));
        };
        self.stats.requests_cancelled += 1;
        self.forget_request_of(&queued);
        Ok(())
    }

    /// Lets time pass: expires checkouts, runs background work that is due,
    /// and re-readies after a backoff. Safe to call at any time.
    pub fn handle_timeout(&mut self, now: Instant) {
        record!(self.record_input(now, || crate::recorder::Input::Timeout));
        self.advance(now);
        self.run_due_timers();
        self.serve_queue();
    }

    // ----- transitions --------------------------------------------------

    /// Moves the clock (never backwards) and expires due checkouts first,
    /// so that no input serves a checkout past its deadline.
    #[inline]
    pub(crate) fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
        // Most inputs find nobody queued and no backoff: no call.
        if !self.queue.is_empty() || self.backoff.is_active() {
            self.expire_and_resume();
        }
    }

    /// `advance` for an input that reports connection `id`'s result: a
    /// checkout that expires now must not abandon the connection that has
    /// just arrived.
    fn advance_with_result_of(&mut self, now: Instant, id: ConnectionId) {
        self.arriving = Some(id);
        self.advance(now);
        self.arriving = None;
    }

    /// The rest of `advance`, when someone is queued or a backoff runs;
    /// kept out of line so that `advance` itself is inlined.
    #[inline(never)]
    fn expire_and_resume(&mut self) {
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

    pub(crate) fn since(&self, then: Instant) -> Duration {
        // Most checkouts are served in the input that started them: a
        // comparison spares them the subtraction.
        if then >= self.now {
            return Duration::ZERO;
        }
        self.now.saturating_duration_since(then)
    }

    pub(crate) fn mark_ready(&mut self) {
        self.state = PoolState::Ready;
        self.emit(|p| Event::PoolReady {
            address: p.address.clone(),
        });
        // The PoolReady event comes first; population starts in the run.
        self.schedule_run_now();
    }

    /// Serves queued checkouts in arrival order from available connections,
    /// then starts as many connections as the remaining ones need.
    pub(crate) fn serve_queue(&mut self) {
        if self.state != PoolState::Ready {
            return;
        }
        while !self.queue.is_empty() {
            let Some(available) = self.take_available() else {
                break;
            };
            let Some((id, waiter)) = self.queue.pop_front() else {
                break;
            };
            self.forget_request_of(&waiter);
            self.deliver(id, waiter.started_at, available);
        }
        self.start_connections_for_queue();
    }

    /// Spec: create a connection when none is available, total <
    /// maxPoolSize and pending < maxConnecting; every pending connection
    /// will serve the queue head when ready, so only the excess of waiters
    /// over pending connections asks for more.
    fn start_connections_for_queue(&mut self) {
        while self.queue.len() > self.conns.pending_len() && self.can_start_connection(true) {
            let requester = self.queue.first_without_request_mut().map(|(id, _)| id);
            let id = self.start_connection(requester);
            if let Some(waiter) = requester.and_then(|w| self.queue.get_mut(w)) {
                waiter.requested = Some(id);
            }
        }
    }

    /// Whether a connection may be started now, for waiting checkouts
    /// (`for_waiters`) or for minPoolSize: ready, under maxPoolSize and
    /// maxConnecting, and past the reconnect backoff that applies.
    pub(crate) fn can_start_connection(&self, for_waiters: bool) -> bool {
        let o = &self.options;
        self.state == PoolState::Ready
            && (!o.is_capped() || self.conns.total() < o.max_pool_size as usize)
            && self.conns.pending_len() < o.max_connecting as usize
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

    /// Spec: iterate the available connections, closing perished ones,
    /// until a good one is found.
    fn take_available(&mut self) -> Option<Available<C>> {
        while let Some(available) = self.conns.pop_available() {
            match self.perished(&available.meta, true) {
                Some(reason) => self.close(&available.meta, available.conn, reason, None),
                None => return Some(available),
            }
        }
        None
    }

    /// Why a connection is perished, if it is (see `perish.rs`).
    pub(crate) fn perished(&self, meta: &Meta, available: bool) -> Option<ClosedReason> {
        self.perish_rules().perished(meta, available)
    }

    pub(crate) fn perish_rules(&self) -> PerishRules<'_> {
        PerishRules {
            now: self.now,
            generation: self.generation,
            services: &self.services,
            options: &self.options,
        }
    }

    fn deliver(&mut self, waiter: WaiterId, started_at: Instant, available: Available<C>) {
        let connection = self.hand_out(started_at, available);
        self.push_action(Action::Deliver { waiter, connection });
    }

    /// Marks an available connection in use by a checkout that started at
    /// `started_at`, and emits its `ConnectionCheckedOut`.
    fn hand_out(&mut self, started_at: Instant, available: Available<C>) -> Pooled<C> {
        let Available { mut meta, conn } = available;
        meta.checked_out_at = self.now;
        meta.slot = self.conns.insert_in_use(InUse {
            id: meta.id,
            generation: meta.generation,
            service_id: meta.service_id,
            interrupted: false,
        });
        let duration = self.since(started_at);
        self.hot.wait_time += duration;
        self.emit(|p| Event::ConnectionCheckedOut {
            address: p.address.clone(),
            connection_id: meta.id,
            duration,
        });
        Pooled { meta, conn }
    }

    pub(crate) fn fail(&mut self, waiter: WaiterId, started_at: Instant, error: CheckOutError) {
        self.stats.requests_failed += 1;
        let duration = self.since(started_at);
        self.emit(|p| Event::ConnectionCheckOutFailed {
            address: p.address.clone(),
            reason: CheckOutFailedReason::of(&error),
            error: Box::new(error.clone()),
            duration,
        });
        self.push_action(Action::Fail { waiter, error });
    }

    fn time_out(&mut self, waiter: WaiterId, started_at: Instant) {
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

    /// Spec: "Closing a Connection" of a connection the pool holds.
    pub(crate) fn close(
        &mut self,
        meta: &Meta,
        conn: C,
        reason: ClosedReason,
        error: Option<EstablishError>,
    ) {
        self.closed_event(meta.id, meta.service_id, reason, error);
        self.dispose(meta.id, conn, reason);
    }

    /// The bookkeeping half of closing: counts, service map, event.
    pub(crate) fn closed_event(
        &mut self,
        id: ConnectionId,
        service_id: Option<ServiceId>,
        reason: ClosedReason,
        error: Option<EstablishError>,
    ) {
        self.stats.connections_closed += 1;
        self.release_service(service_id);
        self.emit(|p| Event::ConnectionClosed {
            address: p.address.clone(),
            connection_id: id,
            reason,
            error,
        });
    }

    /// The I/O half of closing, left to the driver.
    fn dispose(&mut self, id: ConnectionId, connection: C, reason: ClosedReason) {
        self.push_action(Action::Close {
            id,
            connection,
            reason,
        });
    }

    /// Spec: the service entry goes once its connection count reaches 0.
    fn release_service(&mut self, service_id: Option<ServiceId>) {
        let Some(service) = service_id else { return };
        if let Some(entry) = self.services.get_mut(&service) {
            entry.count = entry.count.saturating_sub(1);
            if entry.count == 0 {
                self.services.remove(&service);
            }
        }
    }

    fn forget_in_use(&mut self, meta: &Meta) -> InUse {
        self.hot.usage_time += self.since(meta.checked_out_at);
        // A `Pooled` is unique and carries its slot, so this cannot miss.
        self.conns
            .take_in_use(meta.slot, meta.id)
            .expect("a checked-out connection of this pool is in its in-use table")
    }

    fn forget_request_of(&mut self, waiter: &Waiter) {
        if let Some(id) = waiter.requested {
            if let Some(pending) = self.conns.pending_mut(id) {
                pending.requester = None;
            }
        }
    }

    fn forget_request(&mut self, requester: Option<WaiterId>) {
        if let Some(waiter) = requester.and_then(|w| self.queue.get_mut(w)) {
            waiter.requested = None;
        }
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

    /// Non-load-balanced clear: bump the generation, pause, interrupt if
    /// asked, and evict the wait queue eagerly.
    pub(crate) fn clear(&mut self, cause: ClearCause, interrupt_in_use: bool) {
        if self.state == PoolState::Closed {
            return;
        }
        let cleared = self.generation;
        self.generation = self.generation.wrapping_add(1);
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

    fn pool_closed_error(&self) -> CheckOutError {
        CheckOutError::PoolClosed {
            address: self.address.clone(),
        }
    }

    fn pool_cleared_error(&self) -> CheckOutError {
        CheckOutError::PoolCleared {
            address: self.address.clone(),
            cause: self.clear_cause.clone(),
        }
    }

    /// The instant a connection created at `created_at` reaches its end of
    /// life, shortened by up to `jitter` of the lifetime at random.
    fn lifetime_end(&mut self, created_at: Instant) -> Option<Instant> {
        let lifetime = self.options.max_lifetime?;
        let shorten = self.options.lifetime_jitter * self.rng.next_f64();
        created_at.checked_add(lifetime.mul_f64(1.0 - shorten))
    }
}
