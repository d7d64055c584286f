//! The fake manager of `cmap-testkit` on tokio, for the tests that are
//! tokio's own (the shared ones run as `cmap_testkit::scenarios`).
#![allow(dead_code)]

use cmap_tokio::{Pool, PoolBuilder, TokioRuntime};

/// The fake manager, sleeping on tokio's clock.
pub type Fake = cmap_testkit::Fake<TokioRuntime>;

pub fn builder() -> PoolBuilder<Fake> {
    Pool::builder().address("fake:27017")
}
