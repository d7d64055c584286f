//! The switch that stops one establishment: fired by the input that
//! drained its `AbortEstablish` (under the pool's lock the switch is only
//! kept, `under_lock.rs`), waited for by the establishing task
//! (`establish.rs`), or by a blocking driver's thread
//! ([`Abort::wait_until`]). Part of the [driver layer](crate::driver).

use std::sync::atomic::{AtomicBool, Ordering};

use event_listener::Event;

/// The switch that stops one establishment.
#[derive(Default)]
pub struct Abort {
    fired: AtomicBool,
    event: Event,
}

impl Abort {
    /// Fires it: whoever waits is woken.
    pub fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        self.event.notify(usize::MAX);
    }

    /// Whether it has fired.
    pub fn is_fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    /// Blocks the calling thread until it fires (`true`) or `deadline`
    /// passes (`false`; `None`: no deadline).
    pub fn wait_until(&self, deadline: Option<std::time::Instant>) -> bool {
        use event_listener::Listener;
        loop {
            if self.is_fired() {
                return true;
            }
            let listener = self.event.listen();
            if self.is_fired() {
                return true;
            }
            match deadline {
                Some(deadline) => {
                    if listener.wait_deadline(deadline).is_none() {
                        return self.is_fired();
                    }
                }
                None => listener.wait(),
            }
        }
    }

    pub(crate) async fn wait(&self) {
        loop {
            if self.fired.load(Ordering::Acquire) {
                return;
            }
            let listener = self.event.listen();
            if self.fired.load(Ordering::Acquire) {
                return;
            }
            listener.await;
        }
    }
}
