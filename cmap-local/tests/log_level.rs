//! A log level changed after the pool is built. Alone in its test binary:
//! beside other tests' threads hitting the same `tracing` call sites (whose
//! interest `tracing` caches for the process), the subscriber this test
//! installs on its thread was seen to miss the pool's messages.

use std::future::Future;
use std::time::Duration;

use cmap_local::{EstablishErrorKind, ManageConnection, Pool, TokioLocal};
use cmap_testkit::logs::Capture;

/// Connections made at once.
struct AtOnce;

impl ManageConnection for AtOnce {
    type Connection = u32;
    type Error = std::io::Error;
    const CHECKS: bool = false;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<u32, std::io::Error>> {
        std::future::ready(Ok(1))
    }

    fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(e)
    }
}

/// DEBUG logging turned on after the pool is built (no subscriber: its
/// events were off) applies from the pool's next timer turn, which looks
/// again at the log level.
#[test]
fn debug_logging_turned_on_later_applies_from_the_next_timer_turn() {
    cmap_testkit::rt::on_local_set(async {
        let pool: Pool<AtOnce, TokioLocal> = Pool::builder()
            .address("localhost:5432")
            .configure(|o| o.maintenance_interval(Some(Duration::from_millis(20))))
            .build(AtOnce)
            .unwrap();
        drop(pool.get().await.unwrap());
        let capture = Capture::default();
        let _on = tracing::subscriber::set_default(capture.clone());
        // A few timer turns.
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(pool.get().await.unwrap());
        let logged = capture.0.lock().unwrap().clone();
        let messages: Vec<&str> = logged.iter().map(|f| f["message"].as_str()).collect();
        assert!(
            messages.contains(&"Connection checked out") && messages.contains(&"Connection checked in"),
            "{messages:?}"
        );
    });
}
