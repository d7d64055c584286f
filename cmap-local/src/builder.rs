//! Building a pool: the settings of every adapter's builder, with the same
//! defaults (cmap-async's constants, shared rather than restated).

use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

use cmap_async::{
    default_reconnect, BuildError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_RESET_TIMEOUT, DEFAULT_WAIT_QUEUE_TIMEOUT,
};
use cmap_core::{Address, Event, OptionsError, PoolOptions, PoolOptionsBuilder};

use crate::events::Events;
use crate::manager::ManageConnection;
use crate::pool::Pool;
use crate::runtime::LocalRuntime;
use crate::shared::{Shared, Timeouts};

type Callback = Rc<dyn Fn(&Event)>;

/// Builds a [`Pool`]. Its settings (generated from the list every
/// adapter's builder shares) and defaults are those of
/// `cmap_async::PoolBuilder` (whose docs say why each default is what it
/// is), less leak detection and metrics, and with callbacks that need not
/// be `Send`: a 30 s wait-queue timeout, a reconnect backoff, checkouts that
/// keep waiting through a network failure, a 10 s connect and reset
/// timeout, a random jitter seed, the pool marked ready once built.
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
    address: Option<Result<Address, BuildError>>,
    address_from_uri: Option<Address>,
    options: PoolOptionsBuilder,
    given: Option<PoolOptions>,
    option_error: Option<OptionsError>,
    start_paused: bool,
    connect_timeout: Option<Duration>,
    reset_timeout: Option<Duration>,
    #[cfg(feature = "recorder")]
    flight: (usize, Option<std::path::PathBuf>),
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
            address: None,
            address_from_uri: None,
            options: PoolOptions::builder()
                .reconnect(Some(default_reconnect()))
                .wait_queue_timeout(DEFAULT_WAIT_QUEUE_TIMEOUT)
                .keep_waiting_on_overload(true),
            given: None,
            option_error: None,
            start_paused: false,
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            reset_timeout: Some(DEFAULT_RESET_TIMEOUT),
            #[cfg(feature = "recorder")]
            flight: (0, None),
            callbacks: Vec::new(),
            _types: PhantomData,
        }
    }

    cmap_async::__pool_builder_setters!(@common own);
    cmap_async::__pool_builder_setters!(@reader);

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

    /// Builds the pool on `rt` and starts its timer task (inside the
    /// runtime: for tokio, in a `LocalSet`).
    ///
    /// # Errors
    ///
    /// No address, a bad address, or invalid options.
    pub fn build_on(self, manager: M, rt: R) -> Result<Pool<M, R>, BuildError> {
        let address = match self.address {
            Some(given) => given?,
            None => match self.address_from_uri {
                Some(host) => host,
                None => manager.address().ok_or(BuildError::MissingAddress)?,
            },
        };
        let mut options = match self.given {
            Some(options) => options,
            None => match self.option_error {
                Some(error) => return Err(error.into()),
                None => self.options.build()?,
            },
        };
        if options.seed().is_none() {
            // Pools that fail together must not retry together.
            options = options.with_seed(fastrand::u64(..));
        }
        let events = Events::default();
        for callback in self.callbacks {
            let _ = events.subscribe(callback);
        }
        // Spec: the pool is created paused and emits ConnectionPoolCreated.
        let core = cmap_core::Pool::new(rt.now(), address.clone(), options);
        let shared = Rc::new_cyclic(|me| Shared {
            me: me.clone(),
            core: std::cell::RefCell::new(core),
            manager: Rc::new(manager),
            rt,
            address,
            timeouts: Timeouts {
                connect: self.connect_timeout,
                reset: self.reset_timeout,
            },
            waiters: Default::default(),
            establishing: Default::default(),
            interrupted: Default::default(),
            events,
            timer: Rc::default(),
            armed: Cell::new(None),
            handles: Cell::new(1),
            #[cfg(feature = "recorder")]
            flight: match self.flight {
                (0, _) => None,
                (capacity, dir) => Some(crate::flight::Flight::new(capacity, dir)),
            },
        });
        let start_paused = self.start_paused;
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
        Ok(Pool::from_shared(shared))
    }
}
