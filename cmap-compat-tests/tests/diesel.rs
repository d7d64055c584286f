//! diesel's r2d2 `ConnectionManager<PgConnection>` on cmap-blocking
//! through `compat::R2d2`, against PostgreSQL (feature `diesel`, which
//! links libpq; run with `CMAP_PG_TESTS=1`): a checkout and a query, a
//! killed session replaced, and a refusing server waited through once
//! diesel's connect errors are classified: libpq reports a refusal as text
//! (`ConnectionError::BadConnection`), with no I/O error to find in the
//! `source()` chain.
#![cfg(feature = "diesel")]

use std::time::Duration;

use cmap_blocking::compat::R2d2;
use cmap_blocking::{EstablishErrorKind, Pool};
use cmap_testkit::postgres::server_tests_enabled;
use cmap_testkit::proxy::{Mode, Proxy};
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::r2d2::{ConnectionManager, Error as R2d2Error};
use diesel::sql_types::Integer;

type Manager = R2d2<ConnectionManager<PgConnection>>;

/// A failed connect whose text says the server could not be reached:
/// a network error, as libpq gives no I/O error to find.
fn classify(error: &R2d2Error) -> EstablishErrorKind {
    match error {
        R2d2Error::ConnectionError(ConnectionError::BadConnection(text))
            if text.contains("Connection refused") || text.contains("timeout expired") =>
        {
            EstablishErrorKind::Network
        }
        _ => EstablishErrorKind::Other,
    }
}

fn pool(port: u16) -> Pool<Manager> {
    let manager = ConnectionManager::new(format!("postgres://postgres@127.0.0.1:{port}/test"));
    Pool::builder()
        .address(format!("127.0.0.1:{port}").as_str())
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(R2d2::new(manager).classify_with(classify))
        .unwrap()
}

fn one(conn: &mut PgConnection, expression: &str) -> i32 {
    diesel::select(sql::<Integer>(expression))
        .get_result(conn)
        .unwrap()
}

#[test]
fn a_query_runs_and_a_killed_session_is_replaced() {
    if !server_tests_enabled("a_query_runs_and_a_killed_session_is_replaced") {
        return;
    }
    let pool = pool(5432);
    let mut conn = pool.get().unwrap();
    assert_eq!(one(&mut conn, "41 + 1"), 42);
    let pid = one(&mut conn, "pg_backend_pid()");
    // Killed from a second session while idle: r2d2's is_valid (diesel's
    // `SELECT 1`) fails on its next checkout, and another is made.
    let mut admin = pool.get().unwrap();
    drop(conn);
    diesel::sql_query(format!("SELECT pg_terminate_backend({pid})"))
        .execute(&mut *admin)
        .unwrap();
    drop(admin);
    for _ in 0..2 {
        let mut conn = pool.get().unwrap();
        assert_ne!(
            one(&mut conn, "pg_backend_pid()"),
            pid,
            "the killed session was not handed out"
        );
    }
}

#[test]
fn a_refusing_server_is_waited_through() {
    if !server_tests_enabled("a_refusing_server_is_waited_through") {
        return;
    }
    let proxy = Proxy::start("127.0.0.1:5432".parse().unwrap()).unwrap();
    proxy.set(Mode::Refuse);
    let pool = pool(proxy.port());
    let get = std::thread::spawn(move || pool.get().map(|mut conn| one(&mut conn, "1")));
    std::thread::sleep(Duration::from_millis(500));
    proxy.set(Mode::Pass);
    assert_eq!(get.join().unwrap().unwrap(), 1);
}
