//! The pool's state: `Input::Clear`, `Input::Ready`, `Input::Close`,
//! `Input::ForceClose`.

use std::sync::Arc;
use std::time::Instant;

use cmap_core::{Clear, Handled, Input, PoolState, ServiceId, UsageError};

use crate::model::{CState, Sim};
use crate::steps::{Drawn, INTERRUPT, WRONG_MODE};

impl Sim {
    /// `Input::Clear`: a clear, interrupting or not (`INTERRUPT`), for
    /// service `[service; 12]` in load-balanced mode; `WRONG_MODE` uses the
    /// other mode's form.
    pub(crate) fn clear(&mut self, now: Instant, drawn: Drawn) -> Result<(), String> {
        let (interrupt, service, wrong_mode) = (drawn.has(INTERRUPT), drawn.service(), drawn.has(WRONG_MODE));
        let lb = self.opts.load_balanced;
        let with_service = lb != wrong_mode;
        let clear = Clear {
            interrupt_in_use: interrupt,
            service_id: with_service.then_some(ServiceId([service; 12])),
            cause: (service == 1).then(|| Arc::from("monitor said so")),
        };
        let clears = !wrong_mode && !self.closed;
        if clears {
            // Any clear: the server failed, and an adaptive pace falls
            // back; from a probe that is up to its minimum, which the
            // connects this step starts (a load-balanced pool stays ready)
            // may use, unless the pool still probes a refusing server.
            self.pace.cleared();
            self.pace_bound = self.pace_bound.max(self.pace.allowed());
        }
        let r = self.handle_plain(now, Input::Clear(clear))?;
        if clears {
            if lb {
                let sid = ServiceId([service; 12]);
                // Only a service the pool knows has a generation.
                if let Some(entry) = self.services.get_mut(&sid) {
                    entry.0 += 1;
                    self.step_clear = Some((interrupt, Some(sid)));
                }
            } else {
                self.generation += 1;
                self.step_clear = Some((interrupt, None));
            }
        }
        self.log(|| format!("clear interrupt={interrupt} service={with_service} -> {r:?}"));
        if wrong_mode {
            ensure!(
                matches!(r, Err(UsageError::ClearMode(_))),
                "clear in the wrong mode: {r:?}"
            );
        } else {
            ensure!(r.is_ok(), "clear: {r:?}");
        }
        self.after(false)
    }

    /// `Input::Ready`: marks the pool ready (refused once closed).
    pub(crate) fn ready(&mut self, now: Instant) -> Result<(), String> {
        let closed = self.pool.state() == PoolState::Closed;
        let r = self.handle_plain(now, Input::Ready)?;
        self.log(|| format!("ready -> {r:?}"));
        if closed {
            ensure!(r == Err(UsageError::PoolClosed), "ready on a closed pool: {r:?}");
        } else {
            ensure!(r.is_ok(), "ready: {r:?}");
        }
        self.after(false)
    }

    /// `Input::Close`: closes the pool.
    pub(crate) fn close(&mut self, now: Instant) -> Result<(), String> {
        self.closed = true;
        let r = self.handle_plain(now, Input::Close)?;
        ensure!(r.is_ok(), "close: {r:?}");
        self.log(|| "close".to_owned());
        self.after(false)
    }

    /// `Input::ForceClose`: refused (`NotClosed`) until the pool is
    /// closed; then every connection still in use and not interrupted
    /// already is interrupted (`Action::Interrupt`), closed in the pool's
    /// books with reason `PoolClosed`, and counted in the answer; the
    /// holder's connection is disposed of when it comes back.
    pub(crate) fn force_close(&mut self, now: Instant) -> Result<(), String> {
        let live = self
            .conns
            .iter()
            .filter(|c| c.state == CState::Held { interrupted: false })
            .count();
        self.step_force_close = self.closed;
        let r = self.handle(now, Input::ForceClose)?;
        self.log(|| format!("force close -> {r:?}"));
        if self.closed {
            ensure!(
                matches!(r, Ok(Handled::ForceClosed(n)) if n == live),
                "force close of {live} in use: {r:?}"
            );
            self.forced += live as u64;
        } else {
            ensure!(
                matches!(r, Err(UsageError::NotClosed)),
                "force close of a pool not closed: {r:?}"
            );
        }
        self.after(false)?;
        // Interrupted, each by its own action (`on_action`).
        let left = self
            .conns
            .iter()
            .filter(|c| c.state == CState::Held { interrupted: false })
            .count();
        ensure!(
            !self.closed || left == 0,
            "{left} connections in use left uninterrupted by a force close"
        );
        Ok(())
    }
}
