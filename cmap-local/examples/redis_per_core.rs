//! One pool per core, shared-nothing, against Redis: a thread per core,
//! each with its own current-thread tokio runtime, `LocalSet` and
//! `cmap_local::Pool` of Redis connections (`cmap_redis::RedisManager`,
//! feature `local`). Each thread serves its own requests (here: 64 tasks
//! counting in a key of their core's) and shares nothing with the others:
//! no lock, no atomic on the path.
//!
//! Needs Redis at 127.0.0.1:6379, or `REDIS` set to another URL:
//!
//! ```sh
//! cargo run -p cmap-local --example redis_per_core
//! ```

use std::time::{Duration, Instant};

use cmap_local::{Pool, TokioLocal};
use cmap_redis::redis::AsyncCommands;
use cmap_redis::RedisManager;

const TASKS: usize = 64;
const COMMANDS: usize = 50;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let started = Instant::now();
    let threads: Vec<_> = (0..cores)
        .map(|core| {
            let url = url.clone();
            std::thread::spawn(move || serve(core, &url))
        })
        .collect();
    let mut total = 0;
    for thread in threads {
        total += thread.join().expect("a core's thread panicked")?;
    }
    let took = started.elapsed();
    println!(
        "{total} commands on {cores} cores in {took:.2?} ({:.0}/s)",
        total as f64 / took.as_secs_f64()
    );
    Ok(())
}

/// One core: its runtime, its pool, its tasks.
fn serve(core: usize, url: &str) -> Result<usize, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let manager = RedisManager::new(url).map_err(|e| e.to_string())?;
        let pool: Pool<_, TokioLocal> = Pool::builder()
            .address(manager.address())
            .max_pool_size(4)
            .wait_queue_timeout(Duration::from_secs(5))
            .build(manager)
            .map_err(|e| e.to_string())?;
        let key = format!("cmap-local:per-core:{}:{core}", std::process::id());
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (pool, key) = (pool.clone(), key.clone());
                tokio::task::spawn_local(async move {
                    for _ in 0..COMMANDS {
                        let mut conn = pool.get().await.map_err(|e| e.to_string())?;
                        let _: i64 = conn.incr(&key, 1).await.map_err(|e| e.to_string())?;
                    }
                    Ok::<usize, String>(COMMANDS)
                })
            })
            .collect();
        let mut done = 0;
        for task in tasks {
            done += task.await.map_err(|e| e.to_string())??;
        }
        let mut conn = pool.get().await.map_err(|e| e.to_string())?;
        let counted: usize = conn.get_del(&key).await.map_err(|e| e.to_string())?;
        assert_eq!(counted, done, "every increment of this core's tasks");
        let stats = pool.stats();
        println!(
            "core {core}: {done} commands, {} connections opened, {:.2?} waited in all",
            stats.connections_opened, stats.wait_time
        );
        Ok(done)
    })
}
