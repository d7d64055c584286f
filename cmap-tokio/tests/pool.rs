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

#[tokio::test(start_paused = true)]
async fn a_burst_of_deadlines_larger_than_one_drain_all_fail_on_time() {
    // With time paused, 300 checkouts queued at one instant share one
    // deadline: the timer task's one wake then leaves more outputs than a
    // turn drains, and it must turn again at once, not sleep until the
    // pool's next deadline (the long checkout's, a minute on).
    let pool = std::sync::Arc::new(
        builder()
            .max_pool_size(1)
            .configure(|o| o.maintenance_interval(None))
            .build(Fake::default())
            .unwrap(),
    );
    let _held = pool.get().await.unwrap();
    let long = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get_timeout(Duration::from_secs(60)).await.err() })
    };
    tokio::task::yield_now().await;
    let t0 = tokio::time::Instant::now();
    let burst: Vec<_> = (0..300)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let err = pool.get_timeout(Duration::from_secs(1)).await.err();
                (err, tokio::time::Instant::now())
            })
        })
        .collect();
    for checkout in burst {
        let (err, ended) = checkout.await.unwrap();
        assert!(err.is_some_and(|e| e.is_timeout()));
        assert_eq!(
            ended - t0,
            Duration::from_secs(1),
            "every one fails at its deadline"
        );
    }
    assert!(long.await.unwrap().is_some_and(|e| e.is_timeout()));
}
