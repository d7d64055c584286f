//! The `mysql_async` manager in a `cmap_tokio::Pool`, against MariaDB at
//! 127.0.0.1:3306 (.ci/mariadb.sh). The tests that need the server run
//! only with `CMAP_MYSQL_TESTS=1` (CI sets it) and otherwise say why they
//! did not run.
#![cfg(feature = "tokio")]

mod common;

use std::time::Duration;

use cmap_mysql::{Address, MySqlManager, Reset};
use cmap_tokio::{EstablishErrorKind, ManageConnection, Pool};
use common::{server_tests_enabled, DB, HOST, PASSWORD, PORT, USER};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};

fn opts() -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname(HOST)
        .tcp_port(PORT)
        .user(Some(USER))
        .pass(Some(PASSWORD))
        .db_name(Some(DB))
}

fn pool(manager: MySqlManager) -> Pool<MySqlManager> {
    Pool::builder()
        .address(manager.address())
        .max_pool_size(1)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(manager)
        .unwrap()
}

/// Kills session `id` from a connection of its own, and waits until the
/// server no longer lists it.
async fn kill(id: u32) {
    let mut admin = Conn::new(opts()).await.unwrap();
    admin.query_drop(format!("KILL {id}")).await.unwrap();
    for _ in 0..250 {
        let listed: Option<u64> = admin
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?",
                (id,),
            )
            .await
            .unwrap();
        if listed == Some(0) {
            admin.disconnect().await.unwrap();
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("session {id} still listed 5 s after KILL");
}

/// Waits until the pool holds its connection again: a check-in's reset
/// runs in a task of its own, and a `KILL` must not race it.
async fn until_pooled(pool: &Pool<MySqlManager>) {
    for _ in 0..500 {
        if pool.status().available == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the connection did not come back to the pool within 5 s");
}

async fn rows_with(conn: &mut Conn, marker: &str) -> u64 {
    conn.exec_first("SELECT COUNT(*) FROM cmap_rollback WHERE marker = ?", (marker,))
        .await
        .unwrap()
        .unwrap()
}

#[test]
fn the_address_comes_from_the_options_and_debug_hides_the_password() {
    let manager = MySqlManager::new(opts().tcp_port(3307));
    assert_eq!(manager.address(), Address::new("127.0.0.1", 3307));
    let shown = format!("{manager:?}");
    assert!(!shown.contains(PASSWORD), "{shown}");
    assert!(shown.contains("cmap"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_runs_a_query_on_the_session_it_names() {
    if !server_tests_enabled("a_checkout_runs_a_query_on_the_session_it_names") {
        return;
    }
    let pool = pool(MySqlManager::new(opts()));
    let mut conn = pool.get().await.unwrap();
    let answer: Option<i32> = conn.query_first("SELECT 41 + 1").await.unwrap();
    assert_eq!(answer, Some(42));
    let id: Option<u32> = conn.query_first("SELECT CONNECTION_ID()").await.unwrap();
    assert_eq!(id, Some(conn.thread_id()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reset_rolls_back_an_open_transaction_and_keeps_the_session() {
    if !server_tests_enabled("the_reset_rolls_back_an_open_transaction_and_keeps_the_session") {
        return;
    }
    let marker = common::marker("tokio-rollback");
    let pool = pool(MySqlManager::new(opts()));
    let mut conn = pool.get().await.unwrap();
    conn.query_drop(common::CREATE_TABLE).await.unwrap();
    let id = conn.thread_id();
    conn.query_drop("START TRANSACTION").await.unwrap();
    conn.exec_drop("INSERT INTO cmap_rollback VALUES (?)", (&marker,))
        .await
        .unwrap();
    conn.query_drop("SET @cmap_kept = 1").await.unwrap();
    assert_eq!(
        rows_with(&mut conn, &marker).await,
        1,
        "seen inside the transaction"
    );
    drop(conn); // uncommitted
    let mut conn = pool.get().await.unwrap();
    assert_eq!(conn.thread_id(), id, "the same session, reset");
    let open: Option<i32> = conn.query_first("SELECT @@in_transaction").await.unwrap();
    assert_eq!(open, Some(0), "no transaction left open");
    assert_eq!(
        rows_with(&mut conn, &marker).await,
        0,
        "the insert was rolled back"
    );
    let kept: Option<Option<i32>> = conn.query_first("SELECT @cmap_kept").await.unwrap();
    assert_eq!(kept, Some(Some(1)), "a rollback keeps session variables");
    assert_eq!(pool.stats().connections_opened, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_connection_drops_session_state() {
    if !server_tests_enabled("reset_connection_drops_session_state") {
        return;
    }
    let marker = common::marker("tokio-reset-connection");
    let pool = pool(MySqlManager::new(opts()).reset(Reset::ResetConnection));
    let mut conn = pool.get().await.unwrap();
    conn.query_drop(common::CREATE_TABLE).await.unwrap();
    let id = conn.thread_id();
    conn.query_drop("SET @cmap_dropped = 1; START TRANSACTION")
        .await
        .unwrap();
    conn.exec_drop("INSERT INTO cmap_rollback VALUES (?)", (&marker,))
        .await
        .unwrap();
    drop(conn);
    let mut conn = pool.get().await.unwrap();
    assert_eq!(conn.thread_id(), id, "the same session, without a new login");
    let dropped: Option<Option<i32>> = conn.query_first("SELECT @cmap_dropped").await.unwrap();
    assert_eq!(dropped, Some(None));
    assert_eq!(rows_with(&mut conn, &marker).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_killed_while_idle_past_the_threshold_is_replaced_at_checkout() {
    if !server_tests_enabled("a_session_killed_while_idle_past_the_threshold_is_replaced_at_checkout") {
        return;
    }
    let pool = pool(MySqlManager::new(opts()).validate_idle_after(Duration::from_millis(50)));
    let conn = pool.get().await.unwrap();
    let id = conn.thread_id();
    drop(conn);
    until_pooled(&pool).await;
    kill(id).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    // Pinged, found dead, closed; a new session is handed out instead.
    let mut conn = pool.get().await.unwrap();
    assert_ne!(conn.thread_id(), id);
    let answer: Option<i32> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(answer, Some(1));
    assert_eq!(pool.stats().connections_opened, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_used_within_the_threshold_is_not_pinged() {
    if !server_tests_enabled("a_session_used_within_the_threshold_is_not_pinged") {
        return;
    }
    // The other side of the threshold: no round trip for a connection
    // used moments ago, so a session killed since is handed out, fails
    // its first query, and is replaced when it comes back.
    let pool = pool(MySqlManager::new(opts()).validate_idle_after(Duration::from_secs(3600)));
    let conn = pool.get().await.unwrap();
    let id = conn.thread_id();
    drop(conn);
    until_pooled(&pool).await;
    kill(id).await;
    let mut conn = pool.get().await.unwrap();
    assert_eq!(conn.thread_id(), id, "handed out unchecked");
    conn.query_drop("SELECT 1").await.unwrap_err();
    drop(conn);
    let mut conn = pool.get().await.unwrap();
    assert_ne!(conn.thread_id(), id);
    conn.query_drop("SELECT 1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_killed_while_checked_out_is_replaced_after_check_in() {
    if !server_tests_enabled("a_session_killed_while_checked_out_is_replaced_after_check_in") {
        return;
    }
    // No ping: the check-in alone must keep the dead session out.
    let pool = pool(MySqlManager::new(opts()).no_validation());
    let mut conn = pool.get().await.unwrap();
    let id = conn.thread_id();
    kill(id).await;
    conn.query_drop("SELECT 1").await.unwrap_err();
    drop(conn);
    let mut conn = pool.get().await.unwrap();
    assert_ne!(conn.thread_id(), id, "the killed session was closed, not pooled");
    let answer: Option<i32> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(answer, Some(1));
    assert_eq!(pool.stats().connections_opened, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_errors_are_classified() {
    if !server_tests_enabled("connect_errors_are_classified") {
        return;
    }
    let manager = MySqlManager::new(opts().pass(Some("not-the-password")));
    let err = manager.connect().await.unwrap_err();
    assert_eq!(
        manager.classify(&err),
        EstablishErrorKind::Authentication,
        "{err}"
    );
    let manager = MySqlManager::new(opts().db_name(Some("cmap_no_such_db")));
    let err = manager.connect().await.unwrap_err();
    // cmap has no rights on it: 1044, access denied to that database.
    assert_eq!(
        manager.classify(&err),
        EstablishErrorKind::Authentication,
        "{err}"
    );
    // A bad `init` statement fails the connect, as "other".
    let manager = MySqlManager::new(opts().init(vec!["SELEC 1"]));
    let err = manager.connect().await.unwrap_err();
    assert_eq!(manager.classify(&err), EstablishErrorKind::Other, "{err}");
}

#[tokio::test]
async fn a_refused_connection_is_a_network_error() {
    // No server needed: nothing listens on port 1.
    let manager = MySqlManager::new(opts().tcp_port(1));
    let err = manager.connect().await.unwrap_err();
    assert_eq!(manager.classify(&err), EstablishErrorKind::Network, "{err}");
}
