//! The cancellation stress test (`cmap_testkit::stress`, the one
//! `cmap-tokio` runs) on `AsyncStdRuntime`, under async-std and under smol.

mod common;

use cmap_async_std::AsyncStdRuntime;
use cmap_testkit::stress::dropped_checkouts_lose_no_connection_and_no_capacity as stress;
use common::{AsyncStdTasks, SmolTasks};

const CLIENTS: usize = 4000;

#[test]
fn dropped_checkouts_lose_nothing_under_async_std() {
    async_std::task::block_on(stress::<AsyncStdRuntime, AsyncStdTasks>(CLIENTS));
}

#[test]
fn dropped_checkouts_lose_nothing_under_smol() {
    smol::block_on(stress::<AsyncStdRuntime, SmolTasks>(CLIENTS));
}
