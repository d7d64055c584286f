//! [`PgClient`]: what the checks need of a runtime's PostgreSQL manager
//! and client, and its three implementations: `tokio-postgres` on tokio,
//! the same off tokio ([`OnTokio`]), and the synchronous `postgres` crate
//! on threads.

use std::future::Future;
use std::time::Duration;

use cmap_async::ManageConnection;
use cmap_blocking::SyncManager;
use cmap_postgres::tokio_postgres::types::ToSql;
use cmap_postgres::tokio_postgres::{Config, Error, Row};
use cmap_postgres::{NoTls, PgError};

use super::OnTokio;

/// A ready-made PostgreSQL manager of `cmap-postgres` as one runtime's
/// tests use it, and the few calls the checks make on its client.
pub trait PgClient: ManageConnection<Error = PgError> {
    /// Whether the client reads its socket while nobody uses it
    /// (`tokio-postgres`'s connection task does), and so learns on its own
    /// that the server ended an idle session.
    const READS_WHILE_IDLE: bool;

    /// The manager, connecting with `config`.
    fn with_config(config: Config) -> Self;

    /// The client's `query_one`.
    fn query_one<'a>(
        conn: &'a mut Self::Connection,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Row, Error>> + Send + 'a;

    /// The server process of the connection's session.
    fn backend_pid(conn: &Self::Connection) -> i32;

    /// Whether the client has seen its session end.
    fn is_closed(conn: &Self::Connection) -> bool;
}

/// `tokio-postgres` on tokio, with the manager's defaults: `is_closed` on
/// checkout, a rollback of an open transaction on check-in.
impl PgClient for cmap_postgres::PgManager {
    const READS_WHILE_IDLE: bool = true;

    fn with_config(config: Config) -> Self {
        cmap_postgres::PgManager::new(config, NoTls)
    }

    fn query_one<'a>(
        conn: &'a mut Self::Connection,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Row, Error>> + Send + 'a {
        conn.client().query_one(sql, params)
    }

    fn backend_pid(conn: &Self::Connection) -> i32 {
        conn.backend_pid()
    }

    fn is_closed(conn: &Self::Connection) -> bool {
        conn.is_closed()
    }
}

/// A tokio manager on another runtime: the same client, whose queries
/// need no reactor.
impl<M: PgClient> PgClient for OnTokio<M> {
    const READS_WHILE_IDLE: bool = M::READS_WHILE_IDLE;

    fn with_config(config: Config) -> Self {
        OnTokio(M::with_config(config))
    }

    fn query_one<'a>(
        conn: &'a mut Self::Connection,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Row, Error>> + Send + 'a {
        M::query_one(conn, sql, params)
    }

    fn backend_pid(conn: &Self::Connection) -> i32 {
        M::backend_pid(conn)
    }

    fn is_closed(conn: &Self::Connection) -> bool {
        M::is_closed(conn)
    }
}

/// The synchronous `postgres` crate, its manager as `cmap_blocking::Pool`
/// wraps it, validating on every checkout (a round trip: an empty query).
/// A synchronous client reads its socket only when it is used, so unlike
/// `tokio-postgres` it cannot learn meanwhile that the server ended the
/// session; asking costs about 50 µs on a local server. (Polling the
/// socket without a round trip, through `notifications().timeout_iter(0)`,
/// costs a millisecond: the tick of the client's private runtime.) r2d2's
/// `test_on_check_out`, on by default, does the same; the manager's own
/// default validates only connections idle 500 ms or more, as HikariCP.
impl PgClient for SyncManager<cmap_postgres::blocking::PgManager> {
    const READS_WHILE_IDLE: bool = false;

    fn with_config(config: Config) -> Self {
        SyncManager::new(
            cmap_postgres::blocking::PgManager::new(config.into(), NoTls).validate_idle_after(Duration::ZERO),
        )
    }

    /// Blocks the task's thread: each task of `ThreadRuntime` has one.
    async fn query_one<'a>(
        conn: &'a mut Self::Connection,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        conn.client().query_one(sql, params)
    }

    fn backend_pid(conn: &Self::Connection) -> i32 {
        conn.backend_pid()
    }

    fn is_closed(conn: &Self::Connection) -> bool {
        conn.is_closed()
    }
}
