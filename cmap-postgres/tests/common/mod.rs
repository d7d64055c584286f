//! What the PostgreSQL tests share: whether they run, and the server's
//! configuration.
#![allow(dead_code)]

use std::io::Write as _;
use std::time::Duration;

/// Whether the server tests run; says why not, past the test harness's
/// output capture.
pub fn server_tests_enabled(test: &str) -> bool {
    if std::env::var("CMAP_PG_TESTS").as_deref() == Ok("1") {
        return true;
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipping {test}: set CMAP_PG_TESTS=1 to run it against PostgreSQL at 127.0.0.1:5432"
    );
    false
}

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
