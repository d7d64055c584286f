//! The async manager in a `cmap_async_std::Pool`, under smol and under
//! async-std (redis drives its sockets on the async-io stack both share),
//! against Redis at 127.0.0.1:6379 with `CMAP_REDIS_TESTS=1`.

mod common;

use std::future::Future;
use std::time::Duration;

use cmap_async_std::{EstablishErrorKind, ManageConnection, Pool};
use cmap_redis::redis::{self, AsyncCommands};
use cmap_redis::RedisManager;
use common::{key, server_tests_enabled, URL};

/// Shares max_pool_size connections between 50 tasks, then checks that a
/// killed connection is replaced.
async fn scenario(
    spawn: impl Fn(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> Box<dyn Future<Output = ()> + Unpin>,
) {
    let counter = key("async-io");
    let manager = RedisManager::new(URL).unwrap();
    let pool = Pool::builder()
        .address(manager.address())
        .max_pool_size(4)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(manager)
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (pool, counter) = (pool.clone(), counter.clone());
        tasks.push(spawn(Box::pin(async move {
            for _ in 0..4 {
                let mut conn = pool.get().await.unwrap();
                let _: i64 = conn.incr(&counter, 1).await.unwrap();
            }
        })));
    }
    for t in tasks {
        t.await;
    }
    let mut conn = pool.get().await.unwrap();
    let total: i64 = conn.get(&counter).await.unwrap();
    let _: () = conn.del(&counter).await.unwrap();
    assert_eq!(total, 200);
    assert!(pool.stats().connections_opened <= 4);

    // A connection killed under it: the command fails, it is marked
    // broken, and the pool closes it on return.
    let victim: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut *conn)
        .await
        .unwrap();
    let mut admin = redis::Client::open(URL)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(victim)
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(redis::cmd("PING")
        .query_async::<String>(&mut *conn)
        .await
        .is_err());
    assert!(conn.is_broken());
    drop(conn);
    let mut conn = pool.get().await.unwrap();
    let id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut *conn)
        .await
        .unwrap();
    assert_ne!(id, victim);
    drop(conn);
    pool.close();
}

#[test]
fn on_smol() {
    if !server_tests_enabled("on_smol") {
        return;
    }
    smol::block_on(scenario(|f| Box::new(smol::spawn(f))));
}

#[test]
fn on_async_std() {
    if !server_tests_enabled("on_async_std") {
        return;
    }
    async_std::task::block_on(scenario(|f| Box::new(async_std::task::spawn(f))));
}

#[test]
fn a_refused_connection_is_a_network_error() {
    // No server needed: nothing listens on port 1.
    smol::block_on(async {
        let manager = RedisManager::new("redis://127.0.0.1:1/").unwrap();
        let err = manager.connect().await.unwrap_err();
        assert_eq!(manager.classify(&err), EstablishErrorKind::Network, "{err}");
    });
}
