//! The pool's metrics in Prometheus' text format: the `metrics` facade
//! (feature `metrics`, `PoolBuilder::metrics(true)`) with the
//! `metrics-exporter-prometheus` recorder, over real TCP connections to an
//! echo server the example starts itself.
//!
//! ```text
//! cargo run -p cmap-tokio --features metrics --example metrics
//! ```
//!
//! It prints what a `/metrics` endpoint would serve. In a service, let the
//! exporter serve it (its `http-listener` feature:
//! `PrometheusBuilder::new().with_http_listener(addr).install()`), or
//! serve `handle.render()` from your own HTTP stack.

mod common;

use std::time::Duration;

use cmap_testkit::echo::echo_server;
use cmap_tokio::Pool;
use common::Echo;
use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // The recorder first: a pool takes its metric handles when it is built.
    let handle = PrometheusBuilder::new()
        // Histograms as buckets (the default renders summaries).
        .set_buckets(&[0.000_1, 0.001, 0.01, 0.1, 1.0])?
        .install_recorder()?;

    let addr = echo_server()?;
    let pool = Pool::builder()
        .address(addr)
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(2))
        .metrics(true)
        .build(Echo { addr })?;

    // Four tasks share two connections; one more checkout times out.
    let mut tasks = Vec::new();
    for task in 0..4 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.get().await?;
            let message = format!("hello from task {task}\n");
            conn.write_all(message.as_bytes()).await?;
            let mut echoed = vec![0; message.len()];
            conn.read_exact(&mut echoed).await?;
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    let held = (pool.get().await?, pool.get().await?);
    let timed_out = pool.get_timeout(Duration::from_millis(5)).await.is_err();
    drop(held);
    for task in tasks {
        task.await??;
    }
    assert!(timed_out);

    print!("{}", handle.render());
    pool.close();
    Ok(())
}
