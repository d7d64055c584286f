//! Establishment results: `Input::Established`, `Input::EstablishFailed`,
//! and the same inputs for a connection no longer pending
//! (`Step::LateResult`) or never issued (`Step::UnknownResult`).

use std::time::{Duration, Instant};

use cmap_core::{ClosedReason, ConnectionId, Input, ServiceId, UsageError};

use crate::model::{Arrival, CState, Failure, Sim};
use crate::steps::FailKind;
use crate::support::{establish_error, Conn};
use crate::LATE;

impl Sim {
    /// `Input::Established`: a pending connection is established (in
    /// load-balanced mode, for service `[service; 12]`).
    pub(crate) fn established(&mut self, now: Instant, pick: usize, service: u8) -> Result<(), String> {
        let Some(&id) = self.pending.iter().nth(pick % self.pending.len().max(1)) else {
            return self.after(false);
        };
        self.arriving = Some((id, self.conn(id)?.requester));
        // The adaptive pace moves with the connect's latency, on the
        // pool's clock once this input has moved it.
        let latency = now.max(self.pool_now) - self.conn(id)?.created_at;
        self.pace.established(latency);
        self.pace.ended(false);
        self.pace_bound = self.pace_bound.max(self.pace.allowed());
        self.arrival = Some(Arrival {
            id,
            over: self.over_size_with_arrival(now),
            delivers: self.delivers,
            returns_bad: None,
        });
        // A success resets the reconnect backoff.
        self.failing_since = None;
        self.failures = 0;
        self.move_conn(id, &[CState::Pending], CState::Pooled)?;
        let sid = self.opts.load_balanced.then_some(ServiceId([service; 12]));
        if let Some(sid) = sid {
            // Spec ("Load Balancer Mode"): the connection takes its
            // service's generation, and counts in its entry.
            let entry = self.services.entry(sid).or_default();
            entry.1 += 1;
            let generation = entry.0;
            let c = self.conn(id)?;
            c.generation = generation;
            c.service = Some(sid);
        }
        let input = Input::Established {
            id: ConnectionId(id),
            connection: Conn(id),
            service_id: sid,
        };
        let r = self.handle_plain(now, input)?;
        self.log(|| format!("established {id} -> {r:?}"));
        ensure!(r.is_ok(), "established {id}: {r:?}");
        self.after(false)
    }

    /// `Input::EstablishFailed`: predicts, from the model alone, whether the
    /// pool is cleared, which checkout fails with the failure or keeps
    /// waiting, and whether the reconnect backoff holds or gives up; the
    /// outputs are checked against that as they come (`on_action`,
    /// `on_event`) and after the step (`check_failure`).
    pub(crate) fn establish_failed(
        &mut self,
        now: Instant,
        pick: usize,
        kind: FailKind,
    ) -> Result<(), String> {
        let Some(&id) = self.pending.iter().nth(pick % self.pending.len().max(1)) else {
            return self.after(false);
        };
        // The pool's clock once this input has moved it.
        let at = now.max(self.pool_now);
        let (generation, requester) = {
            let c = self.conn(id)?;
            (c.generation, c.requester)
        };
        // SDAM's reaction clears the pool, unless the error is labelled
        // (spec: "Backpressure-enabled": SDAM ignores it) or the connection
        // is of a generation already cleared (spec: "the generation of the
        // pool when this Connection was created").
        let clears = !kind.labelled()
            && !self.opts.keep_ready
            && !self.opts.load_balanced
            && !self.closed
            && generation == self.generation;
        // The checkout it was made for, unless its deadline passes as this
        // input lets time pass (it times out first, and forgets it).
        let requester = requester.filter(|&w| self.waiters[w as usize - 1].deadline.is_none_or(|d| d > at));
        let keeps_waiting = kind.labelled() && self.opts.keep_waiting;
        // A refusal with the labels: the server is overloaded, and an
        // adaptive pace falls back.
        if kind.labelled() {
            self.pace.refused();
        } else if clears {
            self.pace.cleared();
        }
        // And whichever the pace, a network error leaves one probe; any
        // other failure ends it, and the connects this step starts may use
        // the whole pace.
        self.pace.ended(kind.labelled());
        self.pace_bound = self.pace_bound.max(self.pace.allowed());
        let (victim, kept) = if keeps_waiting {
            (None, requester)
        } else {
            (requester, None)
        };
        // The reconnect backoff (its timing is jittered: whether it holds
        // at all, when it gives up, and the latest instant of the next
        // attempt for waiting checkouts are followed).
        let mut gives_up = false;
        let mut retry_by = None;
        if let Some((initial, max, give_up, waiting)) = self.opts.reconnect {
            let since = *self.failing_since.get_or_insert(at);
            gives_up = give_up.is_some_and(|g| at - since >= Duration::from_millis(g));
            if gives_up {
                self.failing_since = None;
                self.failures = 0;
            } else {
                self.failures += 1;
                let doubled =
                    |base: u64| Duration::from_millis(base).saturating_mul(1 << (self.failures - 1).min(31));
                let bound = doubled(15)
                    .min(Duration::from_millis(waiting))
                    .min(doubled(initial).min(Duration::from_millis(max)));
                retry_by = Some(at + bound);
            }
        }
        self.failure = Some(Failure {
            id,
            kind,
            victim,
            kept,
            state_before: self.pool.state(),
            backoff_holds: self.opts.reconnect.is_some() && !gives_up,
            gives_up,
            retry_by,
            closed_seen: false,
            connection_errors: 0,
        });
        self.arriving = Some((id, requester));
        self.move_conn(id, &[CState::Pending], CState::Closed)?;
        self.closing = Some((id, ClosedReason::Error));
        self.count_closed(id)?;
        if clears {
            self.generation += 1;
        }
        let id = ConnectionId(id);
        let input = Input::EstablishFailed {
            id,
            error: establish_error(id, kind.kind()),
        };
        let r = self.handle_plain(now, input)?;
        self.log(|| format!("establish failed {id} {kind:?} -> {r:?}"));
        ensure!(r.is_ok(), "establish failed {id}: {r:?}");
        self.after(false)?;
        self.check_failure()
    }

    /// `Step::LateResult`: a result for a connection no longer pending.
    pub(crate) fn late_result(&mut self, now: Instant, pick: usize, ok: bool) -> Result<(), String> {
        if self.not_pending.is_empty() {
            return self.after(false);
        }
        // Mostly the most recently abandoned or reported ones.
        let n = self.not_pending.len();
        let id = self.not_pending[n - 1 - pick % n.min(4)];
        if ok {
            self.expected_late = Some(id);
        }
        let r = self.handle_plain(now, Sim::result(ConnectionId(id), ok))?;
        self.log(|| format!("late result {id} ok={ok} -> {r:?}"));
        ensure!(r.is_ok(), "late result for {id}: {r:?}");
        self.after(false)
    }

    /// `Step::UnknownResult`: a result for an id never issued: misuse.
    pub(crate) fn unknown_result(&mut self, now: Instant, ahead: u64, ok: bool) -> Result<(), String> {
        // Beyond what this very call may start (up to maxConnecting,
        // if a backoff ends as it advances the clock).
        let id = ConnectionId(if ahead == 0 {
            0
        } else {
            self.conns.len() as u64 + u64::from(self.pace.most()) + ahead
        });
        let r = self.handle_plain(now, Sim::result(id, ok))?;
        self.log(|| format!("unknown result {id} -> {r:?}"));
        ensure!(
            r == Err(UsageError::UnknownConnection(id)),
            "result for unknown {id}: {r:?}"
        );
        self.after(false)
    }

    /// A result for connection `id` that is not (or no longer) pending:
    /// established (a connection marked `LATE`, so that its disposal is
    /// told apart) or failed, unlabelled as a failure that would clear.
    fn result(id: ConnectionId, ok: bool) -> Input<Conn> {
        if ok {
            Input::Established {
                id,
                connection: Conn(LATE + id.0),
                service_id: None,
            }
        } else {
            Input::EstablishFailed {
                id,
                error: establish_error(id, cmap_core::EstablishErrorKind::Other),
            }
        }
    }
}
