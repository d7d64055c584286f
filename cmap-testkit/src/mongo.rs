//! The MongoDB-compatible servers `.ci/ferretdb.sh` starts (FerretDB
//! v1.24.2 on its SQLite backend), and whether the tests that need them
//! run.

use std::io::Write as _;

/// The server with authentication on: user `cmap`, password
/// `cmap-secret`, in database `test` (`hello` and `ping` answer without
/// authenticating too).
pub const AUTH_ADDR: &str = "127.0.0.1:27017";

/// [`AUTH_ADDR`] as a connection string with the test user's credentials.
pub const AUTH_URI: &str = "mongodb://cmap:cmap-secret@127.0.0.1:27017/test";

/// The server without authentication.
pub const OPEN_ADDR: &str = "127.0.0.1:27018";

/// Where each server serves its Prometheus metrics (`/debug/metrics`):
/// [`AUTH_ADDR`]'s, then [`OPEN_ADDR`]'s.
pub const METRICS_ADDRS: [&str; 2] = ["127.0.0.1:28017", "127.0.0.1:28018"];

/// Whether the server tests run (`CMAP_MONGO_TESTS=1`; CI sets it); says
/// why not, past the test harness's output capture.
pub fn server_tests_enabled(test: &str) -> bool {
    if std::env::var("CMAP_MONGO_TESTS").as_deref() == Ok("1") {
        return true;
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipping {test}: set CMAP_MONGO_TESTS=1 to run it against FerretDB at {AUTH_ADDR} and \
         {OPEN_ADDR} (bash .ci/ferretdb.sh starts them)"
    );
    false
}
