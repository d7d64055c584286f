//! Cancellation stress (`cmap_testkit::stress`, shared with the other
//! adapters): thousands of `get()` futures dropped at random points, with
//! random clears, must leave every connection accounted for and the whole
//! capacity available.

use cmap_testkit::stress::dropped_checkouts_lose_no_connection_and_no_capacity as stress;
use cmap_tokio::TokioRuntime;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_checkouts_lose_no_connection_and_no_capacity() {
    stress::<TokioRuntime, TokioRuntime>(4000).await;
}
