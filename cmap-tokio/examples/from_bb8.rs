//! Switching from bb8 to cmap-tokio with the same manager (docs/migrating.md):
//! `before` is the bb8 pool, `after` the cmap pool, option for option.
//! Runs against PostgreSQL at 127.0.0.1:5432 (user postgres, database test).

use std::time::Duration;

use bb8_postgres::PostgresConnectionManager;
use cmap_tokio::compat::Bb8;
use tokio_postgres::NoTls;

fn manager() -> PostgresConnectionManager<NoTls> {
    let config = "host=127.0.0.1 user=postgres dbname=test".parse().unwrap();
    PostgresConnectionManager::new(config, NoTls)
}

async fn before() -> Result<i32, Box<dyn std::error::Error>> {
    let pool = bb8::Pool::builder()
        .max_size(10)
        .min_idle(Some(2))
        .connection_timeout(Duration::from_secs(5))
        .idle_timeout(Some(Duration::from_secs(600)))
        .max_lifetime(Some(Duration::from_secs(1800)))
        .test_on_check_out(true)
        .build(manager())
        .await?;
    let conn = pool.get().await?;
    Ok(conn.query_one("SELECT 1", &[]).await?.get(0))
}

async fn after() -> Result<i32, Box<dyn std::error::Error>> {
    let pool = cmap_tokio::Pool::builder()
        .address("127.0.0.1:5432")
        .max_pool_size(10)
        .min_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(5))
        .max_idle_time(Duration::from_secs(600))
        .configure(|o| o.max_lifetime(Duration::from_secs(1800), 0.1))
        .build(Bb8::new(manager()).test_on_check_out(true))?;
    let conn = pool.get().await?;
    Ok(conn.query_one("SELECT 1", &[]).await?.get(0))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("bb8: {}, cmap: {}", before().await?, after().await?);
    Ok(())
}
