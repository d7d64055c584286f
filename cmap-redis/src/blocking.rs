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
use redis::{ConnectionLike, RedisError, Value};

use crate::manager::Manager;
pub use crate::manager::{Threads, DEFAULT_CONNECT_TIMEOUT};
use crate::Address;

/// Opens and looks after synchronous Redis connections for a
/// `cmap_blocking::Pool`: the [`Manager`] of the [`Threads`] runtime, with
/// the options of the async [`RedisManager`](crate::RedisManager) and a
/// connect timeout of its own (a synchronous connect cannot be abandoned
/// by the pool).
pub type RedisManager<const RESET: bool = false> = Manager<Threads, RESET>;

impl<const RESET: bool> Manager<Threads, RESET> {
    /// How long connecting may take (default [`DEFAULT_CONNECT_TIMEOUT`],
    /// 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
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

impl<const RESET: bool> ManageConnection for Manager<Threads, RESET> {
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
        if self.due_validation(conn.last_used) {
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
