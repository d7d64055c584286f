//! Every setter of a pool builder, written once.
//!
//! [`PoolBuilder`](crate::PoolBuilder) expands the list with its own bodies;
//! an adapter whose builder wraps it (cmap-blocking's) expands the same
//! list as forwarders, so that every adapter offers each option under one
//! name, one signature and one doc comment. Doc links are `crate::` paths
//! that both crates export.

use std::path::PathBuf;
use std::time::Duration;

use cmap_core::{Address, ConnectionString, OptionsError, PoolOptions, PoolOptionsBuilder};

use crate::builder::{
    default_reconnect, DEFAULT_CONNECT_TIMEOUT, DEFAULT_RESET_TIMEOUT, DEFAULT_WAIT_QUEUE_TIMEOUT,
};
use crate::error::BuildError;

/// What every adapter's builder holds (its `@common` setters write it),
/// starting from the builders' defaults, and how it becomes a pool's
/// address and options. Part of the [driver layer](crate::driver).
pub struct Settings {
    /// The address given to the builder.
    pub address: Option<Result<Address, BuildError>>,
    /// The one host of the connection string, if it names one.
    pub address_from_uri: Option<Address>,
    /// The options set one by one, from the defaults.
    pub options: PoolOptionsBuilder,
    /// Whole options, used as they are.
    pub given: Option<PoolOptions>,
    /// The first error of a connection string, for `build`.
    pub option_error: Option<OptionsError>,
    /// Left paused once built.
    pub start_paused: bool,
    /// The longest `connect` may take.
    pub connect_timeout: Option<Duration>,
    /// The longest `reset` may take.
    pub reset_timeout: Option<Duration>,
    /// Flight recorder capacity (0: off) and incident folder.
    pub flight: (usize, Option<PathBuf>),
    /// Leak detection's threshold (`None` or zero: off).
    pub leak_detection_threshold: Option<Duration>,
    /// Metrics export (feature `metrics` of the adapter).
    pub metrics: bool,
}

impl Default for Settings {
    /// The defaults `PoolBuilder`'s docs give.
    fn default() -> Self {
        Settings {
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
            flight: (0, None),
            leak_detection_threshold: None,
            metrics: false,
        }
    }
}

impl Settings {
    /// Reads a connection string's options (see
    /// `PoolBuilder::connection_string`); its first error fails the build.
    pub fn read_connection_string(&mut self, uri: &str, strict: bool) {
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
    }

    /// The pool's address (given, else the connection string's one host,
    /// else the manager's) and its options, seeded at random unless a seed
    /// was set.
    ///
    /// # Errors
    ///
    /// No address, a bad address, or invalid options.
    pub fn resolve(
        &mut self,
        manager_address: impl FnOnce() -> Option<Address>,
    ) -> Result<(Address, PoolOptions), BuildError> {
        let address = match self.address.take() {
            Some(given) => given?,
            None => match self.address_from_uri.take() {
                Some(host) => host,
                None => manager_address().ok_or(BuildError::MissingAddress)?,
            },
        };
        let mut options = match self.given.take() {
            Some(options) => options,
            None => match self.option_error.take() {
                Some(error) => return Err(error.into()),
                None => std::mem::take(&mut self.options).build()?,
            },
        };
        if options.seed().is_none() {
            // Pools that fail together must not retry together.
            options = options.with_seed(fastrand::u64(..));
        }
        Ok((address, options))
    }
}

/// What a threaded driver's `build` makes from its [`Settings`] before
/// its pool exists ([`Settings::parts`]): the same for cmap-async's pool
/// and cmap-blocking's. Part of the [driver layer](crate::driver).
#[non_exhaustive]
pub struct Parts<C> {
    /// The server's address, for events and logs.
    pub address: Address,
    /// The options as built (seeded).
    pub options: PoolOptions,
    /// The core, paused: it has emitted `ConnectionPoolCreated`.
    pub core: cmap_core::Pool<C>,
    /// The events' hub, with the builder's callbacks subscribed.
    pub events: std::sync::Arc<crate::events::EventHub>,
    /// Leak detection, when a threshold is set.
    pub leaks: Option<Box<crate::leak::Leaks>>,
    /// The flight recorder, when turned on.
    #[cfg(feature = "recorder")]
    pub flight: Option<Box<crate::flight::Flight>>,
    /// The metrics export, when turned on.
    #[cfg(feature = "metrics")]
    pub metrics: Option<crate::export::Metrics>,
}

impl Settings {
    /// The [`Parts`] of a pool: its address (see [`resolve`](Self::resolve)),
    /// a core made at `now`, a hub with `callbacks` subscribed (before the
    /// pool exists, so they see `ConnectionPoolCreated`), and leak
    /// detection, the flight recorder and metrics as set.
    ///
    /// # Errors
    ///
    /// As [`resolve`](Self::resolve).
    pub fn parts<C>(
        &mut self,
        manager_address: impl FnOnce() -> Option<Address>,
        callbacks: Vec<crate::events::Subscriber>,
        now: std::time::Instant,
    ) -> Result<Parts<C>, BuildError> {
        let (address, options) = self.resolve(manager_address)?;
        let events = std::sync::Arc::new(crate::events::EventHub::default());
        for callback in callbacks {
            // Dropping the handle keeps the callback.
            let _ = events.on_batch(callback);
        }
        events.refresh();
        // Spec: the pool is created paused and emits ConnectionPoolCreated.
        let core = cmap_core::Pool::new(now, address.clone(), options.clone());
        Ok(Parts {
            #[cfg(feature = "recorder")]
            flight: match std::mem::take(&mut self.flight) {
                (0, _) => None,
                (capacity, dir) => Some(Box::new(crate::flight::Flight::new(capacity, dir))),
            },
            #[cfg(feature = "metrics")]
            metrics: self.metrics.then(|| crate::export::Metrics::new(&address)),
            leaks: crate::leak::Leaks::new(self.leak_detection_threshold),
            address,
            options,
            core,
            events,
        })
    }
}

/// Expands every builder setter (`@common`: those of every adapter,
/// `@threaded`: those of pools shared between threads, the `Send + Sync`
/// event callback; both without a group), in one of two modes:
///
/// - `own`: the body written beside each setter, on a builder that holds
///   a [`Settings`] in a field `settings` (and, for `@threaded`, a
///   `callbacks` list as cmap-async's [`PoolBuilder`](crate::PoolBuilder));
/// - `forward`: `self.map(|b| b.setter(value))`, for a builder that holds a
///   cmap-async `PoolBuilder` and has a `map` method applying a function to
///   it.
///
/// Part of the [driver layer](crate::driver): a driver's builder expands
/// `@common` (and `@threaded` if its pool is shared between threads) in
/// its `impl` block, so that its options are every other driver's.
#[macro_export]
macro_rules! pool_builder_setters {
    // `self` passes as an identifier: hygiene keeps the body's `self` from
    // naming a parameter written by another expansion.
    (@emit own $(#[$attr:meta])* $name:ident($self:ident, $value:ident: $ty:ty) $body:block) => {
        $(#[$attr])*
        pub fn $name(mut $self, $value: $ty) -> Self {
            $body
            $self
        }
    };
    (@emit forward $(#[$attr:meta])* $name:ident($self:ident, $value:ident: $ty:ty) $body:block) => {
        $(#[$attr])*
        pub fn $name($self, $value: $ty) -> Self {
            $self.map(move |b| b.$name($value))
        }
    };
    // Every adapter's settings.
    (@common $mode:ident) => {
        $crate::pool_builder_setters! { @emit $mode
            /// The server's address, for events and logs (`serverHost`,
            /// `serverPort`): an [`Address`](crate::Address),
            /// `"host:port"`, or a socket address. Needed only when the
            /// manager does not know it
            /// ([`ManageConnection::address`](crate::ManageConnection::address));
            /// given, it overrides the manager's. The manager decides where
            /// it really connects.
            address(self, address: impl $crate::ToAddress) {
                self.settings.address = Some($crate::ToAddress::to_address(address));
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// Whole options, used as they are: the settings below and the
            /// defaults of this builder no longer apply to options.
            options(self, options: $crate::PoolOptions) {
                self.settings.given = Some(options);
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// Sets any option through the core's builder, starting from
            /// this builder's defaults.
            ///
            /// ```
            /// # use cmap_async::{ManageConnection, PoolBuilder, Runtime};
            /// # use std::time::Duration;
            /// # fn f<M: ManageConnection, R: Runtime>(b: PoolBuilder<M, R>) -> PoolBuilder<M, R> {
            /// b.configure(|o| o.max_lifetime(Duration::from_secs(3600), 0.1).maintenance_interval(None))
            /// # }
            /// ```
            configure(self, f: impl FnOnce($crate::PoolOptionsBuilder) -> $crate::PoolOptionsBuilder) {
                self.settings.options = f(self.settings.options);
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// Takes the pool options (`maxPoolSize`, `minPoolSize`,
            /// `maxConnecting`, `maxIdleTimeMS`, `waitQueueTimeoutMS`, names
            /// case-insensitive) from a MongoDB connection string, as
            /// [`ConnectionString::parse`](crate::ConnectionString::parse)
            /// reads it, on top of this builder's defaults (so its
            /// wait-queue timeout stays 30 s unless the string sets
            /// `waitQueueTimeoutMS`).
            ///
            /// Fails [`build`](Self::build) with
            /// [`BuildError::Options`](crate::BuildError::Options): a string
            /// that is not a well-formed `mongodb://` or `mongodb+srv://` URI
            /// (`"db:27017"`, a `postgres://` URL, a password whose
            /// `@ : / ? %` are not percent-encoded), and a bad value
            /// (`maxPoolSize=-1`, or a number over the option's limit). The
            /// driver options the pool does not use (`appName`, `tls`, ...)
            /// are left alone; any other option is logged as a `tracing`
            /// warning naming the known option nearest to it
            /// (`maxPoolSizee` ... did you mean maxPoolSize?) and ignored:
            /// [`connection_string_strict`](Self::connection_string_strict)
            /// makes it an error. Neither the string nor any part of its
            /// password is ever logged or put in an error.
            ///
            /// A string that names one host gives the pool its address,
            /// unless [`address`](Self::address) gives one (before or
            /// after); with several hosts (a pool serves one server) or
            /// `mongodb+srv://`, the address comes from
            /// [`address`](Self::address) or the manager.
            ///
            /// ```
            /// # use cmap_async::{ManageConnection, PoolBuilder, Runtime};
            /// # fn f<M: ManageConnection, R: Runtime>(b: PoolBuilder<M, R>) -> PoolBuilder<M, R> {
            /// b.address("db:27017").connection_string("mongodb://db/?maxPoolSize=10&waitQueueTimeoutMS=500")
            /// # }
            /// ```
            connection_string(self, uri: &str) {
                self.settings.read_connection_string(uri, false);
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// [`connection_string`](Self::connection_string), with an
            /// unknown option an error
            /// ([`OptionsError::Unknown`](crate::OptionsError::Unknown))
            /// rather than a warning.
            connection_string_strict(self, uri: &str) {
                self.settings.read_connection_string(uri, true);
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// `maxPoolSize`: the most connections (0: no limit).
            max_pool_size(self, value: u32) {
                self.settings.options = self.settings.options.max_pool_size(value);
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// `minPoolSize`: connections kept open while the pool is ready.
            min_pool_size(self, value: u32) {
                self.settings.options = self.settings.options.min_pool_size(value);
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// `maxConnecting`: connections established at once.
            max_connecting(self, value: u32) {
                self.settings.options = self.settings.options.max_connecting(value);
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// An adaptive establishment pace instead of the fixed
            /// `maxConnecting` (`None`, the default): from `min` connections
            /// established at once, growing while connects succeed at their
            /// usual latency, back to `min` when one is refused with a
            /// backpressure label or slows down (see
            /// [`PoolOptionsBuilder::adaptive_connecting`](crate::PoolOptionsBuilder::adaptive_connecting)).
            adaptive_connecting(self, value: impl Into<Option<$crate::AdaptiveConnecting>>) {
                self.settings.options = self.settings.options.adaptive_connecting(value.into());
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// `maxIdleTimeMS`: how long a connection may stay unused
            /// (`None`: no limit).
            max_idle_time(self, value: impl Into<Option<::std::time::Duration>>) {
                self.settings.options = self.settings.options.max_idle_time(value.into());
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// `waitQueueTimeoutMS`: how long `get()` waits, 30 s unless set
            /// (`None`: no limit; `Duration::ZERO`: no wait, only an
            /// available connection).
            wait_queue_timeout(self, value: impl Into<Option<::std::time::Duration>>) {
                self.settings.options = self.settings.options.wait_queue_timeout(value.into());
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// The reconnect backoff after establishment failures (`None`: a
            /// cleared pool stays paused until
            /// [`Pool::ready`](crate::Pool::ready)).
            reconnect(self, value: Option<$crate::Reconnect>) {
                self.settings.options = self.settings.options.reconnect(value);
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// The longest `connect` may take (`None`: no limit); past it
            /// the establishment fails with
            /// [`ConnectTimeoutError`](crate::ConnectTimeoutError), a network
            /// timeout (labelled `SystemOverloadedError`).
            connect_timeout(self, value: impl Into<Option<::std::time::Duration>>) {
                self.settings.connect_timeout = value.into();
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// The longest
            /// [`reset`](crate::ManageConnection::reset) may take (`None`:
            /// no limit); past it the connection is closed (reason `error`)
            /// instead of pooled again.
            reset_timeout(self, value: impl Into<Option<::std::time::Duration>>) {
                self.settings.reset_timeout = value.into();
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// Keeps a flight recorder: the last `capacity` inputs of the
            /// pool's core and the outputs they caused (at least half as
            /// many), which `Pool::recording` returns and `spec-runner
            /// replay` re-executes exactly. 0 (the default): off. An entry
            /// takes 64 bytes (a check-in 112 more); the cost per checkout
            /// is in docs/benchmarks.md.
            ///
            /// ```
            /// # use cmap_async::{ManageConnection, PoolBuilder, Runtime};
            /// # fn f<M: ManageConnection, R: Runtime>(b: PoolBuilder<M, R>) -> PoolBuilder<M, R> {
            /// b.flight_recorder(100_000).flight_recorder_dir("/var/tmp")
            /// # }
            /// ```
            #[cfg(feature = "recorder")]
            flight_recorder(self, capacity: usize) {
                self.settings.flight.0 = capacity;
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// Where the flight recorder writes its recording when the pool
            /// finds its own state inconsistent (checked each time the
            /// recorder starts a new segment), as
            /// `cmap-<address>-<unix ms>.jsonl`. Unset, the incident is only
            /// logged at ERROR, and `Pool::recording` holds it.
            #[cfg(feature = "recorder")]
            flight_recorder_dir(self, dir: impl Into<::std::path::PathBuf>) {
                self.settings.flight.1 = Some(dir.into());
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// Leak detection (HikariCP's `leakDetectionThreshold`; off by
            /// default, and `None` or zero turns it off): a guard held
            /// longer than `value` is reported once, by a WARN message of
            /// target [`LOG_TARGET`](crate::LOG_TARGET) naming the
            /// connection, how long it has been held and where its `get()`
            /// was called, and counted in
            /// [`Stats::leaks_detected`](crate::Stats::leaks_detected); when
            /// it comes back, an INFO message says after how long.
            ///
            /// Off, it costs nothing per checkout. On, a checkout and its
            /// return each write one entry of a registry (under its own lock
            /// in a pool shared by threads), and one task per pool wakes at
            /// most once per threshold to look at it.
            ///
            /// ```
            /// # use std::time::Duration;
            /// # use cmap_async::{ManageConnection, PoolBuilder, Runtime};
            /// # fn configure<M: ManageConnection, R: Runtime>(b: PoolBuilder<M, R>) -> PoolBuilder<M, R> {
            /// b.leak_detection_threshold(Duration::from_secs(30))
            /// # }
            /// ```
            leak_detection_threshold(self, value: impl Into<Option<::std::time::Duration>>) {
                self.settings.leak_detection_threshold = value.into();
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// Exports the pool's metrics through the `metrics` facade
            /// (feature `metrics`; off by default): gauges of its connections
            /// and wait queue, counters of connections opened and closed and
            /// of checkouts and their failures, histograms of wait, use and
            /// connect times, all labelled with the pool's `address` and
            /// named `cmap_*` (the list is in the guide, section 7). Their
            /// handles come from the recorder current when
            /// [`build`](Self::build) runs: install the exporter's recorder
            /// first (or build inside `metrics::with_local_recorder`).
            ///
            /// It is fed by each checkout and check-in directly, not through
            /// events (the core queues a small measure where it emits the
            /// matching event, and the pool applies them once its lock is
            /// released); off, nothing of it exists.
            ///
            /// ```
            /// # use cmap_async::{ManageConnection, PoolBuilder, Runtime};
            /// # fn configure<M: ManageConnection, R: Runtime>(b: PoolBuilder<M, R>) -> PoolBuilder<M, R> {
            /// // metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?; first
            /// b.metrics(true)
            /// # }
            /// ```
            #[cfg(feature = "metrics")]
            metrics(self, value: bool) {
                self.settings.metrics = value;
            }
        }
        $crate::pool_builder_setters! { @emit $mode
            /// Leaves the pool paused once built, as the spec creates it,
            /// for a topology monitor to mark it ready with
            /// [`Pool::ready`](crate::Pool::ready).
            start_paused(self, value: bool) {
                self.settings.start_paused = value;
            }
        }
    };
    // The settings of the builders whose pools are shared between threads:
    // the callback is Send + Sync (cmap-local writes its own, without).
    (@threaded $mode:ident) => {
        $crate::pool_builder_setters! { @emit $mode
            /// Subscribes a callback before the pool exists, so it sees the
            /// `ConnectionPoolCreated` and `ConnectionPoolReady` events too.
            on_event(self, callback: impl Fn(&$crate::Event) + Send + Sync + 'static) {
                self.callbacks.push($crate::driver::subscriber(callback));
            }
        }
    };
    ($mode:ident) => {
        $crate::pool_builder_setters!(@common $mode);
        $crate::pool_builder_setters!(@threaded $mode);
    };
}
