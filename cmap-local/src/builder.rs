//! Building a pool: the settings of every adapter's builder, with the same
//! defaults (cmap-async's constants, shared rather than restated).

use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

use cmap_async::{
    default_reconnect, BuildError, ToAddress, DEFAULT_CONNECT_TIMEOUT, DEFAULT_RESET_TIMEOUT,
    DEFAULT_WAIT_QUEUE_TIMEOUT,
};
use cmap_core::{
    AdaptiveConnecting, Address, ConnectionString, Event, OptionsError, PoolOptions, PoolOptionsBuilder,
    Reconnect,
};

use crate::events::Events;
use crate::manager::ManageConnection;
use crate::pool::Pool;
use crate::runtime::LocalRuntime;
use crate::shared::{Shared, Timeouts};

type Callback = Rc<dyn Fn(&Event)>;

/// Builds a [`Pool`]. Its settings and defaults are those of
/// `cmap_async::PoolBuilder` (whose docs say why each default is what it
/// is): a 30 s wait-queue timeout, a reconnect backoff, checkouts that
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
    timeouts: Timeouts,
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
            timeouts: Timeouts {
                connect: Some(DEFAULT_CONNECT_TIMEOUT),
                reset: Some(DEFAULT_RESET_TIMEOUT),
            },
            #[cfg(feature = "recorder")]
            flight: (0, None),
            callbacks: Vec::new(),
            _types: PhantomData,
        }
    }

    /// The server's address for events and logs, unless the manager knows
    /// it ([`ManageConnection::address`]); given, it wins.
    pub fn address(mut self, address: impl ToAddress) -> Self {
        self.address = Some(address.to_address());
        self
    }

    /// Whole options, used as they are (this builder's defaults no longer
    /// apply to options).
    pub fn options(mut self, options: PoolOptions) -> Self {
        self.given = Some(options);
        self
    }

    /// Sets any option through the core's builder, from these defaults.
    pub fn configure(mut self, f: impl FnOnce(PoolOptionsBuilder) -> PoolOptionsBuilder) -> Self {
        self.options = f(self.options);
        self
    }

    /// The pool options of a MongoDB connection string, as
    /// `cmap_async::PoolBuilder::connection_string` reads them (an
    /// unknown option is a warning naming the nearest known one).
    pub fn connection_string(self, uri: &str) -> Self {
        self.read_connection_string(uri, false)
    }

    /// [`connection_string`](Self::connection_string), with an unknown
    /// option an error.
    pub fn connection_string_strict(self, uri: &str) -> Self {
        self.read_connection_string(uri, true)
    }

    fn read_connection_string(mut self, uri: &str, strict: bool) -> Self {
        let result = ConnectionString::parse(uri)
            .map_err(OptionsError::from)
            .and_then(|cs| {
                if !strict {
                    for unknown in cs.unknown_options() {
                        tracing::warn!(
                            option = unknown.name(),
                            suggestion = unknown.suggestion(),
                            "{unknown}, ignored"
                        );
                    }
                }
                if let ([host], None) = (cs.hosts(), &self.address) {
                    self.address_from_uri = Some(host.clone());
                }
                cs.apply_to(&mut self.options, strict)
            });
        if let Err(e) = result {
            self.option_error.get_or_insert(e);
        }
        self
    }

    /// `maxPoolSize` (0: no limit).
    pub fn max_pool_size(self, value: u32) -> Self {
        self.configure(|o| o.max_pool_size(value))
    }

    /// `minPoolSize`.
    pub fn min_pool_size(self, value: u32) -> Self {
        self.configure(|o| o.min_pool_size(value))
    }

    /// `maxConnecting`.
    pub fn max_connecting(self, value: u32) -> Self {
        self.configure(|o| o.max_connecting(value))
    }

    /// An adaptive establishment pace instead of `maxConnecting`.
    pub fn adaptive_connecting(self, value: impl Into<Option<AdaptiveConnecting>>) -> Self {
        let value = value.into();
        self.configure(|o| o.adaptive_connecting(value))
    }

    /// `maxIdleTimeMS` (`None`: no limit).
    pub fn max_idle_time(self, value: impl Into<Option<Duration>>) -> Self {
        let value = value.into();
        self.configure(|o| o.max_idle_time(value))
    }

    /// `waitQueueTimeoutMS`, 30 s unless set (`None`: no limit).
    pub fn wait_queue_timeout(self, value: impl Into<Option<Duration>>) -> Self {
        let value = value.into();
        self.configure(|o| o.wait_queue_timeout(value))
    }

    /// The reconnect backoff (`None`: a cleared pool stays paused).
    pub fn reconnect(self, value: Option<Reconnect>) -> Self {
        self.configure(|o| o.reconnect(value))
    }

    /// The longest `connect` may take (`None`: no limit).
    pub fn connect_timeout(mut self, value: impl Into<Option<Duration>>) -> Self {
        self.timeouts.connect = value.into();
        self
    }

    /// The longest `reset` may take (`None`: no limit).
    pub fn reset_timeout(mut self, value: impl Into<Option<Duration>>) -> Self {
        self.timeouts.reset = value.into();
        self
    }

    /// Keeps a flight recorder of the last `capacity` inputs (0, the
    /// default: off); [`Pool::recording`] returns it.
    #[cfg(feature = "recorder")]
    pub fn flight_recorder(mut self, capacity: usize) -> Self {
        self.flight.0 = capacity;
        self
    }

    /// Where an incident's recording is written.
    #[cfg(feature = "recorder")]
    pub fn flight_recorder_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.flight.1 = Some(dir.into());
        self
    }

    /// Leaves the pool paused once built, for [`Pool::ready`].
    pub fn start_paused(mut self, value: bool) -> Self {
        self.start_paused = value;
        self
    }

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
            timeouts: self.timeouts,
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
