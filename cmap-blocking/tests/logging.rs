//! The spec's log messages out of the blocking pool, through `tracing`:
//! the same transcript as on tokio (`cmap_testkit::logs`). A test binary
//! of its own, because the subscriber is the process's (inputs run on the
//! pool's own threads too).

mod common;

use std::time::Duration;

use cmap_testkit::logs::{check_transcript, Capture, CONNECTION_STRING};
use common::{builder, SyncFake};

#[test]
fn the_blocking_pool_logs_the_spec_messages() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(capture.clone()).unwrap();
    let pool = builder()
        .connection_string(CONNECTION_STRING)
        .build(SyncFake::default())
        .unwrap();
    drop(pool.get().unwrap());
    drop(pool.get_timeout(Duration::ZERO).unwrap());
    pool.close();
    check_transcript(&capture.0.lock().unwrap());
}
