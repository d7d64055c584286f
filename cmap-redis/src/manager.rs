//! The manager's user-facing shape, written once for every runtime:
//! [`Manager<R, RESET>`], named [`RedisManager`](crate::RedisManager) for
//! async pools (cmap-tokio, cmap-async-std, cmap-local) and
//! [`blocking::RedisManager`](crate::blocking::RedisManager) on threads
//! (cmap-blocking). How a connection is opened, checked and reset is the
//! runtime's (`aio_manager.rs`, `local_manager.rs`, `blocking.rs`).

use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use redis::{Client, Cmd, IntoConnectionInfo, RedisResult};

use crate::Address;

/// The kind of connection a [`Manager`] opens: [`Async`] (a
/// `MultiplexedConnection`) or [`Threads`] (a synchronous
/// `redis::Connection`). Sealed.
pub trait Runtime: sealed::Sealed + Send + Sync + 'static {}

/// redis's multiplexed async connection, driven on tokio or on the
/// async-io stack (the features `tokio`, `smol`, `async-std` choose), for a
/// `cmap_tokio::Pool`, a `cmap_async_std::Pool` or (feature `local`) a
/// `cmap_local::Pool`.
#[cfg(feature = "aio")]
#[derive(Debug)]
pub enum Async {}

/// redis's synchronous connection, for a `cmap_blocking::Pool` (feature
/// `blocking`).
#[cfg(feature = "blocking")]
#[derive(Debug)]
pub enum Threads {}

#[cfg(feature = "aio")]
impl Runtime for Async {}

#[cfg(feature = "blocking")]
impl Runtime for Threads {}

mod sealed {
    pub trait Sealed {}
    #[cfg(feature = "aio")]
    impl Sealed for super::Async {}
    #[cfg(feature = "blocking")]
    impl Sealed for super::Threads {}
}

/// The default connect timeout of a [`Threads`] manager
/// ([`connect_timeout`](Manager::connect_timeout)).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens and looks after Redis connections. Use it as
/// [`RedisManager`](crate::RedisManager) (async) or
/// [`blocking::RedisManager`](crate::blocking::RedisManager) (threads).
///
/// `RESET` says whether a reset runs on check-in: `false` (the default)
/// until [`reset_with`](Self::reset_with) gives it a command, so that a
/// manager with no reset costs the pool no reset at all.
///
/// ```no_run
/// # fn main() -> redis::RedisResult<()> {
/// use std::time::Duration;
/// # #[cfg(feature = "aio")]
/// let manager = cmap_redis::RedisManager::new("redis://127.0.0.1/")?
///     .validate_idle_after(Duration::from_secs(30))
///     .reset_with(redis::cmd("UNWATCH"));
/// # Ok(())
/// # }
/// ```
pub struct Manager<R: Runtime, const RESET: bool = false> {
    pub(crate) client: Client,
    /// Only a [`Threads`] manager's: an async connect is bounded by the
    /// pool's own connect timeout, which can abandon it.
    pub(crate) connect_timeout: Duration,
    pub(crate) validate_idle_after: Option<Duration>,
    pub(crate) reset: Vec<Cmd>,
    _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime, const RESET: bool> fmt::Debug for Manager<R, RESET> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The address only: the connection info holds the password.
        f.debug_struct("RedisManager")
            .field("address", &self.address())
            .field("validate_idle_after", &self.validate_idle_after)
            .field("reset_commands", &self.reset.len())
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Manager<R> {
    /// A manager for `info`: a `redis://` (or `rediss://`, `unix://`) URL, or
    /// a [`redis::ConnectionInfo`].
    ///
    /// # Errors
    ///
    /// A URL redis cannot read.
    pub fn new(info: impl IntoConnectionInfo) -> RedisResult<Self> {
        Ok(Self::from_client(Client::open(info)?))
    }

    /// A manager opening its connections with `client`.
    pub fn from_client(client: Client) -> Self {
        Manager {
            client,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            validate_idle_after: None,
            reset: Vec::new(),
            _runtime: PhantomData,
        }
    }
}

impl<R: Runtime, const RESET: bool> Manager<R, RESET> {
    /// The client it connects with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The server's address for the pool's builder, from the URL.
    pub fn address(&self) -> Address {
        crate::address_of(self.client.get_connection_info())
    }

    /// Sends a `PING` before handing out a connection idle in the pool for
    /// at least `idle` (default: never; `Duration::ZERO`: on every
    /// checkout). A connection that fails it is closed and the checkout
    /// takes another.
    pub fn validate_idle_after(mut self, idle: Duration) -> Self {
        self.validate_idle_after = Some(idle);
        self
    }

    /// Adds a command run on every check-in, in the order given, such as
    /// `redis::cmd("UNWATCH")` (drops the `WATCH`es a transaction left) or
    /// `redis::cmd("RESET")` (see the crate documentation). A failure
    /// closes the connection.
    pub fn reset_with(self, command: Cmd) -> Manager<R, true> {
        let mut reset = self.reset;
        reset.push(command);
        Manager {
            client: self.client,
            connect_timeout: self.connect_timeout,
            validate_idle_after: self.validate_idle_after,
            reset,
            _runtime: PhantomData,
        }
    }

    /// Whether a connection idle since `last_used` is due a `PING`.
    pub(crate) fn due_validation(&self, last_used: Instant) -> bool {
        self.validate_idle_after
            .is_some_and(|idle| last_used.elapsed() >= idle)
    }
}
