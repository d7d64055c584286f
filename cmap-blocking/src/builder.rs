//! Building a synchronous pool: every setter of the other drivers'
//! builders (`pool_builder_setters!` over the driver layer's `Settings`).

use std::time::{Duration, Instant};

use cmap_async::driver::{Settings, Subscriber};
use cmap_async::BuildError;

use crate::fork;
use crate::manager::ManageConnection;
use crate::pool::Pool;
use crate::shared::Shared;

/// Builds a [`Pool`], with the defaults and settings of
/// [`cmap_async::PoolBuilder`]: its setters are generated from the same
/// list, so each has the same name, signature and documentation here.
#[must_use = "a builder does nothing until `build`"]
pub struct PoolBuilder<M: ManageConnection> {
    settings: Settings,
    callbacks: Vec<Subscriber>,
    _manager: std::marker::PhantomData<fn() -> M>,
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
            settings: Settings::default(),
            callbacks: Vec::new(),
            _manager: std::marker::PhantomData,
        }
    }

    cmap_async::pool_builder_setters!(own);

    /// Builds the pool and starts its background thread.
    ///
    /// # Errors
    ///
    /// No address, a bad address, or invalid options.
    pub fn build(mut self, manager: M) -> Result<Pool<M>, BuildError> {
        fork::watch();
        let settings = &mut self.settings;
        let parts = settings.parts(|| manager.address(), self.callbacks, Instant::now())?;
        let shared = Shared::new(manager, settings.connect_timeout, parts);
        if !settings.start_paused {
            // A new pool is not closed: this cannot fail.
            let _ = shared.input(|inner, now| inner.core.handle_ready(now));
        }
        #[cfg(feature = "recorder")]
        if let Some(flight) = &shared.flight {
            let capacity = flight.capacity;
            shared.input(|inner, now| inner.core.start_recording(now, capacity));
        }
        shared.start_threads();
        Ok(Pool::from_shared(shared))
    }

    /// Builds the pool and blocks until it holds minPoolSize open
    /// connections (with minPoolSize 0, until one checkout succeeds), at
    /// most `timeout`.
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
