//! The async pool on `ThreadRuntime`: the scenarios and the cancellation
//! stress every adapter runs (`cmap_testkit`), each test body in
//! `cmap_blocking::block_on` and its tasks on worker threads.

use cmap_blocking::{block_on, ThreadRuntime};
use cmap_testkit::stress::dropped_checkouts_lose_no_connection_and_no_capacity as stress;

cmap_testkit::pool_scenarios!(pool: ThreadRuntime, tasks: ThreadRuntime, block_on: block_on);

/// As many clients as on the async runtimes, each on a worker thread for
/// as long as it runs (idle workers are reused).
#[test]
fn dropped_checkouts_lose_no_connection_and_no_capacity() {
    block_on(stress::<ThreadRuntime, ThreadRuntime>(4000));
}
