//! cmap-blocking as a driver of the conformance kit (`--adapter
//! blocking`): its synchronous `Pool`, each spec thread checking out on
//! its own OS thread, `get_owned_entered` telling the engine when the
//! checkout is queued or served. The simulated endpoint behind it is a
//! synchronous manager: the handshake decided when the attempt starts,
//! its delay slept on the connect's thread, then its outcome.

use std::sync::PoisonError;

use cmap_async::{ConnectionId, EstablishErrorKind, GetError, Status, UsageError};
use cmap_blocking::{ManageConnection, Pool, PooledConnection};

use crate::adapter::{SharedEndpoint, SimConnection};
use crate::driver::{Driver, DriverPool, PoolSpec};
use crate::endpoint::EndpointError;

/// cmap-blocking's pool on OS threads.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockingDriver;

/// The simulated endpoint as a synchronous manager.
pub struct BlockingSimManager {
    endpoint: SharedEndpoint,
}

impl ManageConnection for BlockingSimManager {
    type Connection = SimConnection;
    type Error = EndpointError;
    const CHECKS: bool = false;
    const RESETS: bool = false;

    // The handshake's `blockTimeMS`, for real: a real-time driver's point.
    #[allow(clippy::disallowed_methods)]
    fn connect(&self) -> Result<SimConnection, EndpointError> {
        let handshake = (self.endpoint.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .handshake();
        if !handshake.delay.is_zero() {
            std::thread::sleep(handshake.delay);
        }
        handshake.outcome.map(|()| SimConnection)
    }

    fn classify(&self, error: &EndpointError) -> EstablishErrorKind {
        error.kind()
    }
}

impl Driver for BlockingDriver {
    type Pool<'a> = BlockingPool;

    fn driver_name(&self) -> &'static str {
        "blocking"
    }

    fn build(&self, spec: PoolSpec) -> Result<BlockingPool, String> {
        let on_event = spec.on_event;
        Pool::builder()
            .address(spec.address)
            .options(spec.options)
            .start_paused(true)
            .connect_timeout(spec.connect_timeout)
            .on_event(move |event| on_event(event))
            .build(BlockingSimManager {
                endpoint: spec.endpoint,
            })
            .map(|pool| BlockingPool { pool })
            .map_err(|e| format!("cannot build the pool: {e}"))
    }
}

/// A cmap-blocking pool under test.
pub struct BlockingPool {
    pool: Pool<BlockingSimManager>,
}

impl DriverPool for BlockingPool {
    type Conn = PooledConnection<'static, BlockingSimManager>;

    fn check_out(&self, begun: &dyn Fn()) -> Result<(ConnectionId, Self::Conn), GetError> {
        let conn = self.pool.get_owned_entered(begun)?;
        Ok((conn.connection_id(), conn))
    }

    fn clear(&self, interrupt_in_use: bool) -> Result<(), UsageError> {
        self.pool.clear(interrupt_in_use)
    }

    fn ready(&self) -> Result<(), UsageError> {
        self.pool.ready()
    }

    fn close(&self) {
        self.pool.close();
    }

    fn status(&self) -> Status {
        self.pool.status()
    }
}
