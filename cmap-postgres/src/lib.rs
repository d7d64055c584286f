//! # cmap-postgres
//!
//! A ready-made PostgreSQL connection manager for the cmap pool: one
//! [`Manager`], generic over the runtime (the client library), with the
//! same options, checks and reset on each:
//!
//! - [`PgManager`] (feature `tokio`, on by default): `tokio-postgres`, for
//!   a [`cmap_tokio::Pool`] (and, with the feature `local`, a
//!   `cmap_local::Pool`), generic over any TLS connector
//!   ([`MakeTlsConnect`](tokio_postgres::tls::MakeTlsConnect), such as
//!   [`NoTls`]); each connection's socket is driven by a task spawned on
//!   tokio.
//! - [`blocking::PgManager`] (feature `blocking`): the synchronous
//!   `postgres` crate, for a [`cmap_blocking::Pool`].
//!
//! One line to a working pool:
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cmap_postgres::{tokio_postgres::NoTls, PgManager};
//! use cmap_tokio::Pool;
//!
//! let config: tokio_postgres::Config = "host=127.0.0.1 user=postgres dbname=test".parse()?;
//! let manager = PgManager::new(config, NoTls);
//! let pool = Pool::builder().address(manager.address()).max_pool_size(10).build(manager)?;
//!
//! let conn = pool.get().await?; // derefs to a tokio_postgres::Client
//! let row = conn.query_one("SELECT $1::int4 + 1", &[&41i32]).await?;
//! assert_eq!(row.get::<_, i32>(0), 42);
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "tokio"))]
//! # fn main() {}
//! ```
//!
//! What the managers do, and the options that change it:
//!
//! | hook | by default | option |
//! | --- | --- | --- |
//! | connect | TCP or Unix socket, TLS, startup and authentication, then learns the session's [`backend_pid`](PgConnection::backend_pid) | [`init_sql`](PgManager::init_sql) and [`configure`](PgManager::configure) run once per new connection (HikariCP's `connectionInitSql`, psycopg's `configure`) |
//! | check (checkout) | no round trip: a client whose socket closed is refused (`is_closed`) | [`validate_idle_after`](PgManager::validate_idle_after): a round trip for connections idle at least that long (HikariCP skips connections used within the last 500 ms) |
//! | reset (check-in) | [`Reset::Rollback`]: an open or failed transaction is rolled back | [`Reset::DiscardAll`] also runs `DISCARD ALL`; [`Reset::Nothing`] skips the reset |
//! | classify | SQLSTATE class 28 → authentication; 53300, 57P03 and I/O errors → network (overload: the pool keeps trying); anything else → other | - |
//!
//! ## Why the reset asks the server first
//!
//! psycopg's pool rolls back only a session that is in a transaction,
//! which it knows from the protocol (`ReadyForQuery`'s status byte).
//! `tokio-postgres` and `postgres` keep that byte to themselves, so the
//! state cannot be known without asking. A plain `ROLLBACK` on every
//! check-in would cost the same one round trip, but outside a transaction
//! the server answers it with the warning "there is no transaction in
//! progress", which is written to the server's log at the default
//! `log_min_messages`: one log line per check-in. So the reset asks,
//! in one simple-protocol round trip and without a warning, whether the
//! session is inside a transaction block (`now()`, the transaction's start,
//! differs from `statement_timestamp()` only there; the question must be
//! one simple-protocol message, since in the extended protocol Bind and
//! Execute each restart the statement's clock), and sends `ROLLBACK`
//! only when it is, or when the question itself fails because the
//! transaction has failed (SQLSTATE 25P02). A check-in costs that one round
//! trip; [`Reset::Nothing`] saves it for code that never leaves a
//! transaction open (the drivers' own `Transaction` rolls back when
//! dropped).
//!
//! ## The pool's address
//!
//! The pool's builder needs the server's address for its events and logs;
//! [`PgManager::address`] gives the first host and port of the
//! configuration (a Unix socket's path for a socket directory).

// The crate docs describe every manager, each behind its feature; built
// without one of them (docs.rs builds with all features, and so does
// `.ci/run`), their links have nothing to point to.
#![cfg_attr(
    not(all(feature = "tokio", feature = "blocking")),
    allow(rustdoc::broken_intra_doc_links)
)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(any(feature = "tokio", feature = "blocking")))]
compile_error!("cmap-postgres needs the `tokio` feature, the `blocking` feature, or both");

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
mod error;
#[cfg(feature = "local")]
mod local_manager;
mod manager;
#[cfg(feature = "tokio")]
mod tokio_manager;

use std::time::Duration;

#[cfg(all(feature = "blocking", not(feature = "tokio")))]
use cmap_blocking as cmap;
#[cfg(feature = "tokio")]
use cmap_tokio as cmap;

pub use cmap::Address;
pub use error::PgError;
#[cfg(feature = "blocking")]
pub use manager::Threads;
#[cfg(feature = "tokio")]
pub use manager::Tokio;
pub use manager::{Client, Connection, Manager, Runtime};
#[cfg(feature = "tokio")]
pub use tokio_manager::{ConfigureFuture, PgConnection, PgManager};

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub use postgres;
pub use tokio_postgres;
pub use tokio_postgres::NoTls;

/// What a connection's reset does when it is given back to the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Reset {
    /// Nothing: the connection goes back as it is. For code that never
    /// leaves a transaction open.
    Nothing,
    /// Roll back an open or failed transaction (one round trip to learn
    /// whether there is one, a second to roll it back; see the crate
    /// documentation). The default.
    #[default]
    Rollback,
    /// As [`Rollback`](Reset::Rollback), then `DISCARD ALL`: session
    /// settings, temporary tables, prepared statements, advisory locks and
    /// `LISTEN` registrations are dropped, as pgbouncer's `server_reset_query`
    /// does. Statements prepared through the client (`prepare`) no longer
    /// exist on the server afterwards: do not keep them across checkouts.
    /// The client's cache of types is cleared with them; its own statements
    /// for looking up user-defined types (enums, composites, domains) are
    /// not, so a query that meets such a type for the first time after a
    /// `DISCARD ALL` fails: use `Rollback` with user-defined types.
    DiscardAll,
}

/// The SQL of the transaction probe: true outside a transaction block.
const IN_NO_TRANSACTION: &str = "SELECT now() = statement_timestamp()";

/// The default [`validation_timeout`](PgManager::validation_timeout).
pub const DEFAULT_VALIDATION_TIMEOUT: Duration = Duration::from_secs(5);

/// The address the pool reports, from a configuration's first host and
/// port (libpq's defaults: `localhost`, 5432).
fn address_of(hosts: &[tokio_postgres::config::Host], ports: &[u16]) -> Address {
    let port = ports.first().copied().unwrap_or(5432);
    match hosts.first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => Address::new(host, port),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(dir)) => {
            Address::unix(dir.join(format!(".s.PGSQL.{port}")).to_string_lossy())
        }
        None => Address::new("localhost", port),
    }
}

/// The answer of [`IN_NO_TRANSACTION`]: whether the session is inside a
/// transaction block.
fn in_transaction(messages: &[tokio_postgres::SimpleQueryMessage]) -> bool {
    messages.iter().any(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0) == Some("f"),
        _ => false,
    })
}

/// The backend process id in the answer of `SELECT pg_backend_pid()`.
fn backend_pid_of(messages: &[tokio_postgres::SimpleQueryMessage]) -> Option<i32> {
    messages.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).and_then(|pid| pid.parse().ok()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_is_the_first_host_and_port() {
        let config: tokio_postgres::Config = "host=db1,db2 port=6543,6544".parse().unwrap();
        assert_eq!(
            address_of(config.get_hosts(), config.get_ports()),
            Address::new("db1", 6543)
        );
        let config = tokio_postgres::Config::new();
        assert_eq!(
            address_of(config.get_hosts(), config.get_ports()),
            Address::new("localhost", 5432)
        );
        #[cfg(unix)]
        {
            let config: tokio_postgres::Config = "host=/run/postgresql".parse().unwrap();
            assert_eq!(
                address_of(config.get_hosts(), config.get_ports()).to_string(),
                "/run/postgresql/.s.PGSQL.5432"
            );
        }
    }
}
