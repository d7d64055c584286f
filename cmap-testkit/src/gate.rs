//! Whether the tests that need a real server run: each server has its
//! variable (`CMAP_PG_TESTS`, `CMAP_REDIS_TESTS`, `CMAP_MONGO_TESTS`; CI
//! sets them all), and a test that does not run says why.

use std::io::Write as _;

/// Whether `var` is `1`; if not, says on stderr, past the test harness's
/// output capture, that `test` was skipped and what it needs (`server`).
pub fn server_tests(var: &str, server: &str, test: &str) -> bool {
    if std::env::var(var).as_deref() == Ok("1") {
        return true;
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipping {test}: set {var}=1 to run it against {server}"
    );
    false
}

/// [`server_tests`] for Redis at 127.0.0.1:6379.
pub fn redis_tests(test: &str) -> bool {
    server_tests("CMAP_REDIS_TESTS", "Redis at 127.0.0.1:6379", test)
}
