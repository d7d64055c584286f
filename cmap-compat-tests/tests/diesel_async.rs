//! diesel-async's `AsyncDieselConnectionManager<AsyncPgConnection>` (its
//! bb8 manager) on cmap-tokio through `compat::Bb8`, against PostgreSQL
//! (feature `diesel-async`; run with `CMAP_PG_TESTS=1`): a query, a killed
//! session replaced, and a refusing server waited through once the
//! manager's connect errors are classified: diesel-async reports a
//! refusal as `CouldntSetupConfiguration(DatabaseError(UnableToSendCommand,
//! "error connecting to server"))`, with no I/O error in its chain.
#![cfg(feature = "diesel-async")]

use std::time::Duration;

use cmap_testkit::postgres::server_tests_enabled;
use cmap_testkit::proxy::{Mode, Proxy};
use cmap_tokio::compat::Bb8;
use cmap_tokio::{EstablishErrorKind, Pool};
use diesel::dsl::sql;
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::Integer;
use diesel::ConnectionError;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, PoolError};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

type Manager = Bb8<AsyncDieselConnectionManager<AsyncPgConnection>>;

/// A connect that could not reach the server: a network error.
fn classify(error: &PoolError) -> EstablishErrorKind {
    match error {
        PoolError::ConnectionError(ConnectionError::CouldntSetupConfiguration(
            diesel::result::Error::DatabaseError(DatabaseErrorKind::UnableToSendCommand, _),
        )) => EstablishErrorKind::Network,
        _ => EstablishErrorKind::Other,
    }
}

fn pool(port: u16) -> Pool<Manager> {
    let manager = AsyncDieselConnectionManager::new(format!("postgres://postgres@127.0.0.1:{port}/test"));
    Pool::builder()
        .address(format!("127.0.0.1:{port}").as_str())
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(Bb8::new(manager).classify_with(classify))
        .unwrap()
}

async fn one(conn: &mut AsyncPgConnection, expression: &str) -> i32 {
    diesel::select(sql::<Integer>(expression))
        .get_result(conn)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_runs_and_a_killed_session_is_replaced() {
    if !server_tests_enabled("a_query_runs_and_a_killed_session_is_replaced") {
        return;
    }
    let pool = pool(5432);
    let mut conn = pool.get().await.unwrap();
    assert_eq!(one(&mut conn, "41 + 1").await, 42);
    let pid = one(&mut conn, "pg_backend_pid()").await;
    let mut admin = pool.get().await.unwrap();
    drop(conn);
    diesel::sql_query(format!("SELECT pg_terminate_backend({pid})"))
        .execute(&mut *admin)
        .await
        .unwrap();
    drop(admin);
    for _ in 0..2 {
        let mut conn = pool.get().await.unwrap();
        assert_ne!(
            one(&mut conn, "pg_backend_pid()").await,
            pid,
            "the killed session was not handed out"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_server_is_waited_through() {
    if !server_tests_enabled("a_refusing_server_is_waited_through") {
        return;
    }
    let proxy = Proxy::start("127.0.0.1:5432".parse().unwrap()).unwrap();
    proxy.set(Mode::Refuse);
    let pool = pool(proxy.port());
    let get = tokio::spawn(async move {
        let mut conn = pool.get().await?;
        Ok::<_, cmap_tokio::GetError>(one(&mut conn, "1").await)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.set(Mode::Pass);
    assert_eq!(get.await.unwrap().unwrap(), 1);
}
