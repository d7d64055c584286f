//! The spike scenario: a pool pre-warmed to `min` connections meets
//! `requests` checkouts at once; connecting is slow (150 ms) and each use
//! short (2 ms). A pool that serves the burst from the connections it has
//! answers in about requests ÷ min × 2 ms; one that opens a connection per
//! request makes each of them wait a whole connect.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::harness::histogram;
use crate::pools::{AsyncPool, BlockingPool, Connector, Family, Setup};
use crate::rt::AsyncRt;

#[derive(Clone, Debug)]
pub struct SpikeParams {
    pub connect: Duration,
    pub use_for: Duration,
    pub max: u32,
    pub min: u32,
    pub requests: usize,
    pub threads: usize,
}

impl Default for SpikeParams {
    fn default() -> Self {
        SpikeParams {
            connect: Duration::from_millis(150),
            use_for: Duration::from_millis(2),
            max: 50,
            min: 5,
            requests: 50,
            threads: 2,
        }
    }
}

/// One round: a fresh pool, one burst.
#[derive(Clone, Debug)]
pub struct SpikeRound {
    /// Connections open before the burst (should be `min`).
    pub before: u64,
    /// Connects started because of the burst (counted until 2 connects
    /// after it ended).
    pub opened: u64,
    /// Arrival to checkout, per request.
    pub waits: Vec<Duration>,
    /// Arrival to the end of the use, per request.
    pub latencies: Vec<Duration>,
    pub failures: usize,
}

/// Rounds of one pool, summarized.
#[derive(Clone, Debug)]
pub struct SpikeResult {
    pub pool: &'static str,
    pub family: Family,
    pub before: u64,
    pub opened_mean: f64,
    pub opened_max: u64,
    pub wait_p50: Duration,
    pub wait_p99: Duration,
    pub p50: Duration,
    pub p99: Duration,
    pub failures: usize,
}

pub fn summarize(pool: &'static str, family: Family, rounds: &[SpikeRound]) -> SpikeResult {
    let mut lat = histogram();
    let mut wait = histogram();
    for r in rounds {
        for d in &r.latencies {
            lat.saturating_record(d.as_nanos().max(1) as u64);
        }
        for d in &r.waits {
            wait.saturating_record(d.as_nanos().max(1) as u64);
        }
    }
    let n = rounds.len().max(1);
    SpikeResult {
        pool,
        family,
        before: rounds.iter().map(|r| r.before).max().unwrap_or(0),
        opened_mean: rounds.iter().map(|r| r.opened as f64).sum::<f64>() / n as f64,
        opened_max: rounds.iter().map(|r| r.opened).max().unwrap_or(0),
        wait_p50: Duration::from_nanos(wait.value_at_quantile(0.5)),
        wait_p99: Duration::from_nanos(wait.value_at_quantile(0.99)),
        p50: Duration::from_nanos(lat.value_at_quantile(0.5)),
        p99: Duration::from_nanos(lat.value_at_quantile(0.99)),
        failures: rounds.iter().map(|r| r.failures).sum(),
    }
}

/// How long connects that the burst started may still be under way after it.
fn settle(p: &SpikeParams) -> Duration {
    p.connect * 2
}

fn setup(p: &SpikeParams) -> Setup {
    Setup {
        max: p.max,
        min: p.min,
        connector: Connector::new(p.connect),
        ..Setup::default()
    }
}

pub fn spike_async<P: AsyncPool>(p: &SpikeParams) -> SpikeRound {
    let setup = setup(p);
    let p = p.clone();
    P::Rt::block_on(p.threads, |rt| async move {
        let pool = Arc::new(P::build(&setup).await);
        // Pre-warm: pools with a minimum size keep `min` by themselves; the
        // others get `min` connections by checking them out together.
        if P::NATIVE_MIN {
            let deadline = Instant::now() + Duration::from_secs(10);
            while setup.connector.established() < u64::from(p.min) && Instant::now() < deadline {
                P::Rt::sleep(Duration::from_millis(5)).await;
            }
        } else {
            let gets: Vec<_> = (0..p.min)
                .map(|_| {
                    let pool = pool.clone();
                    rt.spawn(async move {
                        let conn = pool.get().await;
                        P::Rt::sleep(Duration::from_millis(1)).await;
                        drop(conn);
                    })
                })
                .collect();
            for get in gets {
                get.await;
            }
        }
        // Let the pool take the last connection in and settle.
        P::Rt::sleep(Duration::from_millis(20)).await;
        let before = setup.connector.created();
        let use_for = p.use_for;
        let tasks: Vec<_> = (0..p.requests)
            .map(|_| {
                let pool = pool.clone();
                rt.spawn(async move {
                    let arrived = Instant::now();
                    let conn = pool.get().await;
                    let got = Instant::now();
                    let ok = conn.is_ok();
                    crate::rt::precise_sleep(use_for).await;
                    drop(conn);
                    (ok, got - arrived, arrived.elapsed())
                })
            })
            .collect();
        let mut round = SpikeRound {
            before,
            opened: 0,
            waits: Vec::new(),
            latencies: Vec::new(),
            failures: 0,
        };
        for task in tasks {
            let (ok, wait, latency) = task.await;
            if ok {
                round.waits.push(wait);
                round.latencies.push(latency);
            } else {
                round.failures += 1;
            }
        }
        P::Rt::sleep(settle(&p)).await;
        round.opened = setup.connector.created() - before;
        drop(pool);
        round
    })
}

pub fn spike_blocking<P: BlockingPool>(p: &SpikeParams) -> SpikeRound {
    let setup = setup(p);
    let pool = P::build(&setup);
    if P::NATIVE_MIN {
        let deadline = Instant::now() + Duration::from_secs(10);
        while setup.connector.established() < u64::from(p.min) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    } else {
        std::thread::scope(|s| {
            for _ in 0..p.min {
                s.spawn(|| {
                    let conn = pool.get();
                    std::thread::sleep(Duration::from_millis(1));
                    drop(conn);
                });
            }
        });
    }
    std::thread::sleep(Duration::from_millis(20));
    let before = setup.connector.created();
    let gate = Barrier::new(p.requests);
    let results: Vec<_> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..p.requests)
            .map(|_| {
                s.spawn(|| {
                    gate.wait();
                    let arrived = Instant::now();
                    let conn = pool.get();
                    let got = Instant::now();
                    let ok = conn.is_ok();
                    std::thread::sleep(p.use_for);
                    drop(conn);
                    (ok, got - arrived, arrived.elapsed())
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|h| h.join().expect("a spike thread panicked"))
            .collect()
    });
    std::thread::sleep(settle(p));
    let mut round = SpikeRound {
        before,
        opened: setup.connector.created() - before,
        waits: Vec::new(),
        latencies: Vec::new(),
        failures: 0,
    };
    for (ok, wait, latency) in results {
        if ok {
            round.waits.push(wait);
            round.latencies.push(latency);
        } else {
            round.failures += 1;
        }
    }
    drop(pool);
    round
}
