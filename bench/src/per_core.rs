//! `bench per-core`: one pool per core (cmap-local, a thread per core,
//! shared-nothing) against one pool shared by every core (cmap-tokio on a
//! multi-thread runtime with a worker per core), in checkouts per second
//! of wall clock. Each task loops check out → `yield_now` → check in:
//! (a) one task per core on a pool of 16 per core, nobody waits; (b) 64
//! tasks per core on a pool of 4 per core, tasks wait for each other. The
//! median of `reps` windows is kept (the machine is shared).

use std::cell::Cell;
use std::hint::black_box;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::pools::cmap_tokio::CmapTokio;
use crate::pools::{AsyncPool, Connector, Setup};
use crate::rt::{AsyncRt, Tokio};

/// One configuration: tasks and maxPoolSize, per core.
const REGIMES: [(&str, usize, u32); 2] = [
    ("(a) 1 task, M=16 per core", 1, 16),
    ("(b) 64 tasks, M=4 per core", 64, 4),
];

/// Checkouts per second of one shared cmap-tokio pool on `cores` workers.
fn shared(cores: usize, tasks: usize, max: u32, window: Duration) -> f64 {
    let setup = Setup {
        max: max * cores as u32,
        connector: Connector::new(Duration::ZERO),
        ..Setup::default()
    };
    Tokio::block_on(cores, |rt| async move {
        let pool = Arc::new(CmapTokio::build(&setup).await);
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let handles: Vec<_> = (0..tasks * cores)
            .map(|_| {
                let (pool, done, stop) = (pool.clone(), done.clone(), stop.clone());
                rt.spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let conn = pool.get().await.expect("a checkout");
                        tokio::task::yield_now().await;
                        drop(black_box(conn));
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        tokio::time::sleep(window).await;
        stop.store(true, Ordering::Relaxed);
        let took = started.elapsed();
        for h in handles {
            h.await;
        }
        done.load(Ordering::Relaxed) as f64 / took.as_secs_f64()
    })
}

/// Checkouts per second of `cores` threads, each with its own cmap-local
/// pool and local tasks.
fn per_core(cores: usize, tasks: usize, max: u32, window: Duration) -> f64 {
    let started = Instant::now();
    let threads: Vec<_> = (0..cores)
        .map(|_| std::thread::spawn(move || one_core(tasks, max, window)))
        .collect();
    let done: u64 = threads
        .into_iter()
        .map(|t| t.join().expect("a core's thread"))
        .sum();
    done as f64 / started.elapsed().as_secs_f64()
}

fn one_core(tasks: usize, max: u32, window: Duration) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    tokio::task::LocalSet::new().block_on(&rt, async move {
        let pool = crate::pools::cmap_local::build(max);
        let done = Rc::new(Cell::new(0u64));
        let end = Instant::now() + window;
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (pool, done) = (pool.clone(), done.clone());
                tokio::task::spawn_local(async move {
                    while Instant::now() < end {
                        let conn = pool.get().await.expect("a checkout");
                        tokio::task::yield_now().await;
                        drop(black_box(conn));
                        done.set(done.get() + 1);
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.expect("a task");
        }
        done.get()
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The table: checkouts per second, shared against per core.
pub fn run(reps: usize, window: Duration) -> String {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut out = format!(
        "| {cores} cores, checkouts/s (median of {reps} × {} ms) | one shared pool (cmap-tokio, {cores} workers) | a pool per core (cmap-local) | per core / shared |\n|---|--:|--:|--:|\n",
        window.as_millis()
    );
    for (label, tasks, max) in REGIMES {
        let s = median((0..reps).map(|_| shared(cores, tasks, max, window)).collect());
        let p = median((0..reps).map(|_| per_core(cores, tasks, max, window)).collect());
        eprintln!("  {label}: shared {s:.0}/s, per core {p:.0}/s");
        out.push_str(&format!("| {label} | {s:.0} | {p:.0} | {:.2}× |\n", p / s));
    }
    out
}
