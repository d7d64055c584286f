//! The outputs of each input, judged as they come: `drain` takes them in
//! order (events kept apart first, then actions), `on_action` and
//! `on_event` check each against the model's books and move them.

use std::time::{Duration, Instant};

use cmap_core::virtual_time::{self, VirtualDriver};
use cmap_core::{Action, CheckOutError, ClosedReason, ConnectionId, Event, Measure, Output, Pool, PoolState};

use crate::checks::check_labels;
use crate::model::{CState, ConnEvents, ConnModel, Sim, WState};
use crate::support::Conn;
use crate::LATE;

/// The model on cmap-core's virtual-time loop: each output judged as it
/// comes.
impl VirtualDriver<Conn> for Sim {
    type Error = String;

    fn pool(&mut self) -> &mut Pool<Conn> {
        &mut self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.wall
    }

    fn perform(&mut self, out: Output<Conn>) -> Result<(), String> {
        ensure!(
            !(self.apart && matches!(out, Output::Event(_))),
            "an event in the stream while events are kept apart: {out:?}"
        );
        self.step_outputs += 1;
        self.log(|| format!("{out:?}"));
        match out {
            Output::Event(e) => self.on_event(&e),
            Output::Action(a) => self.on_action(a),
        }
    }
}

impl Sim {
    pub(crate) fn drain(&mut self) -> Result<(), String> {
        if self.apart {
            // This input's events first, then its actions.
            let mut events = Vec::new();
            self.pool.take_events(&mut events);
            ensure!(self.pool.pending_events() == 0, "events left behind");
            for e in events {
                self.step_outputs += 1;
                self.log(|| format!("{:?}", Output::<Conn>::Event(e.clone())));
                self.on_event(&e)?;
            }
        }
        virtual_time::drain(self)?;
        self.check_measures()
    }

    /// The pool's measures match the events judged, one for one, in order
    /// (with events off, the transcript compares them with the run that had
    /// events on: see `same_outputs`).
    fn check_measures(&mut self) -> Result<(), String> {
        let measures = self.pool.measures().to_vec();
        self.pool.clear_measures();
        let expected = std::mem::take(&mut self.measured);
        ensure!(
            !self.events || measures == expected,
            "measures {measures:?}, events say {expected:?}"
        );
        for m in measures {
            // Not `reason: ...`: the coverage report counts the events' own.
            self.log(|| format!("measure {m:?}").replace(": ", "="));
        }
        Ok(())
    }

    pub(crate) fn on_action(&mut self, action: Action<Conn>) -> Result<(), String> {
        // A resize lets no time pass (`Sim::resize`): it closes for the
        // size and starts connections, nothing else.
        ensure!(
            self.resize.is_none() || matches!(action, Action::Establish { .. } | Action::Close { .. }),
            "a resize makes {action:?}"
        );
        match action {
            Action::Establish { id } => {
                let id = id.0;
                ensure!(
                    id == self.conns.len() as u64 + 1,
                    "Establish {id} after {} (ids are 1, 2, 3...)",
                    self.conns.len()
                );
                // Right after its ConnectionCreated; with events apart, the
                // input's events all come before its actions.
                let created = self.ev_conns.len() as u64;
                ensure!(
                    !self.events || created == id || (self.apart && created > id),
                    "Establish {id} without its ConnectionCreated"
                );
                let total = self.pending.len() + self.pooled + self.held_live;
                let max = self.opts.max_pool_size as usize;
                ensure!(
                    max == 0 || total < max,
                    "Establish {id} with {total} connections of {max}"
                );
                // Spec: no more than maxConnecting at once, at any point of
                // an input (a connection whose result is being reported is
                // still pending while the input lets time pass).
                let connecting = self.pending.len() + usize::from(self.exact && self.arriving.is_some());
                ensure!(
                    connecting < self.pace_bound as usize,
                    "Establish {id} with {connecting} connections being made (maxConnecting, or the adaptive pace, {})",
                    self.pace_bound
                );
                // Spec: a connection is started for a checkout only while
                // checkouts outnumber the connections being established
                // (each of which will serve one), or to populate the pool
                // to minPoolSize.
                let (waiting, pending) = (self.waiting.len(), self.pending.len());
                ensure!(
                    waiting > pending || total < self.opts.min_pool_size as usize,
                    "Establish {id} with {waiting} waiting, {pending} pending and {total} connections (min {})",
                    self.opts.min_pool_size
                );
                if let Some(f) = self.failure.as_ref().filter(|_| self.exact) {
                    // After the failure's ConnectionClosed, what the input
                    // does comes after its reaction: the backoff.
                    ensure!(
                        !(f.closed_seen && f.backoff_holds),
                        "Establish {id} right after connection {} failed, while the reconnect backoff holds",
                        f.id
                    );
                }
                let requester = self.requester_of_new()?;
                if let Some(w) = requester {
                    self.waiters[w as usize - 1].requested = Some(id);
                }
                self.conns.push(ConnModel {
                    state: CState::Pending,
                    closed_counted: false,
                    created_at: self.pool_now,
                    pooled_since: self.pool_now,
                    pooled_seq: 0,
                    generation: self.step_generation,
                    service: None,
                    requester,
                });
                self.pending.insert(id);
                self.touched.push(id);
            }
            Action::AbortEstablish { id } => {
                self.move_conn(id.0, &[CState::Pending], CState::Abandoned)?;
                self.count_closed(id.0)?;
            }
            Action::Deliver { waiter, connection } => {
                let id = connection.id().0;
                let first = self.waiting.first().copied();
                ensure!(
                    first == Some(waiter.0),
                    "waiter {waiter} served while {first:?} waits longer"
                );
                let deadline = self.waiters[waiter.0 as usize - 1].deadline;
                ensure!(
                    deadline.is_none_or(|d| self.pool_now <= d),
                    "waiter {waiter} served {:?} after its deadline",
                    self.pool_now - deadline.unwrap()
                );
                self.resolve(waiter, WState::Delivered)?;
                ensure!(*connection == Conn(id), "connection {id} is {:?}", *connection);
                ensure!(!connection.is_errored(), "connection {id} is handed out errored");
                let model = &self.conns[id as usize - 1];
                ensure!(
                    (connection.generation(), connection.service_id()) == (model.generation, model.service),
                    "connection {id} is handed out as of generation {} ({:?}), created in {} ({:?})",
                    connection.generation(),
                    connection.service_id(),
                    model.generation,
                    model.service
                );
                ensure!(!self.is_stale(id), "connection {id} is handed out stale");
                // Spec: the wait runs from the start of the checkout.
                let waited = self.pool_now - self.waiters[waiter.0 as usize - 1].started;
                self.wait_time += waited;
                if self.events {
                    let reported = self.ev_conns[id as usize - 1].checked_out_for.take();
                    ensure!(
                        reported == Some(waited),
                        "ConnectionCheckedOut {id} says it took {reported:?}, but waiter {waiter} waited {waited:?}"
                    );
                }
                ensure!(
                    connection.created_at() == model.created_at,
                    "connection {id} was created at another instant"
                );
                if let Some(max) = self.opts.max_idle_ms.map(Duration::from_millis) {
                    let idle = self.pool_now - model.pooled_since;
                    ensure!(idle <= max, "connection {id} is handed out idle for {idle:?}");
                }
                if let Some((lifetime, _)) = self.opts.lifetime {
                    let end = model.created_at + Duration::from_millis(lifetime);
                    ensure!(
                        self.pool_now < end,
                        "connection {id} is handed out past its lifetime"
                    );
                }
                if self.events {
                    let ev = &self.ev_conns[id as usize - 1];
                    ensure!(ev.checked_out, "Deliver of {id} without ConnectionCheckedOut");
                }
                self.move_conn(id, &[CState::Pooled], CState::Held { interrupted: false })?;
                self.held.push(connection);
                self.delivers += 1;
            }
            Action::Fail { waiter, error } => {
                self.check_checkout_error(&error, "Fail")?;
                if let (CheckOutError::ConnectionError { .. }, Some(f)) = (&error, &mut self.failure) {
                    f.connection_errors += 1;
                    ensure!(
                        !self.exact || f.victim == Some(waiter.0),
                        "waiter {waiter} fails with the failure of connection {} ({:?}); the model expects {:?} to",
                        f.id,
                        f.kind,
                        f.victim
                    );
                }
                let deadline = self
                    .waiters
                    .get((waiter.0 as usize).wrapping_sub(1))
                    .and_then(|w| w.deadline);
                if let CheckOutError::WaitQueueTimeout { .. } = error {
                    ensure!(
                        deadline.is_some_and(|d| d <= self.pool_now),
                        "waiter {waiter} timed out before its deadline {deadline:?} (now +{:?})",
                        self.elapsed()
                    );
                }
                self.resolve(waiter, WState::Failed)?;
                if self.events {
                    let waited = self.pool_now - self.waiters[waiter.0 as usize - 1].started;
                    let reported = self.ev_fail_durations.pop_front();
                    ensure!(
                        reported == Some(waited),
                        "ConnectionCheckOutFailed for {waiter} says it took {reported:?}, but it waited {waited:?}"
                    );
                }
                // A queued checkout fails as cleared only by a clear of this
                // step (a checkout of a paused pool is judged on its own:
                // `check_out_verdict`); a labelled failure clears nothing.
                if let CheckOutError::PoolCleared { .. } = error {
                    let immediate = self.check_out_verdict.is_some_and(|(w, _)| w == waiter);
                    ensure!(
                        immediate || self.generation != self.step_generation,
                        "waiter {waiter} fails as cleared in a step that clears nothing"
                    );
                }
                self.waiters[waiter.0 as usize - 1].error = Some(error.spec_name());
                self.fails += 1;
            }
            Action::Close {
                id,
                connection,
                reason,
            } => {
                let id = id.0;
                if connection.0 >= LATE {
                    ensure!(
                        self.expected_late == Some(id) && connection.0 == LATE + id,
                        "unexpected disposal of late {connection:?} as {id}"
                    );
                    let expected = if self.closed {
                        ClosedReason::PoolClosed
                    } else {
                        ClosedReason::Stale
                    };
                    ensure!(
                        reason == expected,
                        "late connection {id} disposed of as {reason:?}, expected {expected:?}"
                    );
                    self.expected_late = None;
                } else {
                    ensure!(
                        connection == Conn(id),
                        "Close {id} of {connection:?} ({reason:?})"
                    );
                    if !self.sized_close(id, reason, false)? {
                        self.check_close_reason(id, reason, "Close")?;
                    }
                    let was = self.conn(id)?.state;
                    self.move_conn(id, &[CState::Pooled, CState::Disposing], CState::Closed)?;
                    if was == CState::Pooled {
                        self.count_closed(id)?;
                    }
                }
            }
            Action::Interrupt { id } => {
                // A force close interrupts any connection in use. Otherwise
                // only an interrupting clear does, and only connections of
                // a generation it ended (of its service, load-balanced).
                if !self.step_force_close {
                    let Some((true, service)) = self.step_clear else {
                        return Err(format!(
                            "connection {id} is interrupted without an interrupting clear"
                        ));
                    };
                    let c = self.conn(id.0)?;
                    ensure!(
                        service.is_none() || c.service == service,
                        "connection {id} of {:?} is interrupted by a clear of {service:?}",
                        c.service
                    );
                    ensure!(
                        self.is_stale(id.0),
                        "connection {id} of the current generation {} is interrupted",
                        self.conns[id.0 as usize - 1].generation
                    );
                }
                // Once: it must still be in use and not interrupted.
                self.move_conn(
                    id.0,
                    &[CState::Held { interrupted: false }],
                    CState::Held { interrupted: true },
                )?;
                self.count_closed(id.0)?;
            }
        }
        Ok(())
    }

    pub(crate) fn ev_conn(&mut self, id: ConnectionId, what: &str) -> Result<&mut ConnEvents, String> {
        let n = self.ev_conns.len();
        self.ev_conns
            .get_mut((id.0 as usize).wrapping_sub(1))
            .ok_or_else(|| format!("{what} for connection {id}, but only {n} were created"))
    }

    pub(crate) fn on_event(&mut self, e: &Event) -> Result<(), String> {
        // A connection that could not be established (its close carries
        // the failure) is measured by kind just before its close.
        if let Event::ConnectionClosed {
            error: Some(ref error),
            ..
        } = *e
        {
            self.measured
                .push(Measure::EstablishFailed { kind: error.kind() });
        }
        let measure = match *e {
            Event::ConnectionCheckedOut { duration, .. } => Some(Measure::CheckedOut { duration }),
            Event::ConnectionCheckedIn { held, .. } => Some(Measure::CheckedIn { held }),
            Event::ConnectionReady { duration, .. } => Some(Measure::Ready { duration }),
            Event::ConnectionClosed { reason, .. } => Some(Measure::Closed { reason }),
            Event::ConnectionCheckOutFailed { reason, .. } => Some(Measure::CheckOutFailed { reason }),
            _ => None,
        };
        self.measured.extend(measure);
        // ReconnectGaveUp is loud by design: it comes even with events off.
        ensure!(
            self.events || matches!(e, Event::ReconnectGaveUp { .. }),
            "an event while events are off: {e:?}"
        );
        ensure!(
            self.resize.is_none()
                || matches!(
                    e,
                    Event::PoolResized { .. }
                        | Event::ConnectionClosed { .. }
                        | Event::ConnectionCreated { .. }
                ),
            "a resize emits {e:?}"
        );
        match e {
            Event::PoolCreated { .. } => return Err("a second ConnectionPoolCreated".into()),
            Event::PoolResized {
                min_pool_size,
                max_pool_size,
                ..
            } => {
                let sizes = (*min_pool_size, *max_pool_size);
                let Some(step) = &mut self.resize else {
                    return Err(format!("PoolResized {sizes:?} without a resize accepted"));
                };
                ensure!(
                    sizes == (step.min, step.max) && !step.announced,
                    "PoolResized {sizes:?} for a resize to {:?} (announced already: {})",
                    (step.min, step.max),
                    step.announced
                );
                // First: before the closes it causes.
                ensure!(
                    self.step_outputs == 1,
                    "PoolResized after {} outputs of its resize",
                    self.step_outputs - 1
                );
                step.announced = true;
            }
            Event::PoolReady { .. } => {
                ensure!(
                    self.ev_state == PoolState::Paused,
                    "PoolReady while {:?}",
                    self.ev_state
                );
                self.ev_state = PoolState::Ready;
            }
            Event::PoolCleared { service_id, .. } => {
                // Spec: the event comes once the generation moved, before
                // what the clear does (interrupts, failed waiters).
                if let Some(caused) = self.step_caused.take() {
                    return Err(format!("{caused} before the PoolCleared that causes it"));
                }
                if self.opts.load_balanced {
                    ensure!(service_id.is_some(), "a load-balanced clear without a service");
                } else {
                    ensure!(
                        self.ev_state == PoolState::Ready && service_id.is_none(),
                        "PoolCleared {service_id:?} while {:?}",
                        self.ev_state
                    );
                    self.ev_state = PoolState::Paused;
                }
            }
            Event::PoolClosed { .. } => {
                ensure!(self.ev_state != PoolState::Closed, "PoolClosed twice");
                self.ev_state = PoolState::Closed;
                self.step_pool_closed = true;
            }
            Event::ConnectionCreated { connection_id, .. } => {
                ensure!(
                    connection_id.0 == self.ev_conns.len() as u64 + 1,
                    "ConnectionCreated {connection_id} after {}",
                    self.ev_conns.len()
                );
                ensure!(
                    self.ev_state == PoolState::Ready,
                    "ConnectionCreated while {:?}",
                    self.ev_state
                );
                self.ev_conns.push(ConnEvents::default());
            }
            Event::ConnectionReady { connection_id, .. } => {
                if self.arriving.is_some_and(|(id, _)| id == connection_id.0) {
                    self.arriving = None;
                }
                let c = self.ev_conn(*connection_id, "ConnectionReady")?;
                ensure!(
                    !c.ready && c.closed == 0,
                    "ConnectionReady {connection_id} again or after Closed"
                );
                c.ready = true;
            }
            Event::ConnectionClosed {
                connection_id,
                reason,
                error,
                ..
            } => {
                if self.arriving.is_some_and(|(id, _)| id == connection_id.0) {
                    self.arriving = None;
                }
                // The establishment error, with its labels, only for the
                // connection whose establishment failed.
                match (&mut self.failure, error) {
                    (Some(f), Some(error)) if f.id == connection_id.0 => {
                        check_labels(error, f.kind, "ConnectionClosed")?;
                        f.closed_seen = true;
                    }
                    (Some(f), None) if f.id == connection_id.0 => {
                        return Err(format!("ConnectionClosed {connection_id} without its error"));
                    }
                    (_, None) => {}
                    (_, Some(error)) => {
                        return Err(format!(
                            "ConnectionClosed {connection_id} with an error: {error:?}"
                        ));
                    }
                }
                let c = self.ev_conn(*connection_id, "ConnectionClosed")?;
                ensure!(c.closed == 0, "ConnectionClosed {connection_id} twice");
                c.closed += 1;
                if !self.sized_close(connection_id.0, *reason, true)? {
                    self.check_close_reason(connection_id.0, *reason, "ConnectionClosed")?;
                }
                // Spec ("Closing a Connection Pool"): the pool closes its
                // connections, then emits PoolClosed.
                ensure!(
                    !self.step_pool_closed,
                    "ConnectionClosed {connection_id} after PoolClosed"
                );
                if *reason == ClosedReason::Stale && self.step_caused.is_none() {
                    self.step_caused = Some(format!("ConnectionClosed {connection_id} (stale)"));
                }
            }
            Event::ConnectionCheckedOut {
                connection_id,
                duration,
                ..
            } => {
                let c = self.ev_conn(*connection_id, "ConnectionCheckedOut")?;
                ensure!(
                    c.ready && c.closed == 0 && !c.checked_out,
                    "ConnectionCheckedOut {connection_id}: {c:?}"
                );
                c.checked_out = true;
                c.checked_out_for = Some(*duration);
                self.ev_checked_out += 1;
            }
            Event::ConnectionCheckedIn { connection_id, .. } => {
                let c = self.ev_conn(*connection_id, "ConnectionCheckedIn")?;
                ensure!(
                    c.checked_out,
                    "ConnectionCheckedIn {connection_id} not checked out"
                );
                c.checked_out = false;
            }
            Event::ConnectionCheckOutStarted { .. } => {
                self.ev_started += 1;
                // What the checkout does from here on, it does queued.
                self.unqueued = None;
            }
            Event::ConnectionCheckOutFailed { error, duration, .. } => {
                self.check_checkout_error(error, "ConnectionCheckOutFailed")?;
                self.ev_failed += 1;
                self.ev_fail_durations.push_back(*duration);
                ensure!(
                    !self.step_pool_closed,
                    "ConnectionCheckOutFailed after PoolClosed"
                );
                if matches!(**error, CheckOutError::PoolCleared { .. }) && self.step_caused.is_none() {
                    self.step_caused = Some("a checkout failed as cleared".to_owned());
                }
            }
            Event::ReconnectGaveUp { last_error, .. } => {
                self.gave_up_events += 1;
                let Some(f) = &self.failure else {
                    return Err("ReconnectGaveUp without a failure".to_owned());
                };
                check_labels(last_error, f.kind, "ReconnectGaveUp")?;
            }
        }
        ensure!(
            self.ev_started >= self.ev_checked_out + self.ev_failed,
            "{} checkouts started, {} checked out, {} failed",
            self.ev_started,
            self.ev_checked_out,
            self.ev_failed
        );
        Ok(())
    }
}
