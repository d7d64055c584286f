//! Building a synchronous pool: the async pool's builder, on
//! [`ThreadRuntime`], with the manager wrapped in [`SyncManager`].

use std::time::Duration;

use cmap_async::{
    AdaptiveConnecting, BuildError, Event, PoolOptions, PoolOptionsBuilder, Reconnect, ToAddress,
};

use crate::fork;
use crate::manager::{ManageConnection, SyncManager};
use crate::pool::Pool;
use crate::runtime::ThreadRuntime;

/// Builds a [`Pool`], with the defaults and settings of
/// [`cmap_async::PoolBuilder`] (each method here is the one there).
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

    /// The server's address, for events and logs: an
    /// [`Address`](crate::Address), `"host:port"`, or a socket address.
    /// Needed only when the manager does not know it
    /// ([`ManageConnection::address`](crate::ManageConnection::address));
    /// given, it overrides the manager's.
    pub fn address(self, address: impl ToAddress) -> Self {
        self.map(|b| b.address(address))
    }

    /// Whole options, used as they are.
    pub fn options(self, options: PoolOptions) -> Self {
        self.map(|b| b.options(options))
    }

    /// Sets any option through the core's builder.
    pub fn configure(self, f: impl FnOnce(PoolOptionsBuilder) -> PoolOptionsBuilder) -> Self {
        self.map(|b| b.configure(f))
    }

    /// Takes the pool options from a MongoDB connection string, failing
    /// `build` on one that is malformed and warning about unknown options
    /// ([`cmap_async::PoolBuilder::connection_string`]).
    pub fn connection_string(self, uri: &str) -> Self {
        self.map(|b| b.connection_string(uri))
    }

    /// [`connection_string`](Self::connection_string), with an unknown
    /// option an error rather than a warning
    /// ([`cmap_async::PoolBuilder::connection_string_strict`]).
    pub fn connection_string_strict(self, uri: &str) -> Self {
        self.map(|b| b.connection_string_strict(uri))
    }

    /// `maxPoolSize`: the most connections (0: no limit).
    pub fn max_pool_size(self, value: u32) -> Self {
        self.map(|b| b.max_pool_size(value))
    }

    /// `minPoolSize`: connections kept open while the pool is ready.
    pub fn min_pool_size(self, value: u32) -> Self {
        self.map(|b| b.min_pool_size(value))
    }

    /// `maxConnecting`: connections established at once.
    pub fn max_connecting(self, value: u32) -> Self {
        self.map(|b| b.max_connecting(value))
    }

    /// An adaptive establishment pace instead of the fixed `maxConnecting`
    /// (`None`, the default): see
    /// [`PoolOptionsBuilder::adaptive_connecting`](crate::PoolOptionsBuilder::adaptive_connecting).
    pub fn adaptive_connecting(self, value: impl Into<Option<AdaptiveConnecting>>) -> Self {
        let value = value.into();
        self.map(|b| b.adaptive_connecting(value))
    }

    /// `maxIdleTimeMS`: how long a connection may stay unused.
    pub fn max_idle_time(self, value: Duration) -> Self {
        self.map(|b| b.max_idle_time(value))
    }

    /// `waitQueueTimeoutMS`: how long `get()` blocks.
    pub fn wait_queue_timeout(self, value: Duration) -> Self {
        self.map(|b| b.wait_queue_timeout(value))
    }

    /// The reconnect backoff after establishment failures.
    pub fn reconnect(self, value: Option<Reconnect>) -> Self {
        self.map(|b| b.reconnect(value))
    }

    /// The longest `connect` may take (`None`: no limit); past it the
    /// checkout fails with [`ConnectTimeoutError`](crate::ConnectTimeoutError).
    pub fn connect_timeout(self, value: Option<Duration>) -> Self {
        self.map(|b| b.connect_timeout(value))
    }

    /// The longest `reset` may take (`None`: no limit); past it the
    /// connection is closed instead of pooled again.
    pub fn reset_timeout(self, value: Option<Duration>) -> Self {
        self.map(|b| b.reset_timeout(value))
    }

    /// Leak detection (off by default; `None` or zero turns it off): a
    /// guard held longer than `value` is reported once at WARN with the
    /// place its `get()` was called, and noted at INFO when it comes back.
    /// See [`cmap_async::PoolBuilder::leak_detection_threshold`].
    pub fn leak_detection_threshold(self, value: impl Into<Option<Duration>>) -> Self {
        let value = value.into();
        self.map(|b| b.leak_detection_threshold(value))
    }

    /// Exports the pool's metrics through the `metrics` facade (feature
    /// `metrics`): see [`cmap_async::PoolBuilder::metrics`].
    #[cfg(feature = "metrics")]
    pub fn metrics(self, value: bool) -> Self {
        self.map(|b| b.metrics(value))
    }

    /// Keeps a flight recorder of the last `capacity` inputs and outputs of
    /// the pool's core: see [`cmap_async::PoolBuilder::flight_recorder`].
    #[cfg(feature = "recorder")]
    pub fn flight_recorder(self, capacity: usize) -> Self {
        self.map(|b| b.flight_recorder(capacity))
    }

    /// Where an incident's recording is written: see
    /// [`cmap_async::PoolBuilder::flight_recorder_dir`].
    #[cfg(feature = "recorder")]
    pub fn flight_recorder_dir(self, dir: impl Into<std::path::PathBuf>) -> Self {
        let dir = dir.into();
        self.map(|b| b.flight_recorder_dir(dir))
    }

    /// Leaves the pool paused once built, for a monitor to mark it ready.
    pub fn start_paused(self, value: bool) -> Self {
        self.map(|b| b.start_paused(value))
    }

    /// Subscribes a callback before the pool exists, so it sees the
    /// `ConnectionPoolCreated` and `ConnectionPoolReady` events too.
    pub fn on_event(self, callback: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.map(|b| b.on_event(callback))
    }

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
