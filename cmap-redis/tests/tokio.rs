//! The async manager in a `cmap_tokio::Pool`, against Redis at
//! 127.0.0.1:6379. The tests that need the server run only with
//! `CMAP_REDIS_TESTS=1` (CI sets it) and otherwise say why they did not
//! run; those that need none always run.

mod common;

use std::time::{Duration, Instant};

use cmap_redis::redis::{self, AsyncCommands};
use cmap_redis::RedisManager;
use cmap_tokio::{CheckOutError, ClosedReason, EstablishErrorKind, Event, GetError, ManageConnection, Pool};
use common::{key, server_tests_enabled, URL};

fn pool<const R: bool>(manager: RedisManager<R>, max: u32) -> Pool<RedisManager<R>> {
    Pool::builder()
        .address(manager.address())
        .max_pool_size(max)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(manager)
        .unwrap()
}

async fn admin() -> redis::aio::MultiplexedConnection {
    redis::Client::open(URL)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn client_id(conn: &mut cmap_redis::RedisConnection) -> i64 {
    redis::cmd("CLIENT").arg("ID").query_async(conn).await.unwrap()
}

async fn kill(admin: &mut redis::aio::MultiplexedConnection, id: i64) {
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query_async(admin)
        .await
        .unwrap();
    assert_eq!(killed, 1);
}

#[test]
fn no_reset_task_unless_a_reset_command_is_given() {
    const { assert!(!<RedisManager as ManageConnection>::RESETS) };
    const { assert!(<RedisManager<true> as ManageConnection>::RESETS) };
    let manager = RedisManager::new("redis://:secret@cache.example:6380/3").unwrap();
    assert_eq!(manager.address().to_string(), "cache.example:6380");
    assert!(!format!("{manager:?}").contains("secret"), "{manager:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_tasks_share_max_pool_size_connections() {
    if !server_tests_enabled("a_hundred_tasks_share_max_pool_size_connections") {
        return;
    }
    let counter = key("counter");
    let pool = pool(RedisManager::new(URL).unwrap(), 5);
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let (pool, counter) = (pool.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let mut conn = pool.get().await.unwrap();
                let _: i64 = conn.incr(&counter, 1).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut conn = pool.get().await.unwrap();
    let total: i64 = conn.get(&counter).await.unwrap();
    let _: () = conn.del(&counter).await.unwrap();
    assert_eq!(total, 500);
    drop(conn);
    let stats = pool.stats();
    assert!(stats.connections_opened <= 5, "{stats:?}");
    assert!(pool.status().total <= 5);
    pool.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_while_checked_out_is_closed_when_it_comes_back() {
    if !server_tests_enabled("a_connection_killed_while_checked_out_is_closed_when_it_comes_back") {
        return;
    }
    let pool = pool(RedisManager::new(URL).unwrap(), 2);
    let closed_by_error = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    {
        let closed = closed_by_error.clone();
        let _ = pool.on_event(move |e| {
            if let Event::ConnectionClosed { reason, .. } = e {
                if *reason == ClosedReason::Error {
                    closed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        });
    }
    let mut admin = admin().await;
    let mut conn = pool.get().await.unwrap();
    let victim = client_id(&mut conn).await;
    kill(&mut admin, victim).await;
    let err = redis::cmd("PING")
        .query_async::<String>(&mut *conn)
        .await
        .unwrap_err();
    eprintln!("the command on the killed connection failed with: {err}");
    assert!(conn.is_broken(), "a dropped connection is marked broken");
    drop(conn);
    assert_eq!(closed_by_error.load(std::sync::atomic::Ordering::SeqCst), 1);
    let mut conn = pool.get().await.unwrap();
    assert_ne!(
        client_id(&mut conn).await,
        victim,
        "the killed connection came back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_past_the_idle_threshold_refuses_a_dead_idle_connection() {
    if !server_tests_enabled("validation_past_the_idle_threshold_refuses_a_dead_idle_connection") {
        return;
    }
    let pool = pool(
        RedisManager::new(URL)
            .unwrap()
            .validate_idle_after(Duration::from_millis(50)),
        1,
    );
    let mut admin = admin().await;
    let mut conn = pool.get().await.unwrap();
    let victim = client_id(&mut conn).await;
    drop(conn);
    kill(&mut admin, victim).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    // The PING of the checkout finds it dead: no command fails.
    let mut conn = pool.get().await.unwrap();
    let id = client_id(&mut conn).await;
    assert_ne!(id, victim);
    drop(conn);
    // Used within the threshold: no PING, the same connection.
    let mut conn = pool.get().await.unwrap();
    assert_eq!(client_id(&mut conn).await, id);
    assert_eq!(pool.stats().connections_opened, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_commands_run_on_every_check_in() {
    if !server_tests_enabled("reset_commands_run_on_every_check_in") {
        return;
    }
    let name = format!("cmap-reset-{}", fastrand::u32(..));
    let manager = RedisManager::new(URL)
        .unwrap()
        .reset_with(redis::cmd("UNWATCH"))
        .reset_with(redis::cmd("CLIENT").arg("SETNAME").arg(&name).clone());
    let pool = pool(manager, 1);
    let mut conn = pool.get().await.unwrap();
    let before: Option<String> = redis::cmd("CLIENT")
        .arg("GETNAME")
        .query_async(&mut *conn)
        .await
        .unwrap();
    assert_eq!(before, None);
    drop(conn);
    let mut conn = pool.get().await.unwrap();
    let after: Option<String> = redis::cmd("CLIENT")
        .arg("GETNAME")
        .query_async(&mut *conn)
        .await
        .unwrap();
    assert_eq!(after.as_deref(), Some(name.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_an_authentication_error() {
    if !server_tests_enabled("refused_credentials_are_an_authentication_error") {
        return;
    }
    let manager = RedisManager::new("redis://nosuchuser:wrong@127.0.0.1:6379/").unwrap();
    let err = manager.connect().await.unwrap_err();
    assert_eq!(
        manager.classify(&err),
        EstablishErrorKind::Authentication,
        "{err}"
    );
    assert!(!err.to_string().contains("wrong"), "the password leaked: {err}");
    // Not a network error: the checkout fails at once, not at its deadline.
    let pool = pool(manager, 1);
    let t0 = Instant::now();
    let err = pool.get().await.unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5), "{err:?}");
    assert!(
        matches!(err, GetError::CheckOut(CheckOutError::ConnectionError { .. })),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_a_network_error() {
    // No server needed: nothing listens on port 1.
    let manager = RedisManager::new("redis://127.0.0.1:1/").unwrap();
    let err = manager.connect().await.unwrap_err();
    assert_eq!(manager.classify(&err), EstablishErrorKind::Network, "{err}");
    let pool: Pool<RedisManager> = Pool::builder()
        .address(manager.address())
        .wait_queue_timeout(Duration::from_millis(300))
        .build(manager)
        .unwrap();
    let err = pool.get().await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(err.to_string().contains("SystemOverloadedError"), "{err}");
    // Told not to wait, the checkout fails at once with redis's own error.
    let manager = RedisManager::new("redis://127.0.0.1:1/").unwrap();
    let pool: Pool<RedisManager> = Pool::builder()
        .address(manager.address())
        .configure(|o| o.keep_waiting_on_overload(false))
        .wait_queue_timeout(Duration::from_secs(10))
        .build(manager)
        .unwrap();
    let err = pool.get().await.unwrap_err();
    let GetError::CheckOut(CheckOutError::ConnectionError { ref source, .. }) = err else {
        panic!("expected the connection error, got {err:?}");
    };
    assert!(source.has_label("SystemOverloadedError"), "{source:?}");
    let redis_error = source
        .downcast_ref::<redis::RedisError>()
        .expect("the manager's own error");
    assert!(redis_error.is_connection_refusal(), "{redis_error:?}");
}
