//! The pool used for real, against PostgreSQL at 127.0.0.1:5432 (user
//! `postgres`, trust auth, database `test`), with the ready-made managers
//! of `cmap-postgres`: one `async fn` per check, generic over the client
//! ([`PgClient`]: `tokio-postgres` or the synchronous `postgres` crate),
//! the pool's runtime `R` and the runtime `T` the test's own tasks run on.
//! [`postgres_checks!`](crate::postgres_checks) makes them `#[test]`s.
//!
//! The checks that need the server run only with `CMAP_PG_TESTS=1` (CI
//! sets it) and otherwise say why they did not run. The refused-connection
//! check needs no server and always runs.
//!
//! Each pool's sessions carry an `application_name` no other test and no
//! other runtime uses, so that tests running at once do not see (or kill)
//! each other's sessions in `pg_stat_activity`. The session that watches
//! and kills them ([`admin`]) is a `tokio-postgres` client on the
//! testkit's own tokio runtime ([`on_tokio`]), whatever the pool runs on.

mod checks;
mod client;
pub mod on_tokio;

use std::time::Duration;

use cmap_postgres::tokio_postgres::{Client, Config};
use cmap_postgres::NoTls;

pub use checks::*;
pub use client::PgClient;
pub use on_tokio::OnTokio;

/// Whether the server checks run; says why not, past the test harness's
/// output capture.
pub fn server_tests_enabled(test: &str) -> bool {
    crate::gate::server_tests("CMAP_PG_TESTS", "PostgreSQL at 127.0.0.1:5432", test)
}

/// The server's configuration, on `port` of 127.0.0.1, with sessions named
/// `application_name`.
pub fn config_on(port: u16, application_name: &str) -> Config {
    let mut config = Config::new();
    config
        .host("127.0.0.1")
        .port(port)
        .user("postgres")
        .dbname("test")
        .application_name(application_name)
        .connect_timeout(Duration::from_secs(5));
    config
}

/// [`config_on`] the server's port, 5432.
pub fn config(application_name: &str) -> Config {
    config_on(5432, application_name)
}

/// A name no other test, runtime or test run uses, to find one pool's
/// sessions: the check's `test`, the name of the tasks' runtime `T`, the
/// process and a random number. (PostgreSQL cuts names at 63 bytes; this
/// stays well below.)
pub fn app_name<T>(test: &str) -> String {
    let runtime = std::any::type_name::<T>().rsplit("::").next().unwrap_or("rt");
    format!(
        "cmap-{}-{test}-{}-{}",
        runtime.to_lowercase(),
        std::process::id(),
        fastrand::u32(..)
    )
}

/// A session outside the pool, to watch and kill the pool's sessions, on
/// the testkit's tokio runtime: its queries can be awaited on any runtime.
pub async fn admin() -> Client {
    on_tokio::in_tokio(async {
        let (client, connection) = config("cmap-test-admin").connect(NoTls).await.unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    })
    .await
}

/// How many sessions named `app` the server has.
pub async fn sessions(admin: &Client, app: &str) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .get(0)
}

/// Ends every session named `app`; returns how many there were.
pub async fn kill_all(admin: &Client, app: &str) -> usize {
    admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .len()
}

/// Whether the server still has the session of process `pid`.
pub async fn session_exists(admin: &Client, pid: i32) -> bool {
    admin
        .query_opt("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid])
        .await
        .unwrap()
        .is_some()
}

/// Expands to one `#[test]` per check of [`postgres`](crate::postgres),
/// each running `postgres::NAME::<MANAGER, POOL, TASKS>()` with
/// `block_on`. `MANAGER` is a [`PgClient`].
///
/// ```ignore
/// cmap_testkit::postgres_checks!(
///     manager: cmap_testkit::postgres::OnTokio<cmap_postgres::PgManager>,
///     pool: AsyncStdRuntime, tasks: SmolTasks, block_on: smol::block_on
/// );
/// ```
#[macro_export]
macro_rules! postgres_checks {
    (manager: $manager:ty, pool: $pool:ty, tasks: $tasks:ty, block_on: $block_on:expr $(,)?) => {
        $crate::postgres_checks!(@tests $manager, $pool, $tasks, $block_on;
            two_hundred_tasks_never_open_more_than_max_pool_size_sessions,
            killed_sessions_are_detected_replaced_and_cost_at_most_one_query_each,
            a_refused_connection_gives_its_real_error_not_a_timeout,
            a_recorded_postgresql_run_replays_exactly,
        );
    };
    (@tests $manager:ty, $pool:ty, $tasks:ty, $block_on:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                ($block_on)($crate::postgres::$name::<$manager, $pool, $tasks>());
            }
        )*
    };
}
