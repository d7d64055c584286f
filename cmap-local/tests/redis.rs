//! cmap-local against a real Redis server through the `redis` crate on a
//! `LocalSet` (cmap-redis's `RedisManager`, feature `local`). Runs only
//! with `CMAP_REDIS_TESTS=1` (CI sets it) against 127.0.0.1:6379;
//! elsewhere it says why it did not run.

use std::time::Duration;

use cmap_local::{Pool, TokioLocal};
use cmap_redis::redis::{self, AsyncCommands};
use cmap_redis::RedisManager;

const URL: &str = "redis://127.0.0.1:6379/";

#[test]
fn connections_are_reused_reset_and_shared_by_local_tasks() {
    if !cmap_testkit::gate::redis_tests("connections_are_reused_reset_and_shared_by_local_tasks") {
        return;
    }
    cmap_testkit::rt::on_local_set(async {
        let manager = RedisManager::new(URL).unwrap().reset_with(redis::cmd("UNWATCH"));
        let pool: Pool<_, TokioLocal> = Pool::builder()
            .address(manager.address())
            .max_pool_size(2)
            .wait_queue_timeout(Duration::from_secs(5))
            .build(manager)
            .unwrap();
        let key = format!("cmap-local:redis-test:{}", std::process::id());
        // The connection is reused after its reset.
        let mut conn = pool.get().await.unwrap();
        let id: i64 = redis::cmd("CLIENT")
            .arg("ID")
            .query_async(&mut *conn)
            .await
            .unwrap();
        drop(conn);
        // The reset (`UNWATCH`) is a round trip: the connection is back
        // once it answered, and a checkout before that opens another.
        cmap_testkit::rt::eventually_on_tokio("the connection back", || pool.status().available == 1).await;
        let mut conn = pool.get().await.unwrap();
        let again: i64 = redis::cmd("CLIENT")
            .arg("ID")
            .query_async(&mut *conn)
            .await
            .unwrap();
        assert_eq!(again, id, "the connection is reused");
        drop(conn);
        // Twenty local tasks share two connections.
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (pool, key) = (pool.clone(), key.clone());
                tokio::task::spawn_local(async move {
                    let mut conn = pool.get().await.unwrap();
                    let _: i64 = conn.incr(&key, 1).await.unwrap();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let mut conn = pool.get().await.unwrap();
        let counted: i64 = conn.get_del(&key).await.unwrap();
        assert_eq!(counted, 20);
        assert!(pool.stats().connections_opened <= 2);
    });
}
