//! Building a pool: the settings of every adapter's builder, with the same
//! defaults (cmap-async's constants, shared rather than restated).

use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

use cmap_async::driver::Settings;
use cmap_async::BuildError;
use cmap_core::Event;

use crate::events::Events;
use crate::manager::ManageConnection;
use crate::pool::Pool;
use crate::runtime::LocalRuntime;
use crate::shared::{Shared, Timeouts};

type Callback = Rc<dyn Fn(&Event)>;

/// Builds a [`Pool`]. Its settings (generated from the list every
/// adapter's builder shares) and defaults are those of
/// `cmap_async::PoolBuilder` (whose docs say why each default is what it
/// is), with callbacks that need not be `Send`: a 30 s wait-queue
/// timeout, a reconnect backoff, checkouts that keep waiting through a
/// network failure, a 10 s connect and reset timeout, a random jitter
/// seed, the pool marked ready once built.
///
/// ```
/// # use cmap_local::{BuildError, ManageConnection, Pool, LocalRuntime};
/// # use std::time::Duration;
/// fn build<M: ManageConnection, R: LocalRuntime + Default>(m: M) -> Result<Pool<M, R>, BuildError> {
///     Pool::builder()
///         .address("db.example:5432")
///         .max_pool_size(10)
///         .wait_queue_timeout(Duration::from_secs(2))
///         .build(m)
/// }
/// ```
#[must_use = "a builder does nothing until `build`"]
pub struct PoolBuilder<M, R> {
    settings: Settings,
    callbacks: Vec<Callback>,
    _types: PhantomData<fn() -> (M, R)>,
}

impl<M: ManageConnection, R: LocalRuntime> Default for PoolBuilder<M, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: ManageConnection, R: LocalRuntime> PoolBuilder<M, R> {
    /// A builder with the defaults above.
    pub fn new() -> Self {
        PoolBuilder {
            settings: Settings::default(),
            callbacks: Vec::new(),
            _types: PhantomData,
        }
    }

    cmap_async::pool_builder_setters!(@common own);

    /// Subscribes a callback before the pool exists, so that it sees
    /// `ConnectionPoolCreated` too.
    pub fn on_event(mut self, callback: impl Fn(&Event) + 'static) -> Self {
        self.callbacks.push(Rc::new(callback));
        self
    }

    /// Builds the pool on `R::default()` and starts its timer task.
    ///
    /// # Errors
    ///
    /// No address, a bad address, or invalid options.
    pub fn build(self, manager: M) -> Result<Pool<M, R>, BuildError>
    where
        R: Default,
    {
        self.build_on(manager, R::default())
    }

    /// Builds the pool on `R::default()` and waits until it holds
    /// minPoolSize open connections (with minPoolSize 0, until one
    /// checkout succeeds), at most `timeout`: see [`Pool::wait_ready`].
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build), and [`BuildError::NotReady`] at the
    /// timeout (the pool is closed then).
    pub async fn build_and_wait(self, manager: M, timeout: Duration) -> Result<Pool<M, R>, BuildError>
    where
        R: Default,
    {
        let pool = self.build(manager)?;
        match pool.wait_ready(timeout).await {
            Ok(()) => Ok(pool),
            Err(not_ready) => {
                pool.close();
                Err(not_ready.into())
            }
        }
    }

    /// Builds the pool on `rt` and starts its timer task (inside the
    /// runtime: for tokio, in a `LocalSet`).
    ///
    /// # Errors
    ///
    /// No address, a bad address, or invalid options.
    pub fn build_on(mut self, manager: M, rt: R) -> Result<Pool<M, R>, BuildError> {
        let (address, options) = self.settings.resolve(|| manager.address())?;
        let events = Events::default();
        for callback in self.callbacks {
            let _ = events.subscribe(callback);
        }
        events.refresh();
        // Spec: the pool is created paused and emits ConnectionPoolCreated.
        let core = cmap_core::Pool::new(rt.now(), address.clone(), options);
        #[cfg(feature = "metrics")]
        let metrics = self
            .settings
            .metrics
            .then(|| cmap_async::driver::Metrics::new(&address));
        let shared = Rc::new_cyclic(|me| Shared {
            me: me.clone(),
            core: std::cell::RefCell::new(core),
            manager: Rc::new(manager),
            rt,
            address,
            timeouts: Timeouts {
                connect: self.settings.connect_timeout,
                reset: self.settings.reset_timeout,
            },
            waiters: Default::default(),
            establishing: Default::default(),
            interrupted: Default::default(),
            events,
            timer: Rc::default(),
            armed: Cell::new(None),
            handles: Cell::new(1),
            leaks: crate::leak::Leaks::new(self.settings.leak_detection_threshold),
            #[cfg(feature = "recorder")]
            flight: match self.settings.flight {
                (0, _) => None,
                (capacity, dir) => Some(crate::flight::Flight::new(capacity, dir)),
            },
            #[cfg(feature = "metrics")]
            metrics,
        });
        // Before the ready input: its measures count.
        #[cfg(feature = "metrics")]
        (shared.core.borrow_mut()).set_measures_enabled(shared.metrics.is_some());
        let start_paused = self.settings.start_paused;
        shared.input(|core, now| {
            if !start_paused {
                // A new pool is not closed: this cannot fail.
                let _ = core.handle_ready(now);
            }
        });
        #[cfg(feature = "recorder")]
        if let Some(flight) = &shared.flight {
            let capacity = flight.capacity;
            shared.input(|core, now| core.start_recording(now, capacity));
        }
        shared.rt.spawn_local(crate::timer::run(Rc::downgrade(&shared)));
        if shared.leaks.is_some() {
            shared.rt.spawn_local(crate::leak::watch(Rc::downgrade(&shared)));
        }
        Ok(Pool::from_shared(shared))
    }
}
