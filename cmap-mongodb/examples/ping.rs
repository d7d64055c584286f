//! Pings a MongoDB (or FerretDB) server through a pool: opens a pool from
//! a connection string, runs `ping` and `hello` on a pooled connection,
//! and prints what the server said.
//!
//! ```sh
//! cargo run -p cmap-mongodb --example ping -- mongodb://127.0.0.1:27017/
//! cargo run -p cmap-mongodb --example ping -- 'mongodb://user:password@host:27017/db?tls=true'
//! ```

use std::time::Instant;

use cmap_mongodb::bson::doc;
use cmap_mongodb::MongoManager;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match ping().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn ping() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "mongodb://127.0.0.1:27017/".to_owned());
    let manager = MongoManager::new(&uri)?;
    let pool = cmap_tokio::Pool::builder()
        .connection_string(&uri)
        .build(manager)?;

    let started = Instant::now();
    let mut conn = pool.get().await?;
    println!("connected to {} in {:.1?}", pool.address(), started.elapsed());
    let server = conn.server();
    println!(
        "wire versions {}..={}, writable primary: {}, max message {} bytes",
        server.min_wire_version, server.max_wire_version, server.is_writable_primary, server.max_message_size
    );

    let started = Instant::now();
    let reply = conn.run_command("admin", &doc! { "ping": 1 }).await?;
    println!("ping: {reply} in {:.1?}", started.elapsed());
    drop(conn);
    pool.close();
    Ok(())
}
