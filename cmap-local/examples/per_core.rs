//! One pool per core, shared-nothing: a thread per core, each with its
//! own current-thread tokio runtime, `LocalSet` and `cmap_local::Pool` of
//! PostgreSQL sessions (`cmap_postgres::PgManager`, feature `local`).
//! Each thread serves its own requests (here: 64 tasks running queries)
//! and shares nothing with the others: no lock, no atomic on the path.
//!
//! Needs PostgreSQL at 127.0.0.1:5432 (user postgres, database `test`),
//! or `PG` set to another configuration string:
//!
//! ```sh
//! cargo run -p cmap-local --example per_core
//! ```

use std::time::{Duration, Instant};

use cmap_local::{Pool, TokioLocal};
use cmap_postgres::{NoTls, PgManager};

const TASKS: usize = 64;
const QUERIES: usize = 50;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = std::env::var("PG").unwrap_or_else(|_| "host=127.0.0.1 user=postgres dbname=test".into());
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let started = Instant::now();
    let threads: Vec<_> = (0..cores)
        .map(|core| {
            let config = config.clone();
            std::thread::spawn(move || serve(core, &config))
        })
        .collect();
    let mut total = 0;
    for thread in threads {
        total += thread.join().expect("a core's thread panicked")?;
    }
    let took = started.elapsed();
    println!(
        "{total} queries on {cores} cores in {took:.2?} ({:.0}/s)",
        total as f64 / took.as_secs_f64()
    );
    Ok(())
}

/// One core: its runtime, its pool, its tasks.
fn serve(core: usize, config: &str) -> Result<usize, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let manager = PgManager::new(config.parse().map_err(|e| format!("{e}"))?, NoTls);
        let pool: Pool<_, TokioLocal> = Pool::builder()
            .address(manager.address())
            .max_pool_size(4)
            .wait_queue_timeout(Duration::from_secs(5))
            .build(manager)
            .map_err(|e| e.to_string())?;
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let pool = pool.clone();
                tokio::task::spawn_local(async move {
                    for n in 0..QUERIES {
                        let conn = pool.get().await.map_err(|e| e.to_string())?;
                        let row = conn
                            .query_one("SELECT $1::INT8 + 1", &[&((task * QUERIES + n) as i64)])
                            .await
                            .map_err(|e| e.to_string())?;
                        let _: i64 = row.get(0);
                    }
                    Ok::<usize, String>(QUERIES)
                })
            })
            .collect();
        let mut done = 0;
        for task in tasks {
            done += task.await.map_err(|e| e.to_string())??;
        }
        let stats = pool.stats();
        println!(
            "core {core}: {done} queries, {} connections opened, {:.2?} waited in all",
            stats.connections_opened, stats.wait_time
        );
        Ok(done)
    })
}
