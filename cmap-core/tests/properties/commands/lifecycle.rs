//! The pool's state: `Cmd::Clear`, `Cmd::Ready`, `Cmd::Close`.

use std::sync::Arc;
use std::time::Instant;

use cmap_core::{Clear, PoolState, ServiceId, UsageError};

use crate::model::Sim;

impl Sim {
    /// `Cmd::Clear`: a clear, interrupting or not, for service `[service; 12]`
    /// in load-balanced mode; `wrong_mode` uses the other mode's form.
    pub(crate) fn clear(
        &mut self,
        now: Instant,
        interrupt: bool,
        service: u8,
        wrong_mode: bool,
    ) -> Result<(), String> {
        let lb = self.opts.load_balanced;
        let with_service = lb != wrong_mode;
        let clear = Clear {
            interrupt_in_use: interrupt,
            service_id: with_service.then_some(ServiceId([service; 12])),
            cause: (service == 1).then(|| Arc::from("monitor said so")),
        };
        let r = self.pool.handle_clear(now, clear);
        self.told(now);
        if !wrong_mode && !self.closed {
            // Any clear: the server failed, and an adaptive pace falls
            // back.
            self.pace.cleared();
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

    /// `Cmd::Ready`: marks the pool ready (refused once closed).
    pub(crate) fn ready(&mut self, now: Instant) -> Result<(), String> {
        let closed = self.pool.state() == PoolState::Closed;
        let r = self.pool.handle_ready(now);
        self.told(now);
        self.log(|| format!("ready -> {r:?}"));
        if closed {
            ensure!(r == Err(UsageError::PoolClosed), "ready on a closed pool: {r:?}");
        } else {
            ensure!(r.is_ok(), "ready: {r:?}");
        }
        self.after(false)
    }

    /// `Cmd::Close`: closes the pool.
    pub(crate) fn close(&mut self, now: Instant) -> Result<(), String> {
        self.closed = true;
        self.pool.handle_close(now);
        self.told(now);
        self.log(|| "close".to_owned());
        self.after(false)
    }
}
