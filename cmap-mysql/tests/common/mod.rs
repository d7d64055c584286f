//! What the MariaDB tests share: whether they run, and the server.
#![allow(dead_code)]

use std::io::Write as _;

/// The project's server (.ci/mariadb.sh): 127.0.0.1:3306, user `cmap`,
/// password `cmap-secret`, database `test`.
pub const HOST: &str = "127.0.0.1";
pub const PORT: u16 = 3306;
pub const USER: &str = "cmap";
pub const PASSWORD: &str = "cmap-secret";
pub const DB: &str = "test";

/// Whether the server tests run (`CMAP_MYSQL_TESTS=1`, which CI sets);
/// says why not, past the test harness's output capture. When it is set,
/// a missing server fails the tests: they connect and unwrap. (The same
/// rule as cmap-testkit's `gate`, copied here so that these tests do not
/// build the testkit's PostgreSQL clients.)
pub fn server_tests_enabled(test: &str) -> bool {
    if std::env::var("CMAP_MYSQL_TESTS").as_deref() == Ok("1") {
        return true;
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipping {test}: set CMAP_MYSQL_TESTS=1 to run it against MariaDB at 127.0.0.1:3306 (.ci/mariadb.sh)"
    );
    false
}

/// A value no other test or test run writes, to find one test's rows in
/// a table the tests share.
pub fn marker(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{test}-{}-{nanos}", std::process::id())
}

/// The table the rollback tests insert into (InnoDB: transactional).
pub const CREATE_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS cmap_rollback (marker VARCHAR(200) NOT NULL) ENGINE=InnoDB";
