//! The pool's scenarios (`cmap_testkit::scenarios`, the same ones
//! `cmap-tokio` runs) on `AsyncStdRuntime`, once under async-std and once
//! under smol: the test body runs in that runtime's `block_on` and its
//! tasks are spawned with that runtime's `spawn`.

mod common;

mod on_async_std {
    use super::common::AsyncStdTasks;
    use cmap_async_std::AsyncStdRuntime;

    cmap_testkit::pool_scenarios!(pool: AsyncStdRuntime, tasks: AsyncStdTasks, block_on: async_std::task::block_on);
}

mod on_smol {
    use super::common::SmolTasks;
    use cmap_async_std::AsyncStdRuntime;

    cmap_testkit::pool_scenarios!(pool: AsyncStdRuntime, tasks: SmolTasks, block_on: smol::block_on);
}

/// The aliases: `cmap_async_std::Pool::builder()...build(manager)`, and
/// `block_on` from a synchronous caller.
#[test]
fn the_aliases_and_block_on() {
    use cmap_testkit::Fake;
    let pool: cmap_async_std::Pool<Fake<cmap_async_std::AsyncStdRuntime>> = cmap_async_std::Pool::builder()
        .address("fake:27017")
        .max_pool_size(1)
        .build(Fake::default())
        .unwrap();
    let conn = cmap_async_std::block_on(pool.get()).unwrap();
    assert_eq!(conn.n, 1);
    drop(conn);
    assert_eq!(pool.status().available, 1);
}
