//! The one loop every pool goes through, and what is measured in it.
//!
//! Each of `t` tasks (threads for blocking pools) repeats check out → hold →
//! check in until the window closes. The clock starts before the tasks are
//! spawned; the first `warmup` is not counted. A cycle counts toward
//! throughput and fairness when its checkout completes inside the window.
//! Its latency is recorded when its wait overlaps the window (completed
//! after the window opened, requested before it closed), measured from the
//! moment the checkout was *requested*: a wait that began during the
//! warm-up, or that was still going on when the window closed, is recorded
//! whole. A closed loop has no intended schedule to fall behind, so that
//! is the whole of coordinated omission here: no long wait is left out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::pools::{AsyncPool, BlockingPool, Connector, Family, Setup};
use crate::rt::AsyncRt;

/// What a task does while it holds the connection.
#[derive(Clone, Copy, Debug)]
pub enum Hold {
    /// One `yield_now` of the runtime (`std::thread::yield_now` for threads).
    Yield,
    /// Busy-spins this long, holding the worker.
    Spin(Duration),
}

impl Hold {
    pub fn describe(&self) -> String {
        match self {
            Hold::Yield => "one yield_now".to_owned(),
            Hold::Spin(d) => format!("spin {} µs", d.as_micros()),
        }
    }
}

/// One configuration.
#[derive(Clone, Debug)]
pub struct Params {
    pub m: u32,
    pub t: usize,
    pub warmup: Duration,
    pub measure: Duration,
    pub hold: Hold,
    /// Worker threads of the runtime.
    pub threads: usize,
}

/// The figures of one pool at one configuration.
#[derive(Clone, Debug)]
pub struct Sample {
    pub pool: &'static str,
    pub family: Family,
    pub m: u32,
    pub t: usize,
    /// Cycles completed in the window, per second.
    pub ops: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// Most ÷ fewest cycles completed by one task (∞ when one did none).
    pub fairness: f64,
    /// Tasks that completed no cycle in the window.
    pub starved: usize,
    /// Connections created over the whole run.
    pub created: u64,
    /// Checkouts that failed (timed out).
    pub timeouts: u64,
    /// Events delivered to the subscriber, if the pool has one.
    pub events: u64,
}

#[derive(Default)]
struct TaskOut {
    cycles: u64,
    latencies: Vec<u64>,
    errors: u64,
}

fn spin(duration: Duration) {
    let start = Instant::now();
    while start.elapsed() < duration {
        std::hint::spin_loop();
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl TaskOut {
    /// Books one completed checkout.
    #[inline]
    fn book(&mut self, requested: Instant, got: Instant, start: Instant, end: Instant) {
        if got >= start {
            self.latencies.push(nanos(got - requested));
            if got < end {
                self.cycles += 1;
            }
        }
    }
}

async fn task_async<P: AsyncPool>(pool: Arc<P>, start: Instant, end: Instant, hold: Hold) -> TaskOut {
    let mut out = TaskOut::default();
    loop {
        let requested = Instant::now();
        if requested >= end {
            break;
        }
        match pool.get().await {
            Ok(conn) => {
                let got = Instant::now();
                match hold {
                    Hold::Yield => P::Rt::yield_now().await,
                    Hold::Spin(d) => spin(d),
                }
                drop(conn);
                out.book(requested, got, start, end);
            }
            Err(_) => out.errors += 1,
        }
    }
    out
}

fn task_blocking<P: BlockingPool>(pool: &P, start: Instant, end: Instant, hold: Hold) -> TaskOut {
    let mut out = TaskOut::default();
    loop {
        let requested = Instant::now();
        if requested >= end {
            break;
        }
        match pool.get() {
            Ok(conn) => {
                let got = Instant::now();
                match hold {
                    Hold::Yield => std::thread::yield_now(),
                    Hold::Spin(d) => spin(d),
                }
                drop(conn);
                out.book(requested, got, start, end);
            }
            Err(_) => out.errors += 1,
        }
    }
    out
}

/// Runs one configuration of an async pool on a fresh runtime.
pub fn sweep_async<P: AsyncPool>(p: &Params) -> Sample {
    let setup = Setup {
        max: p.m,
        connector: Connector::new(Duration::ZERO),
        ..Setup::default()
    };
    let hold = p.hold;
    let (warmup, measure, t) = (p.warmup, p.measure, p.t);
    let outs = P::Rt::block_on(p.threads, |rt| {
        let setup = setup.clone();
        async move {
            let pool = Arc::new(P::build(&setup).await);
            let start = Instant::now() + warmup;
            let end = start + measure;
            let tasks: Vec<_> = (0..t)
                .map(|_| rt.spawn(task_async(pool.clone(), start, end, hold)))
                .collect();
            let mut outs = Vec::with_capacity(t);
            for task in tasks {
                outs.push(task.await);
            }
            drop(pool);
            outs
        }
    });
    let mut sample = summarize(P::NAME, Family::Async, p, outs, setup.connector.created());
    sample.events = setup.events.load(std::sync::atomic::Ordering::Relaxed);
    sample
}

/// Runs one configuration of a blocking pool on `t` threads.
pub fn sweep_blocking<P: BlockingPool>(p: &Params) -> Sample {
    let setup = Setup {
        max: p.m,
        connector: Connector::new(Duration::ZERO),
        ..Setup::default()
    };
    let pool = P::build(&setup);
    let start = Instant::now() + p.warmup;
    let end = start + p.measure;
    let outs = std::thread::scope(|s| {
        let threads: Vec<_> = (0..p.t)
            .map(|_| s.spawn(|| task_blocking(&pool, start, end, p.hold)))
            .collect();
        threads
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .collect::<Vec<_>>()
    });
    drop(pool);
    summarize(P::NAME, Family::Blocking, p, outs, setup.connector.created())
}

/// A histogram of nanoseconds, 1 ns to an hour, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

fn summarize(pool: &'static str, family: Family, p: &Params, outs: Vec<TaskOut>, created: u64) -> Sample {
    let mut hist = histogram();
    let mut cycles = 0;
    let mut timeouts = 0;
    let (mut most, mut fewest) = (0, u64::MAX);
    let mut starved = 0;
    for out in &outs {
        cycles += out.cycles;
        timeouts += out.errors;
        most = most.max(out.cycles);
        fewest = fewest.min(out.cycles);
        if out.cycles == 0 {
            starved += 1;
        }
        for &ns in &out.latencies {
            hist.saturating_record(ns.max(1));
        }
    }
    let fairness = if fewest == 0 {
        f64::INFINITY
    } else {
        most as f64 / fewest as f64
    };
    Sample {
        pool,
        family,
        m: p.m,
        t: p.t,
        ops: cycles as f64 / p.measure.as_secs_f64(),
        p50_ns: hist.value_at_quantile(0.50),
        p99_ns: hist.value_at_quantile(0.99),
        p999_ns: hist.value_at_quantile(0.999),
        max_ns: hist.max(),
        fairness,
        starved,
        created,
        timeouts,
        events: 0,
    }
}
