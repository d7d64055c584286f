//! The flight recorder: a pool records what it does, writes it to a file,
//! and the file replays exactly.
//!
//! ```text
//! cargo run -p cmap-tokio --example flight_recorder
//! cmap replay --at 0.03 /tmp/flight-recording.jsonl   # cargo install cmap-cli
//! ```

mod common;

use std::time::{Duration, Instant};

use cmap_testkit::echo::echo_server;
use cmap_tokio::Pool;
use common::Echo;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let addr = echo_server()?;
    let pool = Pool::builder()
        .address(addr)
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_millis(50))
        // The last 10,000 inputs and outputs (at least 5,000).
        .flight_recorder(10_000)
        .build(Echo { addr })?;

    // Four tasks share two connections; a clear midway.
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..3 {
                if let Ok(conn) = pool.get().await {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    drop(conn);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(3)).await;
    pool.clear(false)?;
    pool.ready()?;
    for task in tasks {
        task.await?;
    }

    let recording = pool.recording().expect("the recorder is on");
    let path = std::env::temp_dir().join("flight-recording.jsonl");
    recording.write_to(std::io::BufWriter::new(std::fs::File::create(&path)?))?;
    println!(
        "recorded {} inputs and {} outputs to {}",
        recording.inputs(),
        recording.outputs(),
        path.display()
    );

    // The same core code, fed the same inputs at the same instants.
    let replay = recording.replay(Instant::now())?;
    println!("replayed: every output identical; the timeline begins:");
    for line in replay.to_string().lines().take(12) {
        println!("{line}");
    }
    print!("and ends with the pool as\n{}", replay.state());
    Ok(())
}
