//! # cmap-mysql
//!
//! A ready-made MySQL and MariaDB connection manager for the cmap pool:
//! one [`Manager`], generic over the runtime (the client library), with
//! the same options, checks and reset on each. Both are off by default
//! (each client is a large dependency); turn on the one you use:
//!
//! - [`MySqlManager`] (feature `tokio`): `mysql_async`, for a
//!   `cmap_tokio::Pool`.
//! - [`blocking::MySqlManager`] (feature `blocking`): the synchronous
//!   `mysql` crate, for a `cmap_blocking::Pool`.
//!
//! Both clients are built without TLS (their `default-features = false`,
//! `minimal-rust`); turn on their own TLS features in your manifest to
//! connect over TLS, and set it in the `Opts`.
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cmap_mysql::MySqlManager;
//! use mysql_async::prelude::Queryable;
//!
//! let opts = mysql_async::Opts::from_url("mysql://cmap:cmap-secret@127.0.0.1:3306/test")?;
//! let manager = MySqlManager::new(opts);
//! let pool = cmap_tokio::Pool::builder().address(manager.address()).max_pool_size(10).build(manager)?;
//!
//! let mut conn = pool.get().await?; // derefs to a mysql_async::Conn
//! let answer: Option<i32> = conn.query_first("SELECT 41 + 1").await?;
//! assert_eq!(answer, Some(42));
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
//! | connect | TCP, handshake, authentication, the `Opts`' own `init` statements; learns the session's [`thread_id`](Connection::thread_id) | the client's `OptsBuilder::init` (statements run once per new session) |
//! | check (checkout) | a `COM_PING` for connections idle at least 500 ms (HikariCP's threshold) | [`validate_idle_after`](Manager::validate_idle_after), [`no_validation`](Manager::no_validation) |
//! | reset (check-in) | [`Reset::Rollback`]: `ROLLBACK` | [`Reset::ResetConnection`] (`COM_RESET_CONNECTION`: all session state), [`Reset::Nothing`] |
//! | classify | access denied (1044, 1045, 1698, …) → authentication; too many connections (1040, 1203, 1226), shutdown (1053), a killed session (1927) and I/O errors → network (the pool keeps trying); anything else → other | - |
//!
//! ## Why validation is on by default
//!
//! Neither client reads its socket while the connection sits in the pool,
//! so a session the server ended meanwhile (`KILL`, `wait_timeout`, a
//! restart) looks alive until it is used. A ping before handing out a
//! connection that has been idle a while costs one round trip and spares
//! the application the first failed query.
//!
//! ## Why the reset is a plain `ROLLBACK`
//!
//! Unlike PostgreSQL, MySQL and MariaDB answer `ROLLBACK` outside a
//! transaction with a plain OK, no warning and no log line, so asking
//! first would cost the same round trip. A session the server killed while
//! it was checked out fails the `ROLLBACK`, and the pool closes it rather
//! than pooling it again.

// The crate docs describe every manager, each behind its feature; built
// without one of them (docs.rs builds with all features, and so does
// `.ci/run`), their links have nothing to point to.
#![cfg_attr(
    not(all(feature = "tokio", feature = "blocking")),
    allow(rustdoc::broken_intra_doc_links)
)]
// Without a client feature (the default, and the workspace's own build)
// the crate is only the shared shape, with no manager to use it.
#![cfg_attr(
    not(any(feature = "tokio", feature = "blocking")),
    allow(dead_code, unused_imports)
)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
mod error;
mod manager;
#[cfg(feature = "tokio")]
mod tokio_manager;

use std::time::Duration;

pub use cmap_core::{Address, EstablishErrorKind};
pub use error::MySqlError;
#[cfg(feature = "blocking")]
pub use manager::Threads;
#[cfg(feature = "tokio")]
pub use manager::Tokio;
pub use manager::{Client, Connection, Manager, Runtime};
#[cfg(feature = "tokio")]
pub use tokio_manager::{MySqlConnection, MySqlManager};

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub use mysql;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use mysql_async;

/// What a connection's reset does when it is given back to the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Reset {
    /// Nothing: the connection goes back as it is. For code that never
    /// leaves a transaction open.
    Nothing,
    /// `ROLLBACK`: an open transaction is rolled back (one round trip).
    /// Session variables, temporary tables and prepared statements stay.
    /// The default.
    #[default]
    Rollback,
    /// `COM_RESET_CONNECTION`: the transaction is rolled back and the
    /// session's state (variables, temporary tables, prepared statements,
    /// locks) dropped, without a new login; the `Opts`' `init` statements
    /// run again. Needs MySQL 5.7.3 or MariaDB 10.2.4 and later.
    ResetConnection,
}

/// The default [`validation_timeout`](Manager::validation_timeout).
pub const DEFAULT_VALIDATION_TIMEOUT: Duration = Duration::from_secs(5);

/// The default of [`Manager::validate_idle_after`]: 500 ms, HikariCP's.
pub const DEFAULT_VALIDATE_IDLE_AFTER: Duration = Duration::from_millis(500);

/// The kind of a failed connect from the server's error code (the same
/// codes in MySQL and MariaDB).
pub(crate) fn kind_of_server_code(code: u16) -> EstablishErrorKind {
    match code {
        // ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR,
        // ER_NOT_SUPPORTED_AUTH_MODE, ER_ACCESS_DENIED_NO_PASSWORD_ERROR,
        // ER_MUST_CHANGE_PASSWORD(_LOGIN): the credentials.
        1044 | 1045 | 1251 | 1698 | 1820 | 1862 => EstablishErrorKind::Authentication,
        // ER_CON_COUNT_ERROR, ER_TOO_MANY_USER_CONNECTIONS,
        // ER_USER_LIMIT_REACHED (overload the pool waits out),
        // ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED (the session is gone).
        1040 | 1203 | 1226 | 1053 | 1927 => EstablishErrorKind::Network,
        // An unknown database (1049), a bad `init` statement: no retry
        // mends them.
        _ => EstablishErrorKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_codes_are_classified() {
        assert_eq!(kind_of_server_code(1045), EstablishErrorKind::Authentication);
        assert_eq!(kind_of_server_code(1040), EstablishErrorKind::Network);
        assert_eq!(kind_of_server_code(1927), EstablishErrorKind::Network);
        assert_eq!(kind_of_server_code(1049), EstablishErrorKind::Other);
        assert_eq!(kind_of_server_code(1064), EstablishErrorKind::Other);
    }
}
