//! The pool used for real: PostgreSQL through `tokio-postgres`.
//!
//! ```text
//! cargo run -p cmap-tokio --example postgres
//! ```
//!
//! Connects to 127.0.0.1:5432 as `postgres`, database `test` (override the
//! host and port with `PGHOST` / `PGPORT`), runs 50 concurrent tasks
//! through a pool of 5 connections, and prints the pool's status and
//! statistics.

use std::time::Duration;

use cmap_postgres::{NoTls, PgManager};
use cmap_tokio::Pool;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let host = std::env::var("PGHOST").unwrap_or_else(|_| "127.0.0.1".into());
    let port: u16 = std::env::var("PGPORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(5432);
    let mut config = tokio_postgres::Config::new();
    config
        .host(&host)
        .port(port)
        .user("postgres")
        .dbname("test")
        .application_name("cmap-example");

    let manager = PgManager::new(config, NoTls);
    let pool = Pool::builder()
        .address(manager.address())
        .max_pool_size(5)
        .wait_queue_timeout(Duration::from_secs(5))
        .build(manager)?;

    let mut tasks = Vec::new();
    for n in 0..50i32 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.get().await?;
            match conn.query_one("SELECT $1::int4 * 2", &[&n]).await {
                // `backend_pid` was learnt once, when the session was made.
                Ok(row) => Ok((row.get::<_, i32>(0), conn.backend_pid())),
                Err(e) => {
                    // Its state is unknown now: close it instead of pooling it.
                    conn.mark_broken();
                    Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
                }
            }
        }));
    }
    let mut backends = std::collections::BTreeSet::new();
    for (n, task) in tasks.into_iter().enumerate() {
        let (doubled, pid) = task.await??;
        assert_eq!(doubled, 2 * n as i32);
        backends.insert(pid);
    }
    println!(
        "50 queries ran on {} server sessions: {backends:?}",
        backends.len()
    );
    println!("status: {:?}", pool.status());
    println!("stats:  {:?}", pool.stats());
    pool.close();
    Ok(())
}
