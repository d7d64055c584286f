//! cmap-blocking: the same options as cmap-tokio (`maxPoolSize` M, a long
//! wait-queue timeout, no event subscriber, logging off), used from OS
//! threads.

use cmap_blocking::{ManageConnection, Pool, PooledConnection};

use super::{BlockingPool, Conn, Connector, Never, Setup, WAIT_TIMEOUT};

pub struct Manager(Connector);

impl ManageConnection for Manager {
    type Connection = Conn;
    type Error = Never;

    fn classify(&self, never: &Never) -> cmap_blocking::EstablishErrorKind {
        let _ = never;
        cmap_blocking::EstablishErrorKind::Other
    }
    // The default `check` and `reset` (none): checkouts and returns skip
    // them, as the other pools skip theirs.
    const CHECKS: bool = false;
    const RESETS: bool = false;

    fn connect(&self) -> Result<Conn, Never> {
        Ok(self.0.connect_blocking())
    }
}

pub struct CmapBlocking(Pool<Manager>);

impl BlockingPool for CmapBlocking {
    const NAME: &'static str = "cmap-blocking";
    const NATIVE_MIN: bool = true;
    type Guard<'a> = PooledConnection<'a, Manager>;

    fn build(setup: &Setup) -> Self {
        let pool = Pool::builder()
            .address("bench.invalid:27017")
            .max_pool_size(setup.max)
            .min_pool_size(setup.min)
            .wait_queue_timeout(WAIT_TIMEOUT)
            .build(Manager(setup.connector.clone()))
            .expect("valid cmap-blocking options");
        CmapBlocking(pool)
    }

    fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().map_err(|e| e.to_string())
    }
}
