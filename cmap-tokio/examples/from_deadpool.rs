//! Switching from deadpool to cmap-tokio with the same manager
//! (docs/migrating.md): `before` is deadpool's managed pool, `after` the
//! cmap pool, option for option. Needs no server.

use std::time::Duration;

use cmap_tokio::compat::Deadpool;
use deadpool::managed::{Manager, Metrics, RecycleResult};

/// A manager as deadpool's docs write one.
struct Numbers;

impl Manager for Numbers {
    type Type = u64;
    type Error = std::io::Error;

    async fn create(&self) -> Result<u64, std::io::Error> {
        Ok(42)
    }

    async fn recycle(&self, _: &mut u64, _: &Metrics) -> RecycleResult<std::io::Error> {
        Ok(())
    }
}

async fn before() -> Result<u64, Box<dyn std::error::Error>> {
    let pool = deadpool::managed::Pool::<Numbers>::builder(Numbers)
        .max_size(10)
        .wait_timeout(Some(Duration::from_secs(5)))
        .create_timeout(Some(Duration::from_secs(10)))
        .runtime(deadpool::Runtime::Tokio1)
        .build()?;
    let conn = pool.get().await.map_err(|e| e.to_string())?;
    Ok(*conn)
}

async fn after() -> Result<u64, Box<dyn std::error::Error>> {
    let pool = cmap_tokio::Pool::builder()
        .address("numbers:0")
        .max_pool_size(10)
        .wait_queue_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(10))
        .build(Deadpool::new(Numbers))?;
    let conn = pool.get().await?;
    Ok(**conn)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("deadpool: {}, cmap: {}", before().await?, after().await?);
    Ok(())
}
