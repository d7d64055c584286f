//! [`PgClient`]: what the checks need of a runtime's PostgreSQL manager
//! and client, and its three implementations: `tokio-postgres` on tokio,
//! the same off tokio ([`OnTokio`]), and the synchronous `postgres` crate
//! on threads.

use std::future::Future;

use cmap_async::ManageConnection;
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
