//! The async manager: a multiplexed connection per pooled connection.

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::time::Instant;

use cmap_async::{EstablishErrorKind, ManageConnection};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};

pub use crate::manager::Async;
use crate::manager::Manager;
use crate::Address;

/// Opens and looks after Redis connections for a `cmap_tokio::Pool` or a
/// `cmap_async_std::Pool` (and, feature `local`, a `cmap_local::Pool`):
/// the [`Manager`] of the [`Async`] runtime, one [`MultiplexedConnection`]
/// (one socket) per pooled connection.
pub type RedisManager<const RESET: bool = false> = Manager<Async, RESET>;

/// A pooled Redis connection. Run commands on it directly
/// (`conn.get(..)` with [`redis::AsyncCommands`], `query_async(&mut *conn)`):
/// through it, a command failing with an error that needs a reconnect
/// marks it broken, and the pool closes it when it comes back instead of
/// reusing it. Its [`MultiplexedConnection`] is at hand through `Deref`
/// (commands sent that way are not watched).
pub struct RedisConnection {
    conn: MultiplexedConnection,
    last_used: Instant,
    broken: bool,
}

impl fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConnection")
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl RedisConnection {
    /// Whether a command on it failed with an error that needs a reconnect.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    fn note(&mut self, error: &RedisError) {
        if error.is_unrecoverable_error() {
            self.broken = true;
        }
    }
}

impl Deref for RedisConnection {
    type Target = MultiplexedConnection;
    fn deref(&self) -> &MultiplexedConnection {
        &self.conn
    }
}

impl DerefMut for RedisConnection {
    fn deref_mut(&mut self) -> &mut MultiplexedConnection {
        &mut self.conn
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let answer = self.conn.req_packed_command(cmd).await;
            if let Err(e) = &answer {
                self.note(e);
            }
            answer
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let answer = self.conn.req_packed_commands(cmd, offset, count).await;
            if let Err(e) = &answer {
                self.note(e);
            }
            answer
        })
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

impl<const RESET: bool> Manager<Async, RESET> {
    /// A new multiplexed connection: TCP, TLS, `AUTH`, `SELECT`, `HELLO`
    /// (its socket driven by a task on redis's runtime).
    pub(crate) async fn open(&self) -> Result<RedisConnection, RedisError> {
        let conn = self.client.get_multiplexed_async_connection().await?;
        Ok(RedisConnection {
            conn,
            last_used: Instant::now(),
            broken: false,
        })
    }

    /// The check of every pool: a connection marked broken is refused;
    /// with [`validate_idle_after`](RedisManager::validate_idle_after), one
    /// idle that long is sent a `PING`.
    pub(crate) fn check_conn<'a>(
        &self,
        conn: &'a mut RedisConnection,
    ) -> impl Future<Output = Result<(), RedisError>> + Send + 'a {
        let validate = self.due_validation(conn.last_used);
        async move {
            if conn.broken {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the connection failed a command and was marked broken",
                )
                .into());
            }
            if validate {
                redis::cmd("PING").query_async::<String>(conn).await?;
            }
            Ok(())
        }
    }

    /// The commands given to [`reset_with`](RedisManager::reset_with), in
    /// order.
    pub(crate) async fn reset_conn(&self, conn: &mut RedisConnection) -> Result<(), RedisError> {
        for command in &self.reset {
            command.query_async::<Value>(&mut *conn).await?;
        }
        Ok(())
    }

    /// Whether a command failed on it; notes when it was last used, for
    /// the validation threshold.
    pub(crate) fn touch_and_test(conn: &mut RedisConnection) -> bool {
        conn.last_used = Instant::now();
        conn.broken
    }
}

impl<const RESET: bool> ManageConnection for Manager<Async, RESET> {
    type Connection = RedisConnection;
    type Error = RedisError;
    const RESETS: bool = RESET;

    /// A new multiplexed connection: TCP, TLS, `AUTH`, `SELECT`, `HELLO`.
    async fn connect(&self) -> Result<RedisConnection, RedisError> {
        self.open().await
    }

    /// [`crate::classify`].
    fn classify(&self, error: &RedisError) -> EstablishErrorKind {
        crate::classify(error)
    }

    fn address(&self) -> Option<Address> {
        Some(Self::address(self))
    }

    /// A connection marked broken is refused; with
    /// [`validate_idle_after`](RedisManager::validate_idle_after), one idle
    /// that long is sent a `PING`.
    fn check(&self, conn: &mut RedisConnection) -> impl Future<Output = Result<(), RedisError>> + Send {
        self.check_conn(conn)
    }

    /// The commands given to [`reset_with`](RedisManager::reset_with), in
    /// order (never called for a manager without any).
    fn reset(&self, conn: &mut RedisConnection) -> impl Future<Output = Result<(), RedisError>> + Send {
        self.reset_conn(conn)
    }

    /// A connection a command failed on. Also notes when it was last used,
    /// for the validation threshold.
    fn is_broken(&self, conn: &mut RedisConnection) -> bool {
        Self::touch_and_test(conn)
    }
}
