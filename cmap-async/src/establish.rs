//! Establishing connections: one spawned task per `Action::Establish`,
//! bounded by the connect timeout, stopped by `Action::AbortEstablish`, and
//! reporting back even when it is dropped.

use std::sync::{Arc, Weak};
use std::time::Instant;

use cmap_core::{ConnectionId, EstablishError};

use crate::abort::Abort;
use crate::error::EstablishDroppedError;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::Shared;

/// Reports a failure if the task is dropped before it reported anything
/// (the runtime shut down): the core then frees the slot. A report for a
/// connection the core already abandoned is ignored by the core.
struct Report<M: ManageConnection, R: Runtime> {
    pool: Weak<Shared<M, R>>,
    id: ConnectionId,
    armed: bool,
}

impl<M: ManageConnection, R: Runtime> Drop for Report<M, R> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(shared) = self.pool.upgrade() {
            shared.finish_establish(self.id, Err(EstablishError::other(EstablishDroppedError)));
        }
    }
}

/// Spawns the task that establishes connection `id` of `shared`, for a
/// checkout due by `deadline` if one asked for it (`connect_until`'s
/// argument). It holds
/// the pool weakly: a pool dropped meanwhile gets nothing, and the
/// connection is dropped.
pub(crate) fn spawn<M: ManageConnection, R: Runtime>(
    shared: &Shared<M, R>,
    id: ConnectionId,
    abort: Arc<Abort>,
    deadline: Option<Instant>,
) {
    let manager = shared.manager.clone();
    let rt = shared.rt.clone();
    let timeout = shared.timeouts.connect;
    let panics = shared.events.panics.clone();
    let mut report = Report {
        pool: shared.me.clone(),
        id,
        armed: true,
    };
    shared.rt.spawn(async move {
        let timeout = timeout.and_then(|after| Some((after, rt.sleep_until(rt.now().checked_add(after)?))));
        let outcome = crate::driver::connect(
            &*panics,
            || manager.connect_until(deadline),
            |error| manager.classify(error),
            timeout,
            abort.wait(),
        )
        .await;
        report.armed = false;
        // Aborted: the core has already counted it closed.
        let Some(result) = outcome else { return };
        if let Some(shared) = report.pool.upgrade() {
            shared.finish_establish(id, result);
        }
    });
}
