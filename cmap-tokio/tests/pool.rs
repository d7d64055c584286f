//! Real-time tests of the pool on tokio, with a fake manager: the
//! scenarios every adapter runs (`cmap_testkit::scenarios`), and what is
//! tokio's own.

mod common;

use std::time::{Duration, Instant};

use cmap_tokio::TokioRuntime;
use common::{block_on, builder, Fake};

cmap_testkit::pool_scenarios!(pool: TokioRuntime, tasks: TokioRuntime, block_on: block_on);

#[tokio::test(start_paused = true)]
async fn timeouts_follow_tokios_clock_when_it_is_paused() {
    // The runtime's clock is tokio's: with time paused, a 30 s timeout
    // passes at once in real time and exactly on time in virtual time.
    let pool = builder().max_pool_size(1).build(Fake::default()).unwrap();
    let _held = pool.get().await.unwrap();
    let t0 = tokio::time::Instant::now();
    let real = Instant::now();
    let err = pool.get_timeout(Duration::from_secs(30)).await.unwrap_err();
    assert!(err.is_timeout());
    assert_eq!(t0.elapsed(), Duration::from_secs(30));
    assert!(real.elapsed() < Duration::from_secs(5));
}

#[test]
fn the_cheap_clock_is_tokios_own_where_time_can_be_paused() {
    use cmap_tokio::Runtime as _;
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let rt = TokioRuntime::new(current.handle().clone());
    assert_eq!(
        rt.now_coarse().lag,
        Duration::ZERO,
        "a current-thread runtime's clock can be paused"
    );
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let rt = TokioRuntime::new(multi.handle().clone());
    let coarse = rt.now_coarse();
    assert!(coarse.at <= Instant::now());
    if cfg!(target_os = "linux") {
        assert!(coarse.lag > Duration::ZERO, "the system's coarse clock on Linux");
    }
}
