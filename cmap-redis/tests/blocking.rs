//! The synchronous manager in a `cmap_blocking::Pool`, against Redis at
//! 127.0.0.1:6379 with `CMAP_REDIS_TESTS=1`.

mod common;

use std::thread;
use std::time::Duration;

use cmap_blocking::{ClosedReason, EstablishErrorKind, Event, ManageConnection, Pool};
use cmap_redis::blocking::RedisManager;
use cmap_redis::redis::{self, Commands};
use common::{key, server_tests_enabled, URL};

fn client_id(conn: &mut redis::Connection) -> i64 {
    redis::cmd("CLIENT").arg("ID").query(conn).unwrap()
}

fn kill(id: i64) {
    let mut admin = redis::Client::open(URL).unwrap().get_connection().unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1);
}

#[test]
fn threads_share_max_pool_size_connections_and_dead_ones_are_replaced() {
    if !server_tests_enabled("threads_share_max_pool_size_connections_and_dead_ones_are_replaced") {
        return;
    }
    let counter = key("blocking");
    let manager = RedisManager::new(URL).unwrap();
    const { assert!(!<RedisManager as ManageConnection>::RESETS) };
    let pool = Pool::builder()
        .address(manager.address())
        .max_pool_size(4)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(manager)
        .unwrap();
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
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let (pool, counter) = (pool.clone(), counter.clone());
            thread::spawn(move || {
                for _ in 0..10 {
                    let mut conn = pool.get().unwrap();
                    let _: i64 = conn.incr(&counter, 1).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut conn = pool.get().unwrap();
    assert_eq!(conn.get::<_, i64>(&counter).unwrap(), 160);
    let _: () = conn.del(&counter).unwrap();
    assert!(pool.stats().connections_opened <= 4);

    // Killed while checked out: the command fails, the connection sees its
    // socket closed, and the pool closes it on return.
    let victim = client_id(&mut conn);
    kill(victim);
    assert!(redis::cmd("PING").query::<String>(&mut *conn).is_err());
    drop(conn);
    assert_eq!(closed_by_error.load(std::sync::atomic::Ordering::SeqCst), 1);
    let mut conn = pool.get().unwrap();
    assert_ne!(client_id(&mut conn), victim);
}

#[test]
fn validation_and_reset() {
    if !server_tests_enabled("validation_and_reset") {
        return;
    }
    let name = format!("cmap-reset-{}", fastrand::u32(..));
    let manager = RedisManager::new(URL)
        .unwrap()
        .validate_idle_after(Duration::ZERO)
        .reset_with(redis::cmd("CLIENT").arg("SETNAME").arg(&name).clone());
    let pool = Pool::builder()
        .address(manager.address())
        .max_pool_size(1)
        .build(manager)
        .unwrap();
    let mut conn = pool.get().unwrap();
    let victim = client_id(&mut conn);
    drop(conn);
    // Killed while idle: the checkout's PING finds it dead, no command fails.
    kill(victim);
    let mut conn = pool.get().unwrap();
    let id = client_id(&mut conn);
    assert_ne!(id, victim);
    drop(conn);
    // The reset ran on check-in.
    let mut conn = pool.get().unwrap();
    assert_eq!(client_id(&mut conn), id);
    let got: Option<String> = redis::cmd("CLIENT").arg("GETNAME").query(&mut *conn).unwrap();
    assert_eq!(got.as_deref(), Some(name.as_str()));
}

#[test]
fn a_refused_connection_is_a_network_error() {
    // No server needed: nothing listens on port 1.
    let manager = RedisManager::new("redis://127.0.0.1:1/").unwrap();
    let err = manager.connect().unwrap_err();
    assert_eq!(manager.classify(&err), EstablishErrorKind::Network, "{err}");
}
