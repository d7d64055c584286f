//! One pool per core, shared-nothing: a thread per core, each with its
//! own current-thread tokio runtime, `LocalSet` and `cmap_local::Pool`,
//! of PostgreSQL sessions (`cmap_postgres::PgManager`) or of Redis
//! connections (`cmap_redis::RedisManager`), both with feature `local`.
//! Each thread serves its own requests (here: 64 tasks, 50 requests each)
//! and shares nothing with the others: no lock, no atomic on the path.
//!
//! Needs PostgreSQL at 127.0.0.1:5432 (user postgres, database `test`;
//! `PG` sets another configuration string), or Redis at 127.0.0.1:6379
//! (`REDIS` sets another URL):
//!
//! ```sh
//! cargo run -p cmap-local --example per_core            # PostgreSQL
//! cargo run -p cmap-local --example per_core -- redis
//! ```

use std::future::Future;
use std::time::{Duration, Instant};

use cmap_local::{Address, ManageConnection, Pool, TokioLocal};
use cmap_postgres::{NoTls, PgManager};
use cmap_redis::redis::AsyncCommands;
use cmap_redis::RedisManager;

const TASKS: usize = 64;
const REQUESTS: usize = 50;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis = std::env::args().nth(1).as_deref() == Some("redis");
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let started = Instant::now();
    let threads: Vec<_> = (0..cores)
        .map(|core| {
            std::thread::spawn(move || {
                if redis {
                    redis_core(core)
                } else {
                    postgres_core(core)
                }
            })
        })
        .collect();
    let mut total = 0;
    for thread in threads {
        total += thread.join().expect("a core's thread panicked")?;
    }
    let took = started.elapsed();
    println!(
        "{total} requests on {cores} cores in {took:.2?} ({:.0}/s)",
        total as f64 / took.as_secs_f64()
    );
    Ok(())
}

/// One core against PostgreSQL: each request is a query.
fn postgres_core(core: usize) -> Result<usize, String> {
    let config = std::env::var("PG").unwrap_or_else(|_| "host=127.0.0.1 user=postgres dbname=test".into());
    let manager = PgManager::new(config.parse().map_err(|e| format!("{e}"))?, NoTls);
    serve(core, manager.address(), manager, |pool, task| async move {
        for n in 0..REQUESTS {
            let conn = pool.get().await.map_err(|e| e.to_string())?;
            let row = conn
                .query_one("SELECT $1::INT8 + 1", &[&((task * REQUESTS + n) as i64)])
                .await
                .map_err(|e| e.to_string())?;
            let _: i64 = row.get(0);
        }
        Ok(REQUESTS)
    })
}

/// One core against Redis: each request counts in a key of the core's.
fn redis_core(core: usize) -> Result<usize, String> {
    let url = std::env::var("REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let manager = RedisManager::new(url.as_str()).map_err(|e| e.to_string())?;
    let key = format!("cmap-local:example:per-core:{core}");
    serve(core, manager.address(), manager, move |pool, _| {
        let key = key.clone();
        async move {
            for _ in 0..REQUESTS {
                let mut conn = pool.get().await.map_err(|e| e.to_string())?;
                let _: i64 = conn.incr(&key, 1).await.map_err(|e| e.to_string())?;
            }
            Ok(REQUESTS)
        }
    })
}

/// One core: its runtime, its pool of `manager`'s connections to
/// `address`, and
/// [`TASKS`] local tasks each running `task(pool, n)`; returns how many
/// requests they served.
fn serve<M, F, T>(core: usize, address: Address, manager: M, task: T) -> Result<usize, String>
where
    M: ManageConnection + 'static,
    T: Fn(Pool<M, TokioLocal>, usize) -> F,
    F: Future<Output = Result<usize, String>> + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    tokio::task::LocalSet::new().block_on(&rt, async {
        let pool: Pool<M, TokioLocal> = Pool::builder()
            .address(address)
            .max_pool_size(4)
            .wait_queue_timeout(Duration::from_secs(5))
            .build(manager)
            .map_err(|e| e.to_string())?;
        let tasks: Vec<_> = (0..TASKS)
            .map(|n| tokio::task::spawn_local(task(pool.clone(), n)))
            .collect();
        let mut done = 0;
        for task in tasks {
            done += task.await.map_err(|e| e.to_string())??;
        }
        let stats = pool.stats();
        println!(
            "core {core}: {done} requests, {} connections opened, {:.2?} waited in all",
            stats.connections_opened, stats.wait_time
        );
        Ok(done)
    })
}
