//! [`RedisManager`] as a manager of cmap-local pools (feature `local`):
//! the same connections, check, reset and classification as for
//! cmap-tokio, for one pool per core on tokio's current-thread runtime
//! with a `LocalSet` (redis drives each socket in a task on that runtime).

use std::future::Future;
use std::time::Instant;

use cmap_local::EstablishErrorKind;
use redis::RedisError;

use crate::manager::{Async, Manager};
use crate::{Address, RedisConnection, RedisManager};

impl<const RESET: bool> cmap_local::ManageConnection for Manager<Async, RESET> {
    type Connection = RedisConnection;
    type Error = RedisError;
    const RESETS: bool = RESET;

    /// As for cmap-tokio: call it inside a tokio runtime (the pool's).
    fn connect(&self) -> impl Future<Output = Result<RedisConnection, RedisError>> {
        self.open()
    }

    fn classify(&self, error: &RedisError) -> EstablishErrorKind {
        crate::classify(error)
    }

    fn address(&self) -> Option<Address> {
        Some(RedisManager::address(self))
    }

    fn check(
        &self,
        conn: &mut RedisConnection,
        _deadline: Option<Instant>,
    ) -> impl Future<Output = Result<(), RedisError>> {
        self.check_conn(conn)
    }

    fn reset(&self, conn: &mut RedisConnection) -> impl Future<Output = Result<(), RedisError>> {
        self.reset_conn(conn)
    }

    fn is_broken(&self, conn: &mut RedisConnection) -> bool {
        Self::touch_and_test(conn)
    }
}
