//! The spec's log messages come out of a real pool through `tracing`, with
//! no event subscriber: logging on is enough for the core to build events.
//! The capture and the transcript are `cmap_testkit::logs`, shared with
//! the other adapters.

mod common;

use std::time::Duration;

use cmap_testkit::logs::{check_transcript, Capture, CONNECTION_STRING};
use common::{builder, Fake};

#[test]
fn a_pool_logs_the_spec_messages_with_no_subscriber() {
    let capture = Capture::default();
    // A current-thread runtime keeps every input on this thread, under
    // this thread's subscriber.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(capture.clone(), || {
        rt.block_on(async {
            let pool = builder()
                .connection_string(CONNECTION_STRING)
                .build(Fake::default())
                .unwrap();
            let conn = pool.get().await.unwrap();
            drop(conn);
            let _ = pool.get_timeout(Duration::ZERO).await.unwrap();
            pool.close();
        });
    });
    check_transcript(&capture.0.lock().unwrap());
}
