//! The checks after every step (`check`), of an establishment failure's
//! outcome (`check_failure`), of a checkout error and of the backpressure
//! labels.

use cmap_core::{CheckOutError, EstablishError, PoolState};

use crate::model::{CState, Sim, WState};
use crate::steps::FailKind;

impl Sim {
    pub(crate) fn check(&mut self, fired: bool) -> Result<(), String> {
        self.pool.check_invariants()?;
        ensure!(
            self.pool.generation() == self.generation,
            "the pool is at generation {}, the model counts {}",
            self.pool.generation(),
            self.generation
        );
        ensure!(
            self.ev_fail_durations.is_empty(),
            "ConnectionCheckOutFailed without its Fail"
        );
        let wait_time = self.pool.stats().wait_time;
        ensure!(
            wait_time == self.wait_time,
            "wait time {wait_time:?}, but checkouts waited {:?}",
            self.wait_time
        );
        if let Some((true, service)) = self.step_clear {
            // Spec: an interrupting clear interrupts every in-use connection
            // of a generation up to the one it ended (of its service,
            // load-balanced); non-load-balanced, it abandons pending ones.
            for (i, c) in self.conns.iter().enumerate() {
                let id = i as u64 + 1;
                let live = match c.state {
                    CState::Held { interrupted: false } => true,
                    CState::Pending => service.is_none(),
                    _ => false,
                };
                ensure!(
                    !(live && (service.is_none() || c.service == service) && self.is_stale(id)),
                    "connection {id} of generation {} is {:?} after an interrupting clear",
                    c.generation,
                    c.state
                );
            }
        }
        ensure!(
            self.expected_late.is_none(),
            "late connection {:?} was not disposed of",
            self.expected_late
        );
        if let Some((id, must_close)) = self.check_in_verdict.take() {
            let state = self.conns[id as usize - 1].state;
            if must_close {
                ensure!(
                    state == CState::Closed,
                    "perished connection {id} checked in is {state:?}"
                );
            } else {
                ensure!(
                    matches!(state, CState::Pooled | CState::Held { .. }),
                    "connection {id} checked in is {state:?}, not available"
                );
            }
        }
        if let Some((w, error)) = self.check_out_verdict.take() {
            let got = &self.waiters[w.0 as usize - 1];
            ensure!(
                got.state == WState::Failed && got.error == Some(error),
                "checkout {w} got {:?} {:?}, not {error}",
                got.state,
                got.error
            );
        }
        for i in 0..self.touched.len() {
            let id = self.touched[i];
            let c = &self.conns[id as usize - 1];
            ensure!(
                c.state != CState::Disposing,
                "interrupted connection {id} was not disposed of"
            );
            if self.events {
                let closed = self.ev_conns[id as usize - 1].closed == 1;
                ensure!(
                    closed == c.closed_counted,
                    "connection {id} is {:?} but ConnectionClosed {}",
                    c.state,
                    if closed { "was emitted" } else { "is missing" }
                );
            }
        }
        if let Some(a) = self.arrival.take() {
            if a.over == Some(true) {
                let state = self.conns[a.id as usize - 1].state;
                ensure!(
                    state == CState::Closed,
                    "connection {} arrived above maxPoolSize {} and is {state:?}",
                    a.id,
                    self.opts.max_pool_size
                );
                ensure!(
                    self.delivers == a.delivers,
                    "connection {} arrived above maxPoolSize {}, yet a waiter was served",
                    a.id,
                    self.opts.max_pool_size
                );
            }
            if let Some((before, Some(grows))) = a.returns_bad {
                let bad = self.pool.stats().returns_bad;
                ensure!(
                    bad == before + grows,
                    "returns_bad went from {before} to {bad} as connection {} came back (over maxPoolSize: {:?})",
                    a.id,
                    a.over
                );
            }
        }
        let s = self.pool.status();
        let o = &self.opts;
        let sizes = (
            self.pool.options().min_pool_size(),
            self.pool.options().max_pool_size(),
        );
        ensure!(
            sizes == (o.min_pool_size, o.max_pool_size),
            "the pool's (minPoolSize, maxPoolSize) are {sizes:?}, the model's {:?}",
            (o.min_pool_size, o.max_pool_size)
        );
        // Above maxPoolSize only after a resize down, never above the total
        // it left nor above the total of any step since, and with nothing
        // available.
        let max = o.max_pool_size as usize;
        if max == 0 || s.total <= max {
            self.shrink_bound = None;
        } else {
            ensure!(
                self.shrink_bound.is_some_and(|bound| s.total <= bound) && s.available == 0,
                "total {} > maxPoolSize {max} ({} available; at most {:?} after the resize down)",
                s.total,
                s.available,
                self.shrink_bound
            );
            self.shrink_bound = Some(s.total);
        }
        ensure!(
            s.pending <= self.pace.most() as usize,
            "pending {} > maxConnecting (or the adaptive pace's maximum) {}",
            s.pending,
            self.pace.most()
        );
        // The pace is the model's to the last step, and no step that
        // started connections left more pending than it allowed.
        let limit = self.pool.stats().connecting_limit;
        ensure!(
            limit == self.pace.allowed(),
            "the pool's establishment pace is {limit}, the model's {}",
            self.pace.allowed()
        );
        ensure!(
            s.pending <= self.step_pending || s.pending <= self.pace_bound as usize,
            "{} pending after a step that started connections, above the pace {}",
            s.pending,
            self.pace_bound
        );
        let held_all = self.held.len();
        ensure!(
            (s.pending, s.available, s.in_use, s.waiting)
                == (
                    self.pending.len(),
                    self.pooled,
                    self.held_live,
                    self.waiting.len()
                ),
            "pool counts (pending, available, in use, waiting) {:?}, model {:?} ({held_all} held)",
            (s.pending, s.available, s.in_use, s.waiting),
            (
                self.pending.len(),
                self.pooled,
                self.held_live,
                self.waiting.len()
            )
        );
        ensure!(
            s.total == s.pending + s.available + s.in_use,
            "total is not the sum: {s:?}"
        );
        ensure!(
            self.checkouts == self.delivers + self.fails + self.cancels + self.waiting.len() as u64,
            "{} checkouts: {} served, {} failed, {} cancelled, {} waiting",
            self.checkouts,
            self.delivers,
            self.fails,
            self.cancels,
            self.waiting.len()
        );
        if let Some(&(d, w)) = self.deadlines.first() {
            ensure!(d > self.pool_now, "waiter {w} is still queued past its deadline");
            let t = self.pool.poll_timeout();
            ensure!(
                t.is_some_and(|t| t <= d),
                "poll_timeout {t:?} is after waiter {w}'s deadline"
            );
        }
        if s.state == PoolState::Closed {
            ensure!(
                s.pending + s.available + s.waiting == 0,
                "closed pool holds {s:?}"
            );
        }
        if fired {
            // A driver sleeps until poll_timeout: one in the past after the
            // timer fired would make it spin.
            let t = self.pool.poll_timeout();
            ensure!(
                t.is_none_or(|t| t > self.pool_now),
                "poll_timeout is {:?} in the past right after handle_timeout",
                self.pool_now - t.unwrap()
            );
        }
        if self.events {
            ensure!(
                s.state == self.ev_state,
                "state {:?}, events say {:?}",
                s.state,
                self.ev_state
            );
            ensure!(
                (self.ev_started, self.ev_checked_out, self.ev_failed)
                    == (self.checkouts, self.delivers, self.fails),
                "events (started, checked out, failed) {:?}, outputs {:?}",
                (self.ev_started, self.ev_checked_out, self.ev_failed),
                (self.checkouts, self.delivers, self.fails)
            );
        }
        Ok(())
    }

    /// After an establishment failure's step: the pool is not paused by a
    /// labelled failure; exactly the predicted checkout failed with it (at
    /// most one, and none that keeps waiting, when requesters are not
    /// followed exactly); the one that keeps waiting still waits; the pool
    /// gave up reconnecting exactly when predicted.
    pub(crate) fn check_failure(&mut self) -> Result<(), String> {
        let Some(f) = self.failure.take() else {
            return Ok(());
        };
        let state = self.pool.state();
        if f.kind.labelled() {
            ensure!(
                state == f.state_before,
                "a labelled failure of connection {} left the pool {state:?}, was {:?}",
                f.id,
                f.state_before
            );
        }
        if self.exact {
            let expected = u32::from(f.victim.is_some());
            ensure!(
                f.connection_errors == expected,
                "failure of connection {} ({:?}) failed {} checkouts with it, expected {expected} ({:?})",
                f.id,
                f.kind,
                f.connection_errors,
                f.victim
            );
            if let Some(w) = f.kept {
                self.kept_waiting += 1;
                let waiter = &self.waiters[w as usize - 1];
                ensure!(
                    waiter.state == WState::Waiting,
                    "waiter {w}, whose connection {} failed with an overload, is {:?} {:?}, not waiting",
                    f.id,
                    waiter.state,
                    waiter.error
                );
            }
        } else {
            let most = u32::from(!(f.kind.labelled() && self.opts.keep_waiting));
            ensure!(
                f.connection_errors <= most,
                "failure of connection {} ({:?}) failed {} checkouts with it",
                f.id,
                f.kind,
                f.connection_errors
            );
        }
        // While checkouts wait for more than is being made, a ready pool
        // wakes for its next attempt within the pause's bound: the backoff
        // neither outgrows its cap nor outlives a success (it starts again
        // from 15 ms).
        if let Some(by) = f.retry_by {
            if state == PoolState::Ready && self.waiting.len() > self.pending.len() {
                let wake = self.pool.poll_timeout();
                ensure!(
                    wake.is_some_and(|w| w <= by),
                    "after failure {} of connection {}, the pool wakes at {:?}, past the pause's bound {:?}",
                    self.failures,
                    f.id,
                    wake.map(|w| w - self.t0),
                    by - self.t0
                );
            }
        }
        ensure!(
            self.gave_up_events == u32::from(f.gives_up),
            "{} ReconnectGaveUp after failure of connection {}, expected {}",
            self.gave_up_events,
            f.id,
            f.gives_up
        );
        Ok(())
    }

    /// Checks the error a checkout failed with (its `Fail` or
    /// `ConnectionCheckOutFailed`): a `ConnectionError` only for this
    /// step's failure, naming its connection, with the labels of its kind.
    pub(crate) fn check_checkout_error(&self, error: &CheckOutError, what: &str) -> Result<(), String> {
        let CheckOutError::ConnectionError {
            connection_id,
            source,
            ..
        } = error
        else {
            ensure!(error.labels().is_empty(), "{what}: {error:?} carries labels");
            return Ok(());
        };
        let Some(f) = &self.failure else {
            return Err(format!(
                "{what}: a ConnectionError with no failure reported: {error:?}"
            ));
        };
        ensure!(
            connection_id.0 == f.id,
            "{what}: a ConnectionError for {connection_id}, but {} failed",
            f.id
        );
        check_labels(source, f.kind, what)?;
        let labelled = f.kind.labelled();
        ensure!(
            error.has_label("SystemOverloadedError") == labelled
                && error.has_label("RetryableError") == labelled
                && error.is_retryable() == labelled
                && error.labels() == source.labels(),
            "{what}: a {:?} failure gives a checkout error labelled {:?} (retryable: {})",
            f.kind,
            error.labels(),
            error.is_retryable()
        );
        Ok(())
    }
}

/// An establishment error (of a `ConnectionClosed`, a checkout's
/// `ConnectionError`, a `ReconnectGaveUp`) is of the kind reported, with
/// its labels: `SystemOverloadedError` and `RetryableError` for a network
/// failure, none for the others.
pub(crate) fn check_labels(error: &EstablishError, kind: FailKind, what: &str) -> Result<(), String> {
    let labelled = kind.labelled();
    ensure!(
        error.kind() == kind.kind()
            && error.has_label("SystemOverloadedError") == labelled
            && error.has_label("RetryableError") == labelled
            && error.is_overload() == labelled
            && error.is_retryable() == labelled,
        "{what}: a {kind:?} failure reported as {error:?}"
    );
    Ok(())
}
