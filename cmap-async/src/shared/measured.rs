//! The metrics export's steps in the input cycle (feature `metrics`):
//! an input's measures taken under the pool's lock and applied once it is
//! released (the export itself: `export.rs`).

use super::{Locked, Shared};
use crate::export::Measured;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::slot::Handed;
use crate::under_lock::Inner;

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
    /// `Cycle::settle`, the fast path, for a pool that exports metrics:
    /// the input's measures taken under the lock, applied once it is
    /// released, before a hand-over's slot is filled (as events are
    /// delivered before); inlined, or cmap-blocking's checkout is not.
    #[inline(always)]
    pub(crate) fn settle_measured(
        &self,
        mut locked: Locked<'_, M::Connection>,
        handed: Option<Handed<M::Connection>>,
    ) {
        let measured = self.measured(&mut locked);
        self.release(locked);
        self.apply_measured(measured);
        if let Some((slot, connection)) = handed {
            self.fill((slot, Ok(connection)));
        }
    }

    /// Under the pool's lock, after an input: what it leaves the metrics,
    /// if the pool exports them.
    #[inline(always)]
    pub(crate) fn measured(&self, inner: &mut Inner<M::Connection>) -> Option<Measured> {
        self.metrics.as_ref()?.take(&mut inner.core)
    }

    /// Once the lock is released: `measured` applied, a panic of the
    /// recorder's caught once for the lot.
    #[inline(always)]
    pub(crate) fn apply_measured(&self, measured: Option<Measured>) {
        if let (Some(measured), Some(metrics)) = (&measured, &self.metrics) {
            metrics.apply(measured, &*self.events.panics);
        }
    }
}
