//! The synchronous manager in a `cmap_blocking::Pool`, against PostgreSQL
//! at 127.0.0.1:5432 with `CMAP_PG_TESTS=1`. The cmap-blocking crate's own
//! PostgreSQL tests (max sessions, killed sessions, a refused connection)
//! use this manager too.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cmap_blocking::{EstablishErrorKind, ManageConnection, Pool};
use cmap_postgres::blocking::PgManager;
use cmap_postgres::Reset;
use common::server_tests_enabled;
use postgres::NoTls;

fn config(port: u16, user: &str, dbname: &str) -> postgres::Config {
    common::config(port, user, dbname).into()
}

fn pool(manager: PgManager) -> Pool<PgManager> {
    Pool::builder()
        .address(manager.address())
        .max_pool_size(1)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(manager)
        .unwrap()
}

/// Whether the session is in a transaction block, asked with the simple
/// protocol (as the manager's reset does).
fn in_transaction(client: &mut postgres::Client) -> bool {
    let messages = client
        .simple_query("SELECT now() = statement_timestamp()")
        .unwrap();
    messages.iter().any(|m| match m {
        postgres::SimpleQueryMessage::Row(row) => row.get(0) == Some("f"),
        _ => false,
    })
}

#[test]
fn the_reset_rolls_back_and_discard_all_drops_session_state() {
    if !server_tests_enabled("the_reset_rolls_back_and_discard_all_drops_session_state") {
        return;
    }
    let pool = pool(PgManager::new(config(5432, "postgres", "test"), NoTls));
    let mut conn = pool.get().unwrap();
    let pid = conn.backend_pid();
    conn.batch_execute("BEGIN; CREATE TEMP TABLE cmap_reset_probe (x int)")
        .unwrap();
    assert!(in_transaction(&mut conn));
    drop(conn);
    let mut conn = pool.get().unwrap();
    assert_eq!(conn.backend_pid(), pid, "the same session, reset");
    assert!(!in_transaction(&mut conn), "rolled back");
    conn.batch_execute("BEGIN").unwrap();
    conn.batch_execute("SELECT 1/0").unwrap_err();
    drop(conn);
    let mut conn = pool.get().unwrap();
    assert_eq!(conn.backend_pid(), pid);
    assert_eq!(conn.query_one("SELECT 1::int4", &[]).unwrap().get::<_, i32>(0), 1);
    drop(conn);

    let pool = self::pool(PgManager::new(config(5432, "postgres", "test"), NoTls).reset(Reset::DiscardAll));
    let mut conn = pool.get().unwrap();
    conn.batch_execute("CREATE TEMP TABLE cmap_discarded (x int)")
        .unwrap();
    drop(conn);
    let mut conn = pool.get().unwrap();
    let table: Option<String> = conn
        .query_one("SELECT to_regclass('pg_temp.cmap_discarded')::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(table, None);
}

#[test]
fn init_sql_and_configure_run_once_per_new_connection() {
    if !server_tests_enabled("init_sql_and_configure_run_once_per_new_connection") {
        return;
    }
    let configured = Arc::new(AtomicUsize::new(0));
    let counter = configured.clone();
    let manager = PgManager::new(config(5432, "postgres", "test"), NoTls)
        .init_sql("SET cmap.steps = 'init'")
        .configure(move |client| {
            counter.fetch_add(1, Ordering::SeqCst);
            client.batch_execute("SET cmap.steps = 'init, configure'")
        });
    let pool = pool(manager);
    for _ in 0..3 {
        let mut conn = pool.get().unwrap();
        let order: String = conn
            .query_one("SELECT current_setting('cmap.steps')", &[])
            .unwrap()
            .get(0);
        assert_eq!(order, "init, configure");
    }
    assert_eq!(configured.load(Ordering::SeqCst), 1);
}

#[test]
fn connect_errors_are_classified() {
    if !server_tests_enabled("connect_errors_are_classified") {
        return;
    }
    let manager = PgManager::new(config(5432, "cmap_no_such_role", "test"), NoTls);
    let err = manager.connect().unwrap_err();
    assert_eq!(
        manager.classify(&err),
        EstablishErrorKind::Authentication,
        "{err}"
    );
    let manager = PgManager::new(config(5432, "postgres", "cmap_no_such_db"), NoTls);
    let err = manager.connect().unwrap_err();
    assert_eq!(manager.classify(&err), EstablishErrorKind::Other, "{err}");
}

#[test]
fn a_refused_connection_is_a_network_error() {
    // No server needed: nothing listens on port 1.
    let manager =
        PgManager::new(config(1, "postgres", "test"), NoTls).validation_timeout(Duration::from_secs(1));
    let err = manager.connect().unwrap_err();
    assert_eq!(manager.classify(&err), EstablishErrorKind::Network, "{err}");
}
