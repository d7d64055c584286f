//! The synchronous manager: a [`redis::Connection`] per pooled
//! connection, for a `cmap_blocking::Pool`.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cmap_redis::redis::Commands;
//!
//! let manager = cmap_redis::blocking::RedisManager::new("redis://127.0.0.1/")?;
//! let pool = cmap_blocking::Pool::builder().address(manager.address()).max_pool_size(10).build(manager)?;
//! let mut conn = pool.get()?; // derefs to a redis::Connection
//! let () = conn.set("greeting", "hello")?;
//! assert_eq!(conn.get::<_, String>("greeting")?, "hello");
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use cmap_blocking::{EstablishErrorKind, ManageConnection};
use redis::{Client, Cmd, ConnectionLike, IntoConnectionInfo, RedisError, RedisResult, Value};

use crate::Address;

/// Opens and looks after synchronous Redis connections for a
/// `cmap_blocking::Pool`: the options of the async
/// [`RedisManager`](crate::RedisManager), with a connect timeout of its own
/// (a synchronous connect cannot be abandoned by the pool).
pub struct RedisManager<const RESET: bool = false> {
    client: Client,
    connect_timeout: Duration,
    validate_idle_after: Option<Duration>,
    reset: Vec<Cmd>,
}

impl<const RESET: bool> fmt::Debug for RedisManager<RESET> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisManager")
            .field("address", &self.address())
            .field("connect_timeout", &self.connect_timeout)
            .field("validate_idle_after", &self.validate_idle_after)
            .field("reset_commands", &self.reset.len())
            .finish_non_exhaustive()
    }
}

/// The default [`RedisManager::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl RedisManager {
    /// A manager for `info`: a `redis://` (or `rediss://`, `unix://`) URL, or
    /// a [`redis::ConnectionInfo`].
    ///
    /// # Errors
    ///
    /// A URL redis cannot read.
    pub fn new(info: impl IntoConnectionInfo) -> RedisResult<RedisManager> {
        Ok(RedisManager::from_client(Client::open(info)?))
    }

    /// A manager opening its connections with `client`.
    pub fn from_client(client: Client) -> RedisManager {
        RedisManager {
            client,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            validate_idle_after: None,
            reset: Vec::new(),
        }
    }
}

impl<const RESET: bool> RedisManager<RESET> {
    /// The client it connects with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The server's address for the pool's builder, from the URL.
    pub fn address(&self) -> Address {
        crate::address_of(self.client.get_connection_info())
    }

    /// How long connecting may take (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sends a `PING` before handing out a connection idle in the pool for
    /// at least `idle` (default: never; `Duration::ZERO`: on every
    /// checkout).
    pub fn validate_idle_after(mut self, idle: Duration) -> Self {
        self.validate_idle_after = Some(idle);
        self
    }

    /// Adds a command run on every check-in, in the order given, such as
    /// `redis::cmd("UNWATCH")`. A failure closes the connection.
    pub fn reset_with(self, command: Cmd) -> RedisManager<true> {
        let mut reset = self.reset;
        reset.push(command);
        RedisManager {
            client: self.client,
            connect_timeout: self.connect_timeout,
            validate_idle_after: self.validate_idle_after,
            reset,
        }
    }
}

/// A pooled synchronous Redis connection; derefs to [`redis::Connection`].
/// A connection whose socket failed (`is_open` false) is closed when it
/// comes back to the pool.
pub struct RedisConnection {
    conn: redis::Connection,
    last_used: Instant,
}

impl fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConnection")
            .field("open", &self.conn.is_open())
            .finish_non_exhaustive()
    }
}

impl Deref for RedisConnection {
    type Target = redis::Connection;
    fn deref(&self) -> &redis::Connection {
        &self.conn
    }
}

impl DerefMut for RedisConnection {
    fn deref_mut(&mut self) -> &mut redis::Connection {
        &mut self.conn
    }
}

impl<const RESET: bool> ManageConnection for RedisManager<RESET> {
    type Connection = RedisConnection;
    type Error = RedisError;
    const RESETS: bool = RESET;

    fn connect(&self) -> Result<RedisConnection, RedisError> {
        let conn = self.client.get_connection_with_timeout(self.connect_timeout)?;
        Ok(RedisConnection {
            conn,
            last_used: Instant::now(),
        })
    }

    /// [`crate::classify`].
    fn classify(&self, error: &RedisError) -> EstablishErrorKind {
        crate::classify(error)
    }

    fn address(&self) -> Option<Address> {
        Some(Self::address(self))
    }

    fn check(&self, conn: &mut RedisConnection) -> Result<(), RedisError> {
        if !conn.conn.is_open() {
            return Err(
                std::io::Error::new(std::io::ErrorKind::NotConnected, "the connection is closed").into(),
            );
        }
        if self
            .validate_idle_after
            .is_some_and(|idle| conn.last_used.elapsed() >= idle)
        {
            redis::cmd("PING").query::<String>(&mut conn.conn)?;
        }
        Ok(())
    }

    fn reset(&self, conn: &mut RedisConnection) -> Result<(), RedisError> {
        for command in &self.reset {
            command.query::<Value>(&mut conn.conn)?;
        }
        Ok(())
    }

    fn is_broken(&self, conn: &mut RedisConnection) -> bool {
        conn.last_used = Instant::now();
        !conn.conn.is_open()
    }
}
