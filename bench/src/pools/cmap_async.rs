//! What cmap-tokio and cmap-async-std share here: both are `cmap_async::Pool`
//! on another runtime, so their manager, their options and their checkout
//! are written once, and each runtime's module adds only how it is built.
//! The options are what a fair comparison needs: `maxPoolSize` M, a long
//! wait-queue timeout, no event subscriber (so no event is built) and no
//! `tracing` subscriber (so logging is off).

use std::future::Future;

use cmap_async::{ManageConnection, Pool, PoolBuilder, PooledConnection, Runtime};

use super::{Conn, Connector, Never, Setup, WAIT_TIMEOUT};

pub struct Manager(Connector);

impl ManageConnection for Manager {
    type Connection = Conn;
    type Error = Never;

    fn classify(&self, never: &Never) -> cmap_async::EstablishErrorKind {
        let _ = never;
        cmap_async::EstablishErrorKind::Other
    }
    // The default `reset` (none): returns skip it, as the other pools' do.
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Conn, Never>> + Send {
        let connect = self.0.connect();
        async move { Ok(connect.await) }
    }
}

/// The benchmark's options on a fresh builder, and the manager to build with.
pub fn configured<R: Runtime>(setup: &Setup) -> (PoolBuilder<Manager, R>, Manager) {
    let builder = Pool::builder()
        .address("bench.invalid:27017")
        .max_pool_size(setup.max)
        .min_pool_size(setup.min)
        .wait_queue_timeout(WAIT_TIMEOUT);
    (builder, Manager(setup.connector.clone()))
}

/// A checkout, its error as text (the harness counts failures).
pub fn get<R: Runtime>(
    pool: &Pool<Manager, R>,
) -> impl Future<Output = Result<PooledConnection<'_, Manager>, String>> + Send {
    let get = pool.get();
    async move { get.await.map_err(|e| e.to_string()) }
}
