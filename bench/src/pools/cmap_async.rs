//! What cmap-tokio and cmap-async-std share here: both are `cmap_async::Pool`
//! on another runtime, so their manager, their options and their checkout
//! are written once, and each runtime's module adds only how it is built.
//! The options are what a fair comparison needs: `maxPoolSize` M, a long
//! wait-queue timeout, no event subscriber (so no event is built) and no
//! `tracing` subscriber (so logging is off).

use std::future::Future;

use cmap_async::{ManageConnection, Pool, PoolBuilder, PooledConnection, Runtime};

use super::{Conn, Connector, Never, Setup, WAIT_TIMEOUT};

/// The manager of both async cmap pools. It keeps the trait's default
/// `check` and `reset` (which do nothing) and says so, as the docs advise:
/// `CHECKS` and `RESETS` are `false`, so checkouts and returns skip them,
/// as the other pools skip theirs. `bench instructions` measures what the
/// trait's defaults (`true`) cost when the hooks do nothing:
/// `cmap-tokio+checks` and `cmap-tokio+resets`.
pub struct Manager<const RESETS: bool = false, const CHECKS: bool = false>(Connector);

impl<const R: bool, const C: bool> ManageConnection for Manager<R, C> {
    type Connection = Conn;
    type Error = Never;

    fn classify(&self, never: &Never) -> cmap_async::EstablishErrorKind {
        let _ = never;
        cmap_async::EstablishErrorKind::Other
    }
    const RESETS: bool = R;
    const CHECKS: bool = C;

    fn connect(&self) -> impl Future<Output = Result<Conn, Never>> + Send {
        let connect = self.0.connect();
        async move { Ok(connect.await) }
    }
}

/// The benchmark's options on a fresh builder, and the manager to build with.
pub fn configured<R: Runtime, const RS: bool, const CS: bool>(
    setup: &Setup,
) -> (PoolBuilder<Manager<RS, CS>, R>, Manager<RS, CS>) {
    let builder = Pool::builder()
        .address("bench.invalid:27017")
        .max_pool_size(setup.max)
        .min_pool_size(setup.min)
        .wait_queue_timeout(WAIT_TIMEOUT);
    (builder, Manager(setup.connector.clone()))
}

/// A checkout, its error as text (the harness counts failures). An `async
/// fn`, as deadpool's and bb8's wrappers are: the checkout's future is made
/// inside this one. Made outside and moved in (as this wrapper did until
/// `bench instructions` showed it), it was copied for nothing: one more
/// `memcpy` per cycle, 84 instructions under callgrind.
pub async fn get<R: Runtime, const RS: bool, const CS: bool>(
    pool: &Pool<Manager<RS, CS>, R>,
) -> Result<PooledConnection<'_, Manager<RS, CS>>, String> {
    pool.get().await.map_err(|e| e.to_string())
}
