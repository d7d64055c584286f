//! Building a synchronous pool: the async pool's builder, on
//! [`ThreadRuntime`], with the manager wrapped in [`SyncManager`].

use std::time::Duration;

use cmap_async::BuildError;

use crate::fork;
use crate::manager::{ManageConnection, SyncManager};
use crate::pool::Pool;
use crate::runtime::ThreadRuntime;

/// Builds a [`Pool`], with the defaults and settings of
/// [`cmap_async::PoolBuilder`]: its setters are generated from the same
/// list, so each has the same name, signature and documentation here.
///
/// ```
/// # use std::time::Duration;
/// # use cmap_blocking::{BuildError, ManageConnection, Pool};
/// fn build<M: ManageConnection>(manager: M) -> Result<Pool<M>, BuildError> {
///     Pool::builder()
///         .address("db.example:27017")
///         .max_pool_size(10)
///         .wait_queue_timeout(Duration::from_secs(2))
///         .build(manager)
/// }
/// ```
#[must_use = "a builder does nothing until `build`"]
pub struct PoolBuilder<M: ManageConnection> {
    inner: cmap_async::PoolBuilder<SyncManager<M>, ThreadRuntime>,
}

impl<M: ManageConnection> Default for PoolBuilder<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: ManageConnection> PoolBuilder<M> {
    /// A builder with the defaults.
    pub fn new() -> Self {
        PoolBuilder {
            inner: cmap_async::PoolBuilder::new(),
        }
    }

    fn map(
        self,
        f: impl FnOnce(
            cmap_async::PoolBuilder<SyncManager<M>, ThreadRuntime>,
        ) -> cmap_async::PoolBuilder<SyncManager<M>, ThreadRuntime>,
    ) -> Self {
        PoolBuilder { inner: f(self.inner) }
    }

    cmap_async::pool_builder_setters!(forward);

    /// Builds the pool and starts its background thread.
    ///
    /// # Errors
    ///
    /// No address, a bad address, or invalid options.
    pub fn build(self, manager: M) -> Result<Pool<M>, BuildError> {
        fork::watch();
        let inner = self.inner.build_on(SyncManager::new(manager), ThreadRuntime)?;
        Ok(Pool::from_async(inner))
    }

    /// Builds the pool and blocks until it holds minPoolSize open
    /// connections (with minPoolSize 0, until one checkout succeeds), at
    /// most `timeout`: see [`cmap_async::PoolBuilder::build_and_wait`].
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build), and [`BuildError::NotReady`] at the
    /// timeout (the pool is closed then).
    pub fn build_and_wait(self, manager: M, timeout: Duration) -> Result<Pool<M>, BuildError> {
        let pool = self.build(manager)?;
        match pool.wait_ready(timeout) {
            Ok(()) => Ok(pool),
            Err(not_ready) => {
                pool.close();
                Err(not_ready.into())
            }
        }
    }
}
