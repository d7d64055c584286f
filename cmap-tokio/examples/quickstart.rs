//! The pool with no database: real TCP connections to an echo server that
//! the example starts itself.
//!
//! ```text
//! cargo run -p cmap-tokio --example quickstart
//! ```
//!
//! The echo server and the printing are shared with the other adapters'
//! examples (`cmap_testkit::echo`); what is left here is what differs
//! between runtimes: the manager (in `common/`, shared by the tokio
//! examples) and the client tasks.

mod common;

use std::time::Duration;

use cmap_testkit::echo::{echo_server, report, show};
use cmap_tokio::Pool;
use common::Echo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let addr = echo_server()?;
    println!("echo server on {addr}");

    let pool = Pool::builder()
        .address(addr)
        .max_pool_size(3)
        .wait_queue_timeout(Duration::from_secs(2))
        .on_event(show)
        .build(Echo { addr })?;

    // Six tasks share three connections.
    let mut tasks = Vec::new();
    for task in 0..6 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..2 {
                let mut conn = pool.get().await?;
                let message = format!("hello from task {task}, round {round}\n");
                conn.write_all(message.as_bytes()).await?;
                let mut echoed = vec![0; message.len()];
                conn.read_exact(&mut echoed).await?;
                assert_eq!(echoed, message.as_bytes());
                tokio::time::sleep(Duration::from_millis(10)).await;
                // `conn` is checked in here.
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for task in tasks {
        task.await??;
    }

    report(&pool.status(), &pool.stats());
    pool.close();
    Ok(())
}
