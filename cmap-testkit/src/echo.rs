//! What the examples of the three adapter crates share: an echo server on
//! plain threads (so it runs under any runtime, or none) and the printing
//! of events, status and counters. Each example keeps only its manager and
//! its client code, which is what differs between runtimes.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::thread;

use cmap_async::{Event, Stats, Status};

/// Starts a server on `127.0.0.1` that echoes every byte back, one thread
/// per connection, and returns its address. It runs until the process
/// ends.
pub fn echo_server() -> io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(socket) = socket else { continue };
            thread::spawn(move || {
                let Ok(mut from) = socket.try_clone() else { return };
                let mut to = socket;
                let _ = io::copy(&mut from, &mut to);
            });
        }
    });
    Ok(addr)
}

/// Prints one event: its name and connection.
pub fn show(event: &Event) {
    match event.connection_id() {
        Some(id) => println!("  event {:<26} connection {id}", event.name()),
        None => println!("  event {}", event.name()),
    }
}

/// Prints a pool's status and counters.
pub fn report(status: &Status, stats: &Stats) {
    println!(
        "status: {:?}, {} connections ({} available, {} in use), {} waiting",
        status.state, status.total, status.available, status.in_use, status.waiting
    );
    println!(
        "stats: {} checkouts, {} waited, {} connections opened, {:?} spent waiting",
        stats.requests, stats.requests_queued, stats.connections_opened, stats.wait_time
    );
}
