//! The pool state machine: the `Pool` type, its creation, and the spec's
//! transitions every checkout takes (spec: "Checking Out a Connection",
//! "Checking In a Connection"), with the steps they share: moving the
//! clock, taking an available connection, handing it out, closing one.
//! Inputs are the values of `Input` (`input.rs`) that `Pool::handle`
//! applies, or their typed `handle_*` forms; outputs go to one ordered queue
//! (`output_queue.rs`) drained by [`Pool::poll_output`].
//!
//! What each input does in each state of the pool (checked against the
//! code, cell by cell, by `state_table.rs`, whose data this is):
//!
//! | input | paused | ready | closed |
//! | --- | --- | --- | --- |
//! | check out | fails: `PoolClearedError` (retryable) | served by an available connection, or queued (and a connection started for it within the limits) | fails: `PoolClosedError` |
//! | check in | pooled, or closed if perished (stale after the clear) | handed to the oldest waiter, or pooled; closed if perished | closed (`poolClosed`) |
//! | detach | closed (`detached`), out of the pool's count | closed (`detached`); its room starts a connection for a waiter | closed (`detached`) |
//! | established | available (not handed out while paused) | available, then the oldest waiter gets it | disposed of (abandoned at close: its event is out) |
//! | establish failed (unlabelled) | closed (`error`); a stale failure does not clear again | clears (pauses; waiters fail), closed (`error`), its requester fails with the error; a labelled failure leaves the pool ready | ignored (abandoned at close) |
//! | cancel | `Err(UnknownWaiter)`: the clear failed every waiter | leaves the queue, no event | `Err(UnknownWaiter)`: the close failed every waiter |
//! | clear | stays paused, generation + 1, no event | paused, generation + 1, every waiter fails (retryable) | nothing |
//! | reset after fork | stays paused, generation + 1, no cleared event; in use and pending connections closed | clears, interrupting what is in use and closing what is pending; waiters fail | nothing |
//! | ready | ready; a background run populates | nothing | `Err(PoolClosed)` |
//! | close | closed: idle closed, pending abandoned | closed: idle closed, pending abandoned, waiters fail | nothing |
//! | force close | `Err(NotClosed)` | `Err(NotClosed)` | connections in use interrupted (`poolClosed`) |
//! | resize | new sizes; idle above the maximum closed | new sizes; waiters served, idle above the maximum closed | `Err(ResizeClosed)` |
//! | timeout | nothing due (no waiter, no background run while paused) | checkouts past their deadline fail (timeout); background work that is due runs | nothing |
//! | events off | no event built from here on | no event built from here on | no event built from here on |
//! | events apart | events kept for `take_events` from here on | events kept for `take_events` from here on | events kept for `take_events` from here on |
//!
//! The other transitions live beside this file, each in the spec's words:
//! the wait queue's (serving, expiring, cancelling) in `waiting.rs`, a
//! connection's creation and establishment results in `establishment.rs`,
//! clearing, readying, closing and the fork reset in `lifecycle.rs`.
//! The timer table behind `poll_timeout` lives in `timer.rs`, background
//! runs in `maintenance.rs`, the reconnect backoff in `backoff.rs`, the
//! jitter's generator in `rng.rs`, resizing in `resize.rs`, forcing a
//! closed pool's connections in `shutdown.rs`, the getters in `stats.rs`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backoff::Backoff;
use crate::connection::{ConnectionId, Meta, PoolId, Pooled, ServiceId, WaiterId};
use crate::connection_set::{Available, ConnectionSet, InUse};
use crate::error::{CheckInError, ClearCause, EstablishError};
use crate::event::{ClosedReason, Event};
use crate::measure::Measure;
use crate::options::PoolOptions;
use crate::output::{Action, Output};
use crate::pace::Pace;
use crate::perish::PerishRules;
use crate::rng::SplitMix64;
use crate::stats::Stats;
use crate::wait_queue::{WaitQueue, Waiter};
use crate::waiting::InUseCell;
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
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
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
/// - **Inputs** — one [`handle`](Self::handle) of an [`Input`](crate::Input)
///   per thing that happened, `now` first; or its typed form:
///   [`handle_check_out`](Self::handle_check_out) /
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
/// and then changes nothing: [`UsageError`](crate::UsageError) (an
/// unknown connection or waiter id, a clear in the wrong mode, readying or
/// resizing a closed pool, forcing connections of an open one) or
/// [`CheckInError`] (a connection of another pool, handed back so that
/// nothing is lost).
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
    /// Whether `measures` are queued (`measure.rs`); never recorded.
    #[cfg_attr(feature = "recorder", serde(skip))]
    pub(crate) measures_enabled: bool,
    pub(crate) generation: u32,
    pub(crate) options: Arc<PoolOptions>,
    #[cfg_attr(feature = "recorder", serde(skip, default = "PoolId::unset"))]
    pub(crate) id: PoolId,
    pub(crate) queue: WaitQueue,
    pub(crate) backoff: Backoff,
    /// How many connections may be established at once (`pace.rs`).
    pub(crate) pace: Pace,
    /// Empty whenever a recording snapshots the pool.
    #[cfg_attr(feature = "recorder", serde(skip))]
    pub(crate) out: VecDeque<Output<C>>,
    #[cfg_attr(feature = "recorder", serde(skip))]
    pub(crate) apart: Vec<Event>,
    #[cfg_attr(feature = "recorder", serde(skip))]
    pub(crate) measures: Vec<Measure>,
    pub(crate) address: Address,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::pairs"))]
    pub(crate) services: BTreeMap<ServiceId, ServiceGeneration>,
    pub(crate) next_connection_id: u64,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
    pub(crate) next_run: Option<Instant>,
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::clear_cause"))]
    pub(crate) clear_cause: ClearCause,
    /// The connection whose result the current input reports.
    #[cfg_attr(feature = "recorder", serde(skip))]
    pub(crate) arriving: Option<ConnectionId>,
    pub(crate) rng: SplitMix64,
    /// After a resize down, while the pool holds more than maxPoolSize:
    /// its total then, the most `check_invariants` allows (`resize.rs`).
    pub(crate) shrinking: Option<usize>,
    /// The other counters; its `requests`, `usage_time`, `wait_time` and
    /// `connecting_limit` stay zero (they are in `hot` and `pace`;
    /// [`Pool::stats`] puts them together).
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

/// How long a checkout may wait ([`Pool::handle_check_out_direct`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Until this instant (`None`: no limit).
    Until(Option<Instant>),
    /// This long from the pool's clock once it has the input's `now`: the
    /// deadline is computed only for a checkout that is not served at once
    /// (one too far to represent is no limit).
    For(Duration),
}

impl Wait {
    /// At most `timeout` (`None`: no limit).
    #[inline]
    pub fn at_most(timeout: Option<Duration>) -> Wait {
        timeout.map_or(Wait::Until(None), Wait::For)
    }

    /// The deadline of a checkout that starts at `now`.
    #[inline]
    pub fn deadline(self, now: Instant) -> Option<Instant> {
        match self {
            Wait::Until(deadline) => deadline,
            Wait::For(timeout) => now.checked_add(timeout),
        }
    }
}

/// A connection that [`Pool::handle_check_in_direct`] handed straight to
/// the oldest queued checkout: it is checked out to `waiter`, and no
/// `Deliver` action follows for it.
#[derive(Debug)]
#[must_use = "the connection is checked out to the waiter: deliver it (or check it in again)"]
pub struct HandOver<C> {
    /// The queued checkout that gets the connection.
    pub waiter: WaiterId,
    /// The connection, checked out to `waiter`.
    pub connection: Pooled<C>,
}

/// How a checkout served at once (or a check-in handing its connection to
/// the oldest waiter) passes the connection on.
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
        let pace = Pace::new(options.max_connecting, options.adaptive_connecting);
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
            measures_enabled: false,
            measures: Vec::new(),
            now,
            hot: HotCounters::default(),
            next_run,
            clear_cause: ClearCause::NeverReady,
            arriving: None,
            rng,
            shrinking: None,
            stats: Stats::default(),
            backoff: Backoff::default(),
            pace,
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
        match self.check_out(now, Wait::Until(deadline), Serve::ByAction) {
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
    /// `wait` may be a timeout ([`Wait::For`]): the one served at once then
    /// computes no deadline. It is recorded as the deadline it stands for.
    pub fn handle_check_out_direct(&mut self, now: Instant, wait: Wait) -> CheckOut<C> {
        self.check_out(now, wait, Serve::Directly)
    }

    pub(crate) fn check_out(&mut self, now: Instant, wait: Wait, serve: Serve) -> CheckOut<C> {
        // The clock `advance` sets, which a `Wait::For` counts from.
        record!(self.record_check_out(
            now,
            wait.deadline(now.max(self.now)),
            matches!(serve, Serve::Directly)
        ));
        self.advance(now);
        self.hot.requests += 1;
        let id = WaiterId(self.hot.requests);
        self.emit(|p| Event::ConnectionCheckOutStarted {
            address: p.address.clone(),
        });
        // The common checkout: a ready pool, nobody queued, a connection
        // available. A deadline already behind the pool's clock (the
        // caller's own, or a stale `now`) gets nothing, not even a
        // connection that is available; one that is now may still be
        // served. Served here, in the input that started it, a checkout
        // waited no time.
        let passed = matches!(wait, Wait::Until(Some(d)) if d < self.now);
        if self.state == PoolState::Ready && self.queue.is_empty() && !passed {
            if let Some(available) = self.take_available() {
                return match serve {
                    Serve::Directly => {
                        let connection = self.hand_out(Duration::ZERO, available);
                        record!(self.record_served(id, connection.id()));
                        CheckOut::Ready(connection)
                    }
                    Serve::ByAction => {
                        self.deliver(id, Duration::ZERO, available);
                        CheckOut::Later(id)
                    }
                };
            }
        }
        self.check_out_otherwise(id, wait);
        CheckOut::Later(id)
    }

    /// The rest of [`check_out`](Self::check_out): a checkout that fails
    /// at once, times out at once or is queued. Out of line, so that the
    /// common checkout keeps a small frame.
    #[inline(never)]
    fn check_out_otherwise(&mut self, id: WaiterId, wait: Wait) {
        // Started in this input, at the pool's clock.
        let started_at = self.now;
        match self.state {
            PoolState::Closed => self.fail(id, started_at, self.pool_closed_error()),
            PoolState::Paused => self.fail(id, started_at, self.pool_cleared_error()),
            PoolState::Ready => {
                let deadline = wait.deadline(self.now);
                if deadline.is_some_and(|d| d <= self.now) {
                    self.time_out(id, started_at);
                    return;
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
    }

    /// Gives back a checked-out connection (spec: "Checking In a
    /// Connection"). A connection from another pool is refused and returned.
    ///
    /// # Errors
    ///
    /// [`CheckInError::WrongPool`] for a connection another pool created;
    /// it is handed back in the error, and nothing changes.
    pub fn handle_check_in(&mut self, now: Instant, connection: Pooled<C>) -> Result<(), CheckInError<C>> {
        let handed = self.check_in(now, connection, Serve::ByAction)?;
        debug_assert!(
            handed.is_none(),
            "served by action, a hand-over is never returned"
        );
        Ok(())
    }

    /// [`handle_check_in`](Self::handle_check_in) for a driver that
    /// completes waiters itself: when the connection goes to the oldest
    /// queued checkout, it is returned here as a [`HandOver`] instead of
    /// an `Action::Deliver` (which spares the common hand-over of a busy
    /// pool a trip through the output queue). Its events, and every other
    /// output of the input, are queued as usual. `Ok(None)`: the
    /// connection was pooled or closed.
    ///
    /// It is [`Input::CheckIn`](crate::Input::CheckIn), the same input:
    /// only the hand-over's shape differs, so the flight recorder keeps it
    /// as the `Deliver` it stands for and a replay reproduces it through
    /// [`Pool::handle`].
    ///
    /// # Errors
    ///
    /// [`CheckInError::WrongPool`] for a connection another pool created;
    /// it is handed back in the error, and nothing changes.
    pub fn handle_check_in_direct(
        &mut self,
        now: Instant,
        connection: Pooled<C>,
    ) -> Result<Option<HandOver<C>>, CheckInError<C>> {
        self.check_in(now, connection, Serve::Directly)
    }

    fn check_in(
        &mut self,
        now: Instant,
        connection: Pooled<C>,
        serve: Serve,
    ) -> Result<Option<HandOver<C>>, CheckInError<C>> {
        if connection.meta.pool != self.id {
            return Err(CheckInError::WrongPool(connection));
        }
        record!(self.record_check_in(now, &connection.meta));
        self.advance(now);
        let Pooled { mut meta, conn } = connection;
        let (entry, held) = self.end_use(&meta);
        self.measure(Measure::CheckedIn { held });
        self.emit(|p| Event::ConnectionCheckedIn {
            address: p.address.clone(),
            connection_id: meta.id,
            held,
        });
        // The common check-in: a connection fit for a ready pool that is
        // not shrinking. It goes to the oldest waiter if any (a busy pool),
        // staying in the in-use table, in its cell: what releasing the cell
        // and taking a new one would come to (the freed cell is the first
        // taken again). Else it is available again.
        if !entry.interrupted
            && self.state == PoolState::Ready
            && self.shrinking.is_none()
            && self.perished(&meta, false).is_none()
        {
            meta.last_used = self.now;
            let available = Available { meta, conn };
            let oldest = if self.queue.is_empty() {
                None
            } else {
                self.queue.pop_front()
            };
            return Ok(match oldest {
                Some(oldest) => self.hand_to_oldest(oldest, available, serve, InUseCell::Held),
                None => {
                    self.conns.free_in_use(available.meta.slot, entry);
                    self.conns.push_available(available);
                    None
                }
            });
        }
        Ok(self.check_in_otherwise(meta, conn, entry, serve))
    }

    /// The rest of [`check_in`](Self::check_in): a connection interrupted,
    /// perished or over the size, or a pool paused, closed or shrinking.
    /// Out of line, so that the common check-in keeps a small frame.
    #[inline(never)]
    fn check_in_otherwise(
        &mut self,
        mut meta: Box<Meta>,
        conn: C,
        entry: InUse,
        serve: Serve,
    ) -> Option<HandOver<C>> {
        self.conns.free_in_use(meta.slot, entry);
        if entry.interrupted {
            // Already counted closed (its event out) when it was
            // interrupted: by a clear, or by forcing a closed pool's
            // connections (`shutdown.rs`).
            self.dispose(meta.id, conn, ClosedReason::Stale);
            return None;
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
                self.serve_queue();
                None
            }
            None => {
                meta.last_used = self.now;
                let available = Available { meta, conn };
                let oldest = match self.state {
                    PoolState::Ready => self.queue.pop_front(),
                    _ => None,
                };
                match oldest {
                    Some(oldest) => self.hand_to_oldest(oldest, available, serve, InUseCell::Released),
                    None => {
                        self.conns.push_available(available);
                        None
                    }
                }
            }
        }
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
        record!(self.record_input(now, || crate::Input::Detach(Pooled {
            meta: connection.meta.clone(),
            conn: ()
        })));
        self.advance(now);
        let Pooled { meta, conn } = connection;
        let (entry, _) = self.end_use(&meta);
        self.conns.free_in_use(meta.slot, entry);
        if !entry.interrupted {
            self.closed_event(meta.id, meta.service_id, ClosedReason::Detached, None);
            self.serve_queue();
        }
        Ok(conn)
    }

    /// Lets time pass: expires checkouts, runs background work that is due,
    /// and re-readies after a backoff. Safe to call at any time.
    pub fn handle_timeout(&mut self, now: Instant) {
        record!(self.record_input(now, || crate::Input::Timeout));
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
        // Most inputs find no deadline passed and no backoff: no call.
        if self.queue.any_expired(self.now) || self.backoff.is_active() {
            self.expire_and_resume();
        }
    }

    pub(crate) fn since(&self, then: Instant) -> Duration {
        // A coarse clock often reads the same at both ends of a short
        // wait or use: a comparison spares those the subtraction.
        if then >= self.now {
            return Duration::ZERO;
        }
        self.now.saturating_duration_since(then)
    }

    /// Spec: iterate the available connections, closing perished ones,
    /// until a good one is found. Always inlined: in the common checkout,
    /// a call's prologue and epilogue cost more than its body.
    #[inline(always)]
    pub(crate) fn take_available(&mut self) -> Option<Available<C>> {
        loop {
            let available = self.conns.pop_available()?;
            match self.perished(&available.meta, true) {
                Some(reason) => self.close_perished(available, reason),
                None => return Some(available),
            }
        }
    }

    /// Closes a perished connection that [`take_available`](Self::take_available)
    /// came upon. Out of line: a checkout seldom meets one, and the common
    /// path then keeps a smaller frame.
    #[cold]
    #[inline(never)]
    fn close_perished(&mut self, available: Available<C>, reason: ClosedReason) {
        self.close(&available.meta, available.conn, reason, None);
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

    pub(crate) fn deliver(&mut self, waiter: WaiterId, waited: Duration, available: Available<C>) {
        let connection = self.hand_out(waited, available);
        self.push_action(Action::Deliver { waiter, connection });
    }

    /// Marks an available connection in use by a checkout that `waited`
    /// for it, and emits its `ConnectionCheckedOut`.
    #[inline]
    pub(crate) fn hand_out(&mut self, waited: Duration, available: Available<C>) -> Pooled<C> {
        let Available { mut meta, conn } = available;
        meta.slot = self.conns.insert_in_use(InUse {
            id: meta.id,
            generation: meta.generation,
            service_id: meta.service_id,
            interrupted: false,
        });
        self.hand_out_held(waited, meta, conn)
    }

    /// [`hand_out`](Self::hand_out) of a connection that still holds its
    /// cell in the in-use table (a check-in handed straight to a waiter).
    #[inline]
    pub(crate) fn hand_out_held(&mut self, waited: Duration, mut meta: Box<Meta>, conn: C) -> Pooled<C> {
        meta.checked_out_at = self.now;
        // Zero for most checkouts (served in the input that started them):
        // no addition then.
        if !waited.is_zero() {
            self.hot.wait_time += waited;
        }
        self.measure(Measure::CheckedOut { duration: waited });
        self.emit(|p| Event::ConnectionCheckedOut {
            address: p.address.clone(),
            connection_id: meta.id,
            duration: waited,
        });
        Pooled { meta, conn }
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
        // A resize down is over once the pool is back within its size,
        // however the connections above it went (closed for the size, as
        // bad, interrupted, taken for good).
        if self.shrinking.is_some() {
            self.note_size();
        }
        self.release_service(service_id);
        self.measure(Measure::Closed { reason });
        self.emit(|p| Event::ConnectionClosed {
            address: p.address.clone(),
            connection_id: id,
            reason,
            error,
        });
    }

    /// The I/O half of closing, left to the driver.
    pub(crate) fn dispose(&mut self, id: ConnectionId, connection: C, reason: ClosedReason) {
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

    /// Counts the time a connection coming back was in use, and returns
    /// its entry in the in-use table, still there. Always inlined: called
    /// apart, its entry and duration would come back through memory, on
    /// every check-in.
    #[inline(always)]
    fn end_use(&mut self, meta: &Meta) -> (InUse, Duration) {
        let used = self.since(meta.checked_out_at);
        if !used.is_zero() {
            self.hot.usage_time += used;
        }
        // A `Pooled` is unique and carries its slot, so this cannot miss.
        let entry = self
            .conns
            .in_use_entry(meta.slot, meta.id)
            .expect("a checked-out connection of this pool is in its in-use table");
        (entry, used)
    }
}
