//! Building a pool: address, options (typed, from a connection string, or
//! whole), runtime and the adapter's own settings.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cmap_core::{Address, Event, OptionsError, PoolOptions, PoolOptionsBuilder, Reconnect};

use crate::error::BuildError;
use crate::events::EventHub;
use crate::manager::ManageConnection;
use crate::pool::Pool;
use crate::runtime::Runtime;
use crate::shared::Shared;
use crate::shared::Timeouts;
use crate::timer;

/// The connect timeout when none is set: the MongoDB default
/// `connectTimeoutMS` (10 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a manager's [`reset`](crate::ManageConnection::reset) may
/// take by default (10 s, as `connectTimeoutMS`): past it the connection
/// is closed, so a server that stopped answering holds no slot.
pub const DEFAULT_RESET_TIMEOUT: Duration = Duration::from_secs(10);

/// The wait-queue timeout of a pool built without explicit
/// [`PoolOptions`]: 30 s, as HikariCP, psycopg_pool, bb8, r2d2 and sqlx
/// wait. (The spec's default, and a connection string's
/// `waitQueueTimeoutMS=0`, is no limit: a request on a saturated pool
/// would hang forever.)
pub const DEFAULT_WAIT_QUEUE_TIMEOUT: Duration = Duration::from_secs(30);

/// The reconnect backoff of a pool built without explicit
/// [`PoolOptions`]: 100 ms doubling up to 10 s for `minPoolSize`, at
/// most 10 ms between attempts while checkouts wait (so that they are
/// served within about 10 ms of the server's return), and never giving
/// up, because a pool without a topology monitor has nobody else to mark
/// it ready again once the server is back.
///
/// ```
/// let r = cmap_async::default_reconnect();
/// assert_eq!(r.give_up_after, None);
/// ```
pub fn default_reconnect() -> Reconnect {
    Reconnect {
        give_up_after: None,
        ..Reconnect::default()
    }
}

/// Anything that names the server: an [`Address`], `"host:port"`, or a
/// socket address.
///
/// ```
/// use cmap_async::{Address, ToAddress};
/// assert_eq!("db:5432".to_address().unwrap(), Address::new("db", 5432));
/// let local: std::net::SocketAddr = "127.0.0.1:27017".parse().unwrap();
/// assert_eq!(local.to_address().unwrap().to_string(), "127.0.0.1:27017");
/// assert!("db:port".to_address().is_err());
/// ```
pub trait ToAddress {
    /// The address, or why it is not one.
    fn to_address(self) -> Result<Address, BuildError>;
}

impl ToAddress for Address {
    fn to_address(self) -> Result<Address, BuildError> {
        Ok(self)
    }
}

impl ToAddress for &Address {
    fn to_address(self) -> Result<Address, BuildError> {
        Ok(self.clone())
    }
}

impl ToAddress for &str {
    fn to_address(self) -> Result<Address, BuildError> {
        self.parse()
            .map_err(|e: std::num::ParseIntError| BuildError::Address {
                given: self.to_owned(),
                reason: format!("bad port: {e}"),
            })
    }
}

impl ToAddress for String {
    fn to_address(self) -> Result<Address, BuildError> {
        self.as_str().to_address()
    }
}

impl ToAddress for SocketAddr {
    fn to_address(self) -> Result<Address, BuildError> {
        Ok(Address::new(self.ip().to_string(), self.port()))
    }
}

type Callback = Arc<dyn Fn(&Event) + Send + Sync>;

/// Builds a [`Pool`].
///
/// Defaults: the core's options (the spec's: maxPoolSize 100, minPoolSize
/// 0, maxConnecting 2, no idle limit; a background run every second) with
/// what a pool used without a topology monitor needs:
///
/// - a [`DEFAULT_WAIT_QUEUE_TIMEOUT`] of 30 s (the spec's default is no
///   limit);
/// - a reconnect backoff ([`default_reconnect`]), so that a pool cleared
///   by a failed connect marks itself ready again;
/// - checkouts that keep waiting through a network failure
///   ([`PoolOptionsBuilder::keep_waiting_on_overload`]): a server down for
///   less than the wait timeout fails no checkout;
/// - a [`DEFAULT_CONNECT_TIMEOUT`] (an establishment is also abandoned
///   when the checkout that asked for it times out and nobody else needs
///   it);
/// - a random jitter seed for each pool, unless one is set;
/// - the pool marked ready once built.
///
/// Whole [`PoolOptions`] given with [`options`](Self::options) are used as
/// they are (a random seed is still drawn if they set none).
///
/// In this API `None` means no limit and `Duration::ZERO` means do not
/// wait, for every timeout.
///
/// # Example
///
/// ```
/// # use cmap_async::{BuildError, ManageConnection, Pool, Runtime};
/// # use std::time::Duration;
/// fn build<M: ManageConnection, R: Runtime + Default>(manager: M) -> Result<Pool<M, R>, BuildError> {
///     Pool::builder()
///         .address("db.example:27017")
///         .max_pool_size(10)
///         .wait_queue_timeout(Duration::from_secs(2))
///         .build(manager)
/// }
/// ```
#[must_use = "a builder does nothing until `build`"]
pub struct PoolBuilder<M, R> {
    address: Option<Result<Address, BuildError>>,
    options: PoolOptionsBuilder,
    given: Option<PoolOptions>,
    option_error: Option<OptionsError>,
    start_paused: bool,
    connect_timeout: Option<Duration>,
    reset_timeout: Option<Duration>,
    callbacks: Vec<Callback>,
    _types: PhantomData<fn() -> (M, R)>,
}

impl<M: ManageConnection, R: Runtime> Default for PoolBuilder<M, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: ManageConnection, R: Runtime> PoolBuilder<M, R> {
    /// A builder with the defaults above.
    pub fn new() -> Self {
        PoolBuilder {
            address: None,
            options: PoolOptions::builder()
                .reconnect(Some(default_reconnect()))
                .wait_queue_timeout(DEFAULT_WAIT_QUEUE_TIMEOUT)
                .keep_waiting_on_overload(true),
            given: None,
            option_error: None,
            start_paused: false,
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            reset_timeout: Some(DEFAULT_RESET_TIMEOUT),
            callbacks: Vec::new(),
            _types: PhantomData,
        }
    }

    /// The server's address, for events and logs (`serverHost`,
    /// `serverPort`): an [`Address`], `"host:port"`, or a [`SocketAddr`].
    /// Needed only when the manager does not know it
    /// ([`ManageConnection::address`](crate::ManageConnection::address));
    /// given, it overrides the manager's. The manager decides where it
    /// really connects.
    pub fn address(mut self, address: impl ToAddress) -> Self {
        self.address = Some(address.to_address());
        self
    }

    /// Whole options, used as they are: the settings below and the
    /// defaults of this builder no longer apply to options.
    pub fn options(mut self, options: PoolOptions) -> Self {
        self.given = Some(options);
        self
    }

    /// Sets any option through the core's builder, starting from this
    /// builder's defaults.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, PoolBuilder, Runtime};
    /// # use std::time::Duration;
    /// # fn f<M: ManageConnection, R: Runtime>(b: PoolBuilder<M, R>) -> PoolBuilder<M, R> {
    /// b.configure(|o| o.max_lifetime(Duration::from_secs(3600), 0.1).maintenance_interval(None))
    /// # }
    /// ```
    pub fn configure(mut self, f: impl FnOnce(PoolOptionsBuilder) -> PoolOptionsBuilder) -> Self {
        self.options = f(self.options);
        self
    }

    /// Takes the pool options (`maxPoolSize`, `minPoolSize`,
    /// `maxConnecting`, `maxIdleTimeMS`, `waitQueueTimeoutMS`, names
    /// case-insensitive) from a MongoDB connection string's query, as
    /// [`PoolOptions::from_connection_string`] reads them, on top of this
    /// builder's defaults. Other query options are left alone; a bad value
    /// fails [`build`](Self::build). The string itself is never logged.
    ///
    /// ```
    /// # use cmap_async::{ManageConnection, PoolBuilder, Runtime};
    /// # fn f<M: ManageConnection, R: Runtime>(b: PoolBuilder<M, R>) -> PoolBuilder<M, R> {
    /// b.address("db:27017").connection_string("mongodb://db/?maxPoolSize=10&waitQueueTimeoutMS=500")
    /// # }
    /// ```
    pub fn connection_string(mut self, uri: &str) -> Self {
        let query = uri.split_once('?').map_or("", |(_, query)| query);
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if let Err(e) = self.options.set(key, value) {
                self.option_error.get_or_insert(e);
            }
        }
        self
    }

    /// `maxPoolSize`: the most connections (0: no limit).
    pub fn max_pool_size(self, value: u32) -> Self {
        self.configure(|o| o.max_pool_size(value))
    }

    /// `minPoolSize`: connections kept open while the pool is ready.
    pub fn min_pool_size(self, value: u32) -> Self {
        self.configure(|o| o.min_pool_size(value))
    }

    /// `maxConnecting`: connections established at once.
    pub fn max_connecting(self, value: u32) -> Self {
        self.configure(|o| o.max_connecting(value))
    }

    /// `maxIdleTimeMS`: how long a connection may stay unused (`None`: no
    /// limit).
    pub fn max_idle_time(self, value: impl Into<Option<Duration>>) -> Self {
        let value = value.into();
        self.configure(|o| o.max_idle_time(value))
    }

    /// `waitQueueTimeoutMS`: how long `get()` waits, 30 s unless set
    /// (`None`: no limit; `Duration::ZERO`: no wait, only an available
    /// connection).
    pub fn wait_queue_timeout(self, value: impl Into<Option<Duration>>) -> Self {
        let value = value.into();
        self.configure(|o| o.wait_queue_timeout(value))
    }

    /// The reconnect backoff after establishment failures (`None`: a
    /// cleared pool stays paused until [`Pool::ready`]).
    pub fn reconnect(self, value: Option<Reconnect>) -> Self {
        self.configure(|o| o.reconnect(value))
    }

    /// The longest `connect` may take (`None`: no limit); past it the
    /// establishment fails with [`ConnectTimeoutError`](crate::ConnectTimeoutError),
    /// a network timeout (labelled `SystemOverloadedError`).
    pub fn connect_timeout(mut self, value: impl Into<Option<Duration>>) -> Self {
        self.connect_timeout = value.into();
        self
    }

    /// The longest [`reset`](crate::ManageConnection::reset) may take
    /// (`None`: no limit); past it the connection is closed (reason
    /// `error`) instead of pooled again.
    pub fn reset_timeout(mut self, value: impl Into<Option<Duration>>) -> Self {
        self.reset_timeout = value.into();
        self
    }

    /// Leaves the pool paused once built, as the spec creates it, for a
    /// topology monitor to mark it ready with [`Pool::ready`].
    pub fn start_paused(mut self, value: bool) -> Self {
        self.start_paused = value;
        self
    }

    /// Subscribes a callback before the pool exists, so it sees the
    /// `ConnectionPoolCreated` and `ConnectionPoolReady` events too.
    pub fn on_event(mut self, callback: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.callbacks.push(Arc::new(callback));
        self
    }

    /// Builds the pool on `R::default()` (for tokio: the current runtime)
    /// and starts its background task.
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

    /// Builds the pool on the runtime `rt` and starts its background task.
    ///
    /// ```
    /// # use cmap_async::{BuildError, ManageConnection, Pool, Runtime};
    /// fn build<M: ManageConnection, R: Runtime>(manager: M, rt: R) -> Result<Pool<M, R>, BuildError> {
    ///     Pool::builder().address("db:27017").start_paused(true).build_on(manager, rt)
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// No address, a bad address, or invalid options.
    pub fn build_on(self, manager: M, rt: R) -> Result<Pool<M, R>, BuildError> {
        let address = match self.address {
            Some(given) => given?,
            None => manager.address().ok_or(BuildError::MissingAddress)?,
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
        let hub = Arc::new(EventHub::default());
        for callback in self.callbacks {
            // Dropping the handle keeps the callback.
            let _ = hub.on_event(callback);
        }
        hub.refresh();
        // Spec: the pool is created paused and emits ConnectionPoolCreated.
        let core = cmap_core::Pool::new(rt.now(), address.clone(), options.clone());
        let timeouts = Timeouts {
            connect: self.connect_timeout,
            reset: self.reset_timeout,
        };
        let shared = Shared::new(manager, rt, address, options, timeouts, core, hub);
        let start_paused = self.start_paused;
        shared.input(|inner, now| {
            if !start_paused {
                // A new pool is not closed: this cannot fail.
                let _ = inner.core.handle_ready(now);
            }
        });
        shared.rt.spawn(timer::run(Arc::downgrade(&shared), 0));
        Ok(Pool::from_shared(shared))
    }
}
