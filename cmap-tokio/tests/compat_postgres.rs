//! A third-party manager, bb8-postgres's `PostgresConnectionManager`, on
//! cmap-tokio through `compat::Bb8`, against PostgreSQL (run with
//! `CMAP_PG_TESTS=1`): a checkout and a query, a killed session replaced,
//! and a refusing server waited through.

use std::time::Duration;

use bb8_postgres::PostgresConnectionManager;
use cmap_testkit::postgres::{config_on, server_tests_enabled};
use cmap_testkit::proxy::{Mode, Proxy};
use cmap_tokio::compat::Bb8;
use cmap_tokio::Pool;
use tokio_postgres::NoTls;

type Manager = Bb8<PostgresConnectionManager<NoTls>>;

fn pool(port: u16, app: &str) -> Pool<Manager> {
    let manager = PostgresConnectionManager::new(config_on(port, app), NoTls);
    Pool::builder()
        .address(format!("127.0.0.1:{port}").as_str())
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(10))
        .build(Bb8::new(manager))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bb8_postgres_manager_queries_and_replaces_a_killed_session() {
    if !server_tests_enabled("a_bb8_postgres_manager_queries_and_replaces_a_killed_session") {
        return;
    }
    let pool = pool(5432, "cmap-compat-bb8");
    let conn = pool.get().await.unwrap();
    let row = conn.query_one("SELECT $1::int4 + 1", &[&41i32]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 42);
    let pid: i32 = conn
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    // A second session, from the pool too, kills the first once it is idle.
    let admin = pool.get().await.unwrap();
    drop(conn);
    admin
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    drop(admin);
    // The killed session is refused on its next checkout (bb8's is_valid,
    // or has_broken on its return) and another serves the query.
    for _ in 0..2 {
        let conn = pool.get().await.unwrap();
        let now: i32 = conn
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        assert_ne!(now, pid, "the killed session was not handed out");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bb8_postgres_manager_waits_through_a_refusal() {
    if !server_tests_enabled("a_bb8_postgres_manager_waits_through_a_refusal") {
        return;
    }
    let proxy = Proxy::start("127.0.0.1:5432".parse().unwrap()).unwrap();
    proxy.set(Mode::Refuse);
    let pool = pool(proxy.port(), "cmap-compat-bb8-refused");
    let get = tokio::spawn(async move {
        let conn = pool.get().await?;
        let one: i32 = conn.query_one("SELECT 1", &[]).await.unwrap().get(0);
        Ok::<_, cmap_tokio::GetError>(one)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.set(Mode::Pass);
    // The refusal (an I/O error below tokio-postgres's own) is a network
    // error: the checkout waited and is served once the server is back.
    assert_eq!(get.await.unwrap().unwrap(), 1);
}
