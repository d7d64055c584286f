//! `Input::Resize`, and the model's predictions for the pool's size (a
//! connection arriving above maxPoolSize, a close with reason `Shrunk`).

use std::collections::VecDeque;
use std::time::Instant;

use cmap_core::{ClosedReason, Input, OptionsError, PoolState, UsageError};

use crate::model::{CState, ResizeStep, Sim};

impl Sim {
    /// `Input::Resize`, at the driver's clock when letting time pass does
    /// nothing there (no deadline passes, no reconnect backoff may end),
    /// and at the pool's own time otherwise: all it does is the resize's
    /// own. Predicts from the model alone
    /// whether it is refused (then nothing happens: no output, the sizes
    /// stay), which available connections it closes for the size (the
    /// least recently used above the new maximum, with reason `Shrunk`,
    /// after its `PoolResized`), and how many it starts growing; checked
    /// as the outputs come (`on_event`, `on_action`, `sized_close`) and
    /// after the step.
    pub(crate) fn resize(&mut self, (min, max): (u32, u32)) -> Result<(), String> {
        let quiet = self.deadlines.first().is_none_or(|&(d, _)| d > self.wall)
            && (self.opts.reconnect.is_none() || self.failing_since.is_none());
        let now = if quiet { self.wall } else { self.pool_now };
        let expected = if self.closed {
            Err(UsageError::ResizeClosed)
        } else if max > 0 && min > max {
            Err(UsageError::InvalidSize(OptionsError::MinExceedsMax { min, max }))
        } else {
            Ok(())
        };
        if expected.is_ok() {
            self.opts.min_pool_size = min;
            self.opts.max_pool_size = max;
            let total = self.pending.len() + self.pooled + self.held_live;
            let excess = if max == 0 {
                0
            } else {
                total.saturating_sub(max as usize)
            };
            let mut idle: Vec<(u64, u64)> = self
                .conns
                .iter()
                .zip(1u64..)
                .filter(|(c, _)| c.state == CState::Pooled)
                .map(|(c, id)| (c.pooled_seq, id))
                .collect();
            idle.sort_unstable();
            let closes: VecDeque<u64> = idle.iter().take(excess).map(|&(_, id)| id).collect();
            let left = total - closes.len();
            self.shrink_bound = (max > 0 && left > max as usize).then_some(left);
            self.resize = Some(ResizeStep {
                min,
                max,
                closed_events: if self.events {
                    closes.clone()
                } else {
                    VecDeque::new()
                },
                closes,
                announced: false,
                pending_after: self.pending_after_resize(left),
            });
        }
        let r = self.handle_plain(now, Input::Resize { min, max })?;
        self.log(|| format!("resize min={min} max={max} -> {r:?}"));
        ensure!(
            r == expected,
            "resize to ({min}, {max}): {r:?}, expected {expected:?}"
        );
        self.after(false)?;
        let Some(step) = self.resize.take() else {
            ensure!(
                self.step_outputs == 0,
                "a refused resize made {} outputs",
                self.step_outputs
            );
            return Ok(());
        };
        ensure!(
            step.closes.is_empty() && step.closed_events.is_empty(),
            "the resize to ({min}, {max}) left {:?} open (Close) and {:?} (ConnectionClosed), the least recently used available above it",
            step.closes,
            step.closed_events
        );
        ensure!(
            !self.events || step.announced,
            "a resize to ({min}, {max}) without PoolResized"
        );
        if let Some(n) = step.pending_after {
            ensure!(
                self.pending.len() == n,
                "a resize to ({min}, {max}) leaves {} pending, expected {n} ({} waiting)",
                self.pending.len(),
                self.waiting.len()
            );
        }
        Ok(())
    }

    /// How many connections are pending after a resize that leaves `total`:
    /// a ready pool starts connections for the waiters that outnumber the
    /// pending ones, then (with a maintenance interval) towards
    /// minPoolSize, within maxConnecting and maxPoolSize. `None` while a
    /// reconnect backoff may hold them back.
    pub(crate) fn pending_after_resize(&self, mut total: usize) -> Option<usize> {
        let mut pending = self.pending.len();
        if self.pool.state() != PoolState::Ready {
            return Some(pending);
        }
        if self.opts.reconnect.is_some() && self.failing_since.is_some() {
            return None;
        }
        let max = self.opts.max_pool_size as usize;
        let max_connecting = self.pace.allowed() as usize;
        let room = |total: usize, pending: usize| (max == 0 || total < max) && pending < max_connecting;
        while self.waiting.len() > pending && room(total, pending) {
            total += 1;
            pending += 1;
        }
        if self.opts.maintenance_ms.is_some() {
            while total < self.opts.min_pool_size as usize && room(total, pending) {
                total += 1;
                pending += 1;
            }
        }
        Some(pending)
    }

    /// Whether a connection arriving now (checked in, or established)
    /// finds the pool above maxPoolSize counting it, as a resize down
    /// leaves it until enough connections are gone (see `Arrival::over`).
    /// Asked before the connection moves in the model's books.
    pub(crate) fn over_size_with_arrival(&self, now: Instant) -> Option<bool> {
        let max = self.opts.max_pool_size as usize;
        let total = self.pending.len() + self.pooled + self.held_live;
        if self.closed || max == 0 || total <= max {
            return Some(false);
        }
        let at = now.max(self.pool_now);
        let expires = self.deadlines.first().is_some_and(|&(d, _)| d <= at);
        (!expires).then_some(true)
    }

    /// A close for the pool's size (reason `Shrunk`): only the least
    /// recently used available connections a resize closes, in that
    /// order, and a connection that arrives while the pool holds more than
    /// maxPoolSize. Says whether connection `id`'s close (its `Close`, or
    /// with `event` its `ConnectionClosed`) was one; its reason is checked
    /// here then, and by `check_close_reason` otherwise.
    pub(crate) fn sized_close(&mut self, id: u64, reason: ClosedReason, event: bool) -> Result<bool, String> {
        let what = if event { "ConnectionClosed" } else { "Close" };
        if let Some(step) = &mut self.resize {
            let closes = if event {
                &mut step.closed_events
            } else {
                &mut step.closes
            };
            if let Some(next) = closes.pop_front() {
                ensure!(
                    next == id && reason == ClosedReason::Shrunk,
                    "{what} of connection {id} ({reason:?}) while the resize must close {next} (Shrunk), the least recently used available one"
                );
                return Ok(true);
            }
        }
        if let Some(a) = self.arrival.as_ref().filter(|a| a.id == id) {
            match a.over {
                Some(true) => {
                    ensure!(
                        reason == ClosedReason::Shrunk,
                        "{what} of connection {id}, arriving above maxPoolSize {}, says {reason:?}",
                        self.opts.max_pool_size
                    );
                }
                None if reason == ClosedReason::Shrunk => {}
                _ => {
                    ensure!(
                        reason != ClosedReason::Shrunk,
                        "{what} of connection {id} says Shrunk, but it arrives within maxPoolSize {}",
                        self.opts.max_pool_size
                    );
                    return Ok(false);
                }
            }
            if !event {
                self.shrunk_on_arrival += 1;
            }
            return Ok(true);
        }
        ensure!(
            reason != ClosedReason::Shrunk,
            "{what} of connection {id} says Shrunk, which the model does not expect"
        );
        Ok(false)
    }
}
