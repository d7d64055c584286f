//! What the Redis tests share: whether they run, and names no other run
//! uses.
#![allow(dead_code)]

/// The local server `.ci/redis.sh` starts.
pub const URL: &str = "redis://127.0.0.1:6379/";

/// Whether the server tests run; says why not, past the test harness's
/// output capture.
pub fn server_tests_enabled(test: &str) -> bool {
    cmap_testkit::gate::redis_tests(test)
}

/// A key no other test run uses.
pub fn key(test: &str) -> String {
    format!(
        "cmap-redis-test:{test}:{}:{}",
        std::process::id(),
        fastrand::u32(..)
    )
}
