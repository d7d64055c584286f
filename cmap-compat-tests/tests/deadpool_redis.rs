//! deadpool-redis's manager on cmap-tokio through `compat::Deadpool`,
//! against Redis at 127.0.0.1:6379 (run with `CMAP_REDIS_TESTS=1`): a
//! checkout and commands, a killed connection replaced (deadpool's
//! `recycle` pings it), and a refusing server waited through once the
//! errors are classified by `cmap_redis::classify`: redis's `RedisError`
//! keeps its I/O cause out of its `source()` chain.

use std::time::Duration;

use cmap_testkit::gate::redis_tests;
use cmap_testkit::proxy::{Mode, Proxy};
use cmap_tokio::compat::Deadpool;
use cmap_tokio::Pool;
use deadpool_redis::redis;

type Manager = Deadpool<deadpool_redis::Manager>;

fn pool(port: u16, adapt: impl FnOnce(Manager) -> Manager) -> Pool<Manager> {
    let manager = deadpool_redis::Manager::new(format!("redis://127.0.0.1:{port}/")).unwrap();
    Pool::builder()
        .address(format!("127.0.0.1:{port}").as_str())
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(adapt(Deadpool::new(manager)))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_and_a_killed_connection_is_replaced() {
    if !redis_tests("commands_run_and_a_killed_connection_is_replaced") {
        return;
    }
    let pool = pool(6379, |m| m);
    let mut conn = pool.get().await.unwrap();
    let () = redis::cmd("SET")
        .arg("cmap-compat")
        .arg("hello")
        .query_async(&mut **conn)
        .await
        .unwrap();
    let value: String = redis::cmd("GET")
        .arg("cmap-compat")
        .query_async(&mut **conn)
        .await
        .unwrap();
    assert_eq!(value, "hello");
    let id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut **conn)
        .await
        .unwrap();
    // Killed from a second connection while idle: deadpool's recycle (a
    // PING) fails on its next checkout, and another is made.
    let mut admin = pool.get().await.unwrap();
    drop(conn);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query_async(&mut **admin)
        .await
        .unwrap();
    assert_eq!(killed, 1);
    drop(admin);
    for _ in 0..2 {
        let mut conn = pool.get().await.unwrap();
        let now: i64 = redis::cmd("CLIENT")
            .arg("ID")
            .query_async(&mut **conn)
            .await
            .unwrap();
        assert_ne!(now, id, "the killed connection was not handed out");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_server_is_waited_through_with_redis_own_classification() {
    if !redis_tests("a_refusing_server_is_waited_through_with_redis_own_classification") {
        return;
    }
    let proxy = Proxy::start("127.0.0.1:6379".parse().unwrap()).unwrap();
    proxy.set(Mode::Refuse);
    let pool = pool(proxy.port(), |m| m.classify_with(cmap_redis::classify));
    let get = tokio::spawn(async move {
        let mut conn = pool.get().await?;
        let pong: String = redis::cmd("PING").query_async(&mut **conn).await.unwrap();
        Ok::<_, cmap_tokio::GetError>(pong)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.set(Mode::Pass);
    assert_eq!(get.await.unwrap().unwrap(), "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_it_a_refusal_fails_the_checkout_as_an_unknown_error() {
    if !redis_tests("without_it_a_refusal_fails_the_checkout_as_an_unknown_error") {
        return;
    }
    let proxy = Proxy::start("127.0.0.1:6379".parse().unwrap()).unwrap();
    proxy.set(Mode::Refuse);
    let pool = pool(proxy.port(), |m| m);
    let error = pool.get().await.unwrap_err();
    assert!(
        !error.is_timeout(),
        "failed at once, not at the deadline: {error}"
    );
}
