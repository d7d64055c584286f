//! The tokio-postgres manager in a `cmap_tokio::Pool`, against PostgreSQL
//! at 127.0.0.1:5432 (user `postgres`, trust auth, database `test`). The
//! tests that need the server run only with `CMAP_PG_TESTS=1` (CI sets it)
//! and otherwise say why they did not run. The cmap-tokio crate's own
//! PostgreSQL tests (max sessions, killed sessions, a refused connection)
//! use this manager too.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cmap_postgres::{Address, PgManager, Reset};
use cmap_tokio::{EstablishErrorKind, ManageConnection, Pool};
use common::{config, server_tests_enabled};
use tokio_postgres::NoTls;

fn pool(manager: PgManager) -> Pool<PgManager> {
    Pool::builder()
        .address(manager.address())
        .max_pool_size(1)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(manager)
        .unwrap()
}

/// Whether the session is in a transaction block, asked with the simple
/// protocol (in the extended protocol, Bind and Execute each restart
/// `statement_timestamp()`, so the probe only works in one message).
async fn in_transaction(client: &tokio_postgres::Client) -> bool {
    let messages = client
        .simple_query("SELECT now() = statement_timestamp()")
        .await
        .unwrap();
    messages.iter().any(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0) == Some("f"),
        _ => false,
    })
}

#[test]
fn the_address_comes_from_the_configuration() {
    let manager = PgManager::new(config(6543, "postgres", "test"), NoTls);
    assert_eq!(manager.address(), Address::new("127.0.0.1", 6543));
    let mut with_password = config(5432, "postgres", "test");
    with_password.password("hunter2");
    let manager = PgManager::new(with_password, NoTls);
    assert!(!format!("{manager:?}").contains("hunter2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reset_rolls_back_an_open_or_failed_transaction_and_keeps_the_session() {
    if !server_tests_enabled("the_reset_rolls_back_an_open_or_failed_transaction_and_keeps_the_session") {
        return;
    }
    let pool = pool(PgManager::new(config(5432, "postgres", "test"), NoTls));
    let conn = pool.get().await.unwrap();
    let pid = conn.backend_pid();
    assert!(pid > 0);
    // An open transaction, left by raw SQL.
    conn.batch_execute("BEGIN; CREATE TEMP TABLE cmap_reset_probe (x int)")
        .await
        .unwrap();
    assert!(in_transaction(&conn).await);
    drop(conn);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.backend_pid(), pid, "the same session, reset");
    assert!(!in_transaction(&conn).await, "rolled back");
    let table: Option<String> = conn
        .query_one("SELECT to_regclass('pg_temp.cmap_reset_probe')::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(table, None, "the transaction's work is gone");
    // A failed transaction.
    conn.batch_execute("BEGIN").await.unwrap();
    conn.batch_execute("SELECT 1/0").await.unwrap_err();
    drop(conn);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.backend_pid(), pid);
    assert_eq!(
        conn.query_one("SELECT 1::int4", &[])
            .await
            .unwrap()
            .get::<_, i32>(0),
        1
    );
    // Outside a transaction, session state is kept (no DISCARD ALL).
    conn.batch_execute("CREATE TEMP TABLE cmap_kept (x int)")
        .await
        .unwrap();
    drop(conn);
    let conn = pool.get().await.unwrap();
    let table: Option<String> = conn
        .query_one("SELECT to_regclass('pg_temp.cmap_kept')::text", &[])
        .await
        .unwrap()
        .get(0);
    assert!(table.is_some());
    assert_eq!(pool.stats().connections_opened, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discard_all_drops_session_state() {
    if !server_tests_enabled("discard_all_drops_session_state") {
        return;
    }
    let pool = pool(PgManager::new(config(5432, "postgres", "test"), NoTls).reset(Reset::DiscardAll));
    let conn = pool.get().await.unwrap();
    let pid = conn.backend_pid();
    conn.batch_execute("CREATE TEMP TABLE cmap_discarded (x int); SET cmap.test = 'x'")
        .await
        .unwrap();
    conn.batch_execute("BEGIN").await.unwrap();
    drop(conn);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.backend_pid(), pid);
    let row = conn
        .query_one(
            "SELECT to_regclass('pg_temp.cmap_discarded')::text, current_setting('cmap.test', true)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>(0), None);
    assert_ne!(row.get::<_, Option<String>>(1).as_deref(), Some("x"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_sql_and_configure_run_once_per_new_connection() {
    if !server_tests_enabled("init_sql_and_configure_run_once_per_new_connection") {
        return;
    }
    let configured = Arc::new(AtomicUsize::new(0));
    let counter = configured.clone();
    let manager = PgManager::new(config(5432, "postgres", "test"), NoTls)
        .init_sql("SET cmap.init = 'yes'; SET cmap.steps = 'init'")
        .configure(move |client| {
            let counter = counter.clone();
            Box::pin(async move {
                counter.fetch_add(1, Ordering::SeqCst);
                client.batch_execute("SET cmap.steps = 'init, configure'").await
            })
        });
    let pool = pool(manager);
    for _ in 0..3 {
        let conn = pool.get().await.unwrap();
        let row = conn
            .query_one(
                "SELECT current_setting('cmap.init'), current_setting('cmap.steps')",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, String>(0), "yes");
        assert_eq!(row.get::<_, String>(1), "init, configure");
    }
    assert_eq!(configured.load(Ordering::SeqCst), 1);
    // A failing init_sql fails the connect, as "other" (no retry mends it).
    let manager = PgManager::new(config(5432, "postgres", "test"), NoTls).init_sql("SELEC 1");
    let err = manager.connect().await.unwrap_err();
    assert_eq!(manager.classify(&err), EstablishErrorKind::Other, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_past_the_idle_threshold() {
    if !server_tests_enabled("validation_past_the_idle_threshold") {
        return;
    }
    let pool = pool(
        PgManager::new(config(5432, "postgres", "test"), NoTls)
            .validate_idle_after(Duration::from_millis(20))
            .reset(Reset::Nothing),
    );
    let conn = pool.get().await.unwrap();
    let pid = conn.backend_pid();
    drop(conn);
    tokio::time::sleep(Duration::from_millis(30)).await;
    // Validated (a round trip) and handed out: the same session.
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.backend_pid(), pid);
    assert_eq!(pool.stats().connections_opened, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_errors_are_classified() {
    if !server_tests_enabled("connect_errors_are_classified") {
        return;
    }
    // No such role: SQLSTATE 28000, the credentials.
    let manager = PgManager::new(config(5432, "cmap_no_such_role", "test"), NoTls);
    let err = manager.connect().await.unwrap_err();
    assert_eq!(
        manager.classify(&err),
        EstablishErrorKind::Authentication,
        "{err}"
    );
    // No such database: 3D000, no retry mends it.
    let manager = PgManager::new(config(5432, "postgres", "cmap_no_such_db"), NoTls);
    let err = manager.connect().await.unwrap_err();
    assert_eq!(manager.classify(&err), EstablishErrorKind::Other, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_a_network_error() {
    // No server needed: nothing listens on port 1.
    let manager = PgManager::new(config(1, "postgres", "test"), NoTls);
    let err = manager.connect().await.unwrap_err();
    assert_eq!(manager.classify(&err), EstablishErrorKind::Network, "{err}");
}

#[tokio::test]
async fn a_misspelt_database_fails_at_once_naming_the_servers_reason() {
    if !server_tests_enabled("a_misspelt_database_fails_at_once_naming_the_servers_reason") {
        return;
    }
    let pool = pool(PgManager::new(config(5432, "postgres", "nosuchdb"), NoTls));
    let started = std::time::Instant::now();
    let err = pool.get().await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "not at the 10 s deadline"
    );
    // The server's reason ends the message, once, not only four
    // `source()`s down.
    let text = err.to_string();
    assert!(
        text.ends_with("FATAL: database \"nosuchdb\" does not exist"),
        "{text}"
    );
    assert_eq!(text.matches("does not exist").count(), 1, "{text}");
}
