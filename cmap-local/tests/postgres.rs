//! cmap-local against a real PostgreSQL server through `tokio-postgres` on
//! a `LocalSet` (cmap-postgres's `PgManager`, feature `local`). Runs only
//! with `CMAP_PG_TESTS=1` (CI sets it) against 127.0.0.1:5432, user
//! postgres, database `test`; elsewhere it says why it did not run.

use std::time::Duration;

use cmap_local::{Pool, TokioLocal};
use cmap_postgres::{NoTls, PgManager};

#[test]
fn sessions_are_reused_rolled_back_and_shared_by_local_tasks() {
    if !cmap_testkit::postgres::server_tests_enabled(
        "sessions_are_reused_rolled_back_and_shared_by_local_tasks",
    ) {
        return;
    }
    cmap_testkit::rt::on_local_set(async {
        let config = "host=127.0.0.1 user=postgres dbname=test".parse().unwrap();
        let manager = PgManager::new(config, NoTls);
        let pool: Pool<_, TokioLocal> = Pool::builder()
            .address(manager.address())
            .max_pool_size(2)
            .wait_queue_timeout(Duration::from_secs(5))
            .build(manager)
            .unwrap();
        // A transaction left open is rolled back on check-in.
        let conn = pool.get().await.unwrap();
        let pid = conn.backend_pid();
        conn.batch_execute("BEGIN; CREATE TEMP TABLE left_open (x INT)")
            .await
            .unwrap();
        drop(conn);
        // The reset (a rollback) is a round trip: the session is back once
        // it answered, and a checkout before that opens another.
        cmap_testkit::rt::eventually_on_tokio("the session back", || pool.status().available == 1).await;
        let conn = pool.get().await.unwrap();
        assert_eq!(conn.backend_pid(), pid, "the session is reused");
        let row = conn
            .query_one("SELECT to_regclass('pg_temp.left_open') IS NULL", &[])
            .await
            .unwrap();
        assert!(row.get::<_, bool>(0), "the open transaction was rolled back");
        drop(conn);
        // Twenty local tasks share two sessions.
        let tasks: Vec<_> = (0..20i64)
            .map(|n| {
                let pool = pool.clone();
                tokio::task::spawn_local(async move {
                    let conn = pool.get().await.unwrap();
                    conn.query_one("SELECT $1::INT8 * 2", &[&n])
                        .await
                        .unwrap()
                        .get::<_, i64>(0)
                })
            })
            .collect();
        for (n, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.unwrap(), n as i64 * 2);
        }
        assert!(pool.stats().connections_opened <= 2);
    });
}
