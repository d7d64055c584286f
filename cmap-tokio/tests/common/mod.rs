//! The fake manager of `cmap-testkit` on tokio, for the tests that are
//! tokio's own (the shared ones run as `cmap_testkit::scenarios`), and the
//! runtime the shared tests run in.
#![allow(dead_code)]

use cmap_tokio::{Pool, PoolBuilder, TokioRuntime};

/// The fake manager, sleeping on tokio's clock.
pub type Fake = cmap_testkit::Fake<TokioRuntime>;

pub fn builder() -> PoolBuilder<Fake> {
    Pool::builder().address("fake:27017")
}

/// A multi-threaded runtime with two workers, as `#[tokio::test(flavor =
/// "multi_thread", worker_threads = 2)]` builds, running `future`.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}
