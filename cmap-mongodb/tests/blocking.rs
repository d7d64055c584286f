//! The synchronous manager against FerretDB: the same handshake and
//! authentication on blocking sockets, commands, and the kinds of its
//! establishment failures. Runs with `CMAP_MONGO_TESTS=1`.

mod common;

use std::time::Duration;

use cmap_blocking::Pool;
use cmap_mongodb::blocking::MongoManager;
use cmap_mongodb::bson::doc;
use cmap_mongodb::{Error, EstablishErrorKind, Stage};
use cmap_testkit::mongo;
use cmap_testkit::proxy::{Mode, Proxy};
use common::{establish_kind, unique};

fn pool(uri: &str) -> Pool<MongoManager> {
    Pool::builder()
        .connection_string(uri)
        .build(MongoManager::new(uri).expect("a valid connection string"))
        .expect("a pool")
}

#[test]
fn commands_round_trip_on_an_authenticated_pool() {
    if !mongo::server_tests_enabled("blocking commands_round_trip_on_an_authenticated_pool") {
        return;
    }
    let pool = pool(mongo::AUTH_URI);
    let mut conn = pool.get().unwrap();
    let collection = unique("blocking");
    conn.run_command(
        "test",
        &doc! { "insert": &collection, "documents": [{ "x": 1 }, { "x": 2 }] },
    )
    .unwrap();
    let count = conn.run_command("test", &doc! { "count": &collection }).unwrap();
    assert_eq!(count.get_i32("n").ok(), Some(2), "{count}");
    conn.run_command("test", &doc! { "drop": &collection }).unwrap();
    assert!(!conn.is_broken());
    assert!(conn.server().is_writable_primary);
}

#[test]
fn a_wrong_password_is_an_authentication_failure() {
    if !mongo::server_tests_enabled("blocking a_wrong_password_is_an_authentication_failure") {
        return;
    }
    let pool = pool("mongodb://cmap:nope@127.0.0.1:27017/test?waitQueueTimeoutMS=5000");
    let err = pool.get().unwrap_err();
    assert_eq!(
        establish_kind(&err),
        Some(EstablishErrorKind::Authentication),
        "{err}"
    );
    assert!(err.to_string().contains("Authentication failed."), "{err}");
}

#[test]
fn refused_and_blackholed_establishments_are_network_errors_within_the_connect_timeout() {
    if !mongo::server_tests_enabled("blocking refused_and_blackholed_establishments") {
        return;
    }
    let proxy = Proxy::start(([127, 0, 0, 1], 27018).into()).unwrap();
    let uri = format!("mongodb://127.0.0.1:{}/?connectTimeoutMS=300", proxy.port());
    let manager = MongoManager::new(&uri).unwrap();
    proxy.set(Mode::Refuse);
    let refused = manager.open().unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Network {
                during: Stage::Connect,
                ..
            }
        ),
        "{refused:?}"
    );
    proxy.set(Mode::Blackhole);
    let started = std::time::Instant::now();
    let blackholed = manager.open().unwrap_err();
    assert!(
        matches!(
            blackholed,
            Error::Timeout {
                during: Stage::Hello,
                ..
            }
        ),
        "{blackholed:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(blackholed.establish_kind(), EstablishErrorKind::Network);
    proxy.set(Mode::Pass);
    let mut conn = manager.open().unwrap();
    conn.run_command("admin", &doc! { "ping": 1 }).unwrap();
    // Cut while in use: broken, then replaced by the pool.
    proxy.cut();
    assert!(conn
        .run_command("admin", &doc! { "ping": 1 })
        .unwrap_err()
        .is_network());
    assert!(conn.is_broken());
}

#[test]
fn a_closed_socket_is_refused_on_checkout_without_a_round_trip() {
    if !mongo::server_tests_enabled("blocking a_closed_socket_is_refused_on_checkout") {
        return;
    }
    let proxy = Proxy::start(([127, 0, 0, 1], 27018).into()).unwrap();
    let pool = pool(&format!("mongodb://127.0.0.1:{}/?maxPoolSize=1", proxy.port()));
    drop(pool.get().unwrap());
    proxy.cut();
    // The idle connection's socket is closed: the check sees it and the
    // checkout gets a new connection, with no failed command.
    std::thread::sleep(Duration::from_millis(100));
    let mut conn = pool.get().unwrap();
    conn.run_command("admin", &doc! { "ping": 1 })
        .expect("a new connection, not the cut one");
    assert_eq!(pool.stats().connections_opened, 2);
}
