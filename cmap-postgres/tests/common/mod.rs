//! What the PostgreSQL tests share: whether they run, and the server's
//! configuration.
#![allow(dead_code)]

use std::time::Duration;

/// Whether the server tests run (`CMAP_PG_TESTS=1`); says why not.
pub use cmap_testkit::postgres::server_tests_enabled;

/// The project's server: 127.0.0.1:5432, user postgres (trust), database
/// test.
pub fn config(port: u16, user: &str, dbname: &str) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(port)
        .user(user)
        .dbname(dbname)
        .application_name("cmap-postgres-test")
        .connect_timeout(Duration::from_secs(5));
    config
}
