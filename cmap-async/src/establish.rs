//! Establishing connections: one spawned task per `Action::Establish`,
//! bounded by the connect timeout, stopped by `Action::AbortEstablish`, and
//! reporting back even when it is dropped.

use std::sync::{Arc, Weak};

use cmap_core::{ConnectionId, EstablishError};

use crate::abort::Abort;
use crate::error::{ConnectTimeoutError, EstablishDroppedError};
use crate::manager::ManageConnection;
use crate::panics::Hook;
use crate::runtime::Runtime;
use crate::shared::Shared;
use crate::util::{race, Either};

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

/// Spawns the task that establishes connection `id` of `shared`. It holds
/// the pool weakly: a pool dropped meanwhile gets nothing, and the
/// connection is dropped.
pub(crate) fn spawn<M: ManageConnection, R: Runtime>(
    shared: &Shared<M, R>,
    id: ConnectionId,
    abort: Arc<Abort>,
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
        let connect = async {
            let labelled = |error: M::Error| EstablishError::new(manager.classify(&error), error);
            let deadline = timeout.and_then(|t| rt.now().checked_add(t));
            match (timeout, deadline) {
                (Some(after), Some(deadline)) => {
                    match race(manager.connect(), rt.sleep_until(deadline)).await {
                        Either::Left(result) => result.map_err(labelled),
                        // A network timeout: possibly overload (spec).
                        Either::Right(()) => Err(EstablishError::network(ConnectTimeoutError { after })),
                    }
                }
                _ => manager.connect().await.map_err(labelled),
            }
        };
        // A panic in `connect` or `classify` is a failure like any
        // other (not a sign of overload): the slot is freed and the
        // checkout that asked is told why.
        let connect = panics.guard(Hook::Connect, || connect);
        let outcome = race(connect, abort.wait()).await;
        report.armed = false;
        // Aborted: the core has already counted it closed.
        let Either::Left(result) = outcome else { return };
        let result = result.unwrap_or_else(|panicked| Err(EstablishError::other(panicked)));
        if let Some(shared) = report.pool.upgrade() {
            shared.finish_establish(id, result);
        }
    });
}
