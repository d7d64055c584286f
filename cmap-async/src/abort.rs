//! The switch that stops one establishment: fired by the input that
//! drained its `AbortEstablish` (under the pool's lock the switch is only
//! kept, `under_lock.rs`), waited for by the establishing task
//! (`establish.rs`).

use std::sync::atomic::{AtomicBool, Ordering};

use event_listener::Event;

/// The switch that stops one establishment.
#[derive(Default)]
pub(crate) struct Abort {
    fired: AtomicBool,
    event: Event,
}

impl Abort {
    pub(crate) fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        self.event.notify(usize::MAX);
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
