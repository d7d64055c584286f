//! `bench outage --flood` (issue 34, item 3's figures): what a caller can
//! throw at an exhausted cmap-tokio pool (maxPoolSize 10, every
//! connection held, PostgreSQL at 127.0.0.1:5432 directly):
//!
//! - 100,000 checkouts at once, each with a 1 ms deadline
//!   (`get_owned_timeout`): how late they return, the wait queue at its
//!   longest and afterwards;
//! - 10,000 checkouts queued, then every one of their tasks aborted while
//!   it waits (the future dropped): the queue afterwards and how long it
//!   took to empty.
//!
//! For each, this process's resident memory before, at its peak (sampled
//! every millisecond) and after (as before: after a checkout and a 300 ms
//! pause), each phase `--rounds` times, and the median of 200 checkouts of a
//! free connection before and after.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pg::{AsyncPgPool, CmapManager, CmapTokio, PgSetup};
use super::soak::rss_kib;

pub const HELP: &str = "\
usage: bench outage --flood [--checkouts 100000] [--deadline-ms 1] [--cancelled 10000] [--rounds 3]

An exhausted cmap-tokio pool (maxPoolSize 10, all held) on PostgreSQL (127.0.0.1:5432): N checkouts
at once with a 1 ms deadline, then M queued checkouts whose tasks are aborted; memory, the wait
queue, and the next checkout's latency before and after.
";

/// What a sampler saw: the largest RSS (KiB) and wait queue.
struct Peak {
    rss: AtomicU64,
    waiting: AtomicUsize,
    on: AtomicBool,
}

fn sampler(pool: Arc<CmapTokio>) -> (Arc<Peak>, std::thread::JoinHandle<()>) {
    let peak = Arc::new(Peak {
        rss: AtomicU64::new(0),
        waiting: AtomicUsize::new(0),
        on: AtomicBool::new(true),
    });
    let p = peak.clone();
    let thread = std::thread::spawn(move || {
        while p.on.load(Ordering::Relaxed) {
            p.rss.fetch_max(rss_kib(), Ordering::Relaxed);
            p.waiting.fetch_max(pool.0.status().waiting, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    (peak, thread)
}

/// Every connection of the pool, checked out.
async fn hold(
    pool: &CmapTokio,
    n: u32,
) -> Result<Vec<cmap_tokio::PooledConnection<'static, CmapManager>>, String> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(pool.0.get_owned().await.map_err(|e| e.to_string())?);
    }
    Ok(held)
}

/// The median of 200 checkouts of a free connection, µs.
async fn next_checkout(pool: &CmapTokio) -> Result<f64, String> {
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let conn = pool.0.get().await.map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
        drop(conn);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted
        .get(((sorted.len().max(1) - 1) as f64 * q).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let mut checkouts = 100_000usize;
    let mut deadline = Duration::from_millis(1);
    let mut cancelled = 10_000usize;
    let mut rounds = 3usize;
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        let num = |v: &String| v.parse::<u64>().map_err(|_| format!("{arg}: a number"));
        match arg.as_str() {
            "--checkouts" => checkouts = num(value()?)? as usize,
            "--deadline-ms" => deadline = Duration::from_millis(num(value()?)?),
            "--cancelled" => cancelled = num(value()?)? as usize,
            "--rounds" => rounds = num(value()?)?.max(1) as usize,
            "--help" => {
                print!("{HELP}");
                return Ok(());
            }
            _ => return Err(format!("unknown option {arg}\n\n{HELP}")),
        }
    }
    const MAX: u32 = 10;
    let setup = PgSetup {
        port: 5432,
        max: MAX,
        min: 0,
        wait: Some(Duration::from_secs(5)),
        round_trip_check: false,
        counters: Arc::default(),
        application_name: "bench-flood".to_owned(),
        live_port: None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let pool = Arc::new(rt.block_on(CmapTokio::build(&setup)));
    let mut rows = Vec::new();
    let mut future_size = 0;
    rt.block_on(async {
        // Warm: every connection made once, the code paths run once.
        drop(hold(&pool, MAX).await?);
        next_checkout(&pool).await?;

        // 1. Short deadlines, three rounds: memory an allocator keeps for
        // reuse stays level from one round to the next; a leak grows.
        for round in 1..=rounds {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let next_before = next_checkout(&pool).await?;
        let rss_before = rss_kib();
        let held = hold(&pool, MAX).await?;
        let (peak, thread) = sampler(pool.clone());
        let t0 = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..checkouts {
            let get = pool.0.get_owned_timeout(deadline);
            future_size = std::mem::size_of_val(&get);
            set.spawn(async move {
                let start = Instant::now();
                let result = get.await;
                (start.elapsed(), result.map(drop).map_err(|e| e.is_timeout()))
            });
        }
        let (mut late, mut timeouts, mut other, mut served) = (Vec::with_capacity(checkouts), 0, 0, 0);
        while let Some(done) = set.join_next().await {
            let (took, result) = done.map_err(|e| e.to_string())?;
            late.push((took.as_secs_f64() - deadline.as_secs_f64()) * 1e3);
            match result {
                Ok(()) => served += 1,
                Err(true) => timeouts += 1,
                Err(false) => other += 1,
            }
        }
        let took = t0.elapsed();
        let waiting_after = pool.0.status().waiting;
        // The harness's own memory goes before "after" is read.
        drop(set);
        peak.on.store(false, Ordering::Relaxed);
        let _ = thread.join();
        drop(held);
        let next_after = next_checkout(&pool).await?;
        // Read as "before" is: after a checkout and a pause.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let rss_after = rss_kib();
        late.sort_by(f64::total_cmp);
        rows.push(format!(
            "| {checkouts} checkouts, {} ms deadline, round {round} | {timeouts} timed out, {other} other errors, {served} served | \
             {:.1} → {:.1} → {:.1} | {} | {waiting_after} | {:.2} / {:.2} / {:.2} | {next_before:.1} / {next_after:.1} | {:.0} |",
            deadline.as_millis(),
            mib(rss_before),
            mib(peak.rss.load(Ordering::Relaxed)),
            mib(rss_after),
            peak.waiting.load(Ordering::Relaxed),
            percentile(&late, 0.5),
            percentile(&late, 0.99),
            percentile(&late, 1.0),
            took.as_secs_f64() * 1e3
        ));
        eprintln!("{}", rows.last().expect("a row"));
        drop(late);
        }

        // 2. Cancelled while waiting, three rounds.
        for round in 1..=rounds {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let next_before = next_checkout(&pool).await?;
        let rss_before = rss_kib();
        let cancelled_before = pool.0.stats().requests_cancelled;
        let held = hold(&pool, MAX).await?;
        let (peak, thread) = sampler(pool.clone());
        let t0 = Instant::now();
        let tasks: Vec<_> = (0..cancelled)
            .map(|_| {
                let get = pool.0.get_owned();
                tokio::spawn(async move { get.await.map(drop).map_err(|e| e.to_string()) })
            })
            .collect();
        let queued_by = Instant::now() + Duration::from_secs(4);
        while pool.0.status().waiting < cancelled && Instant::now() < queued_by {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let queued = pool.0.status().waiting;
        let aborted_at = Instant::now();
        for t in &tasks {
            t.abort();
        }
        let mut finished_anyway = 0;
        for t in tasks {
            if t.await.is_ok() {
                finished_anyway += 1;
            }
        }
        while pool.0.status().waiting > 0 && aborted_at.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let emptied = aborted_at.elapsed();
        let waiting_after = pool.0.status().waiting;
        let took = t0.elapsed();
        peak.on.store(false, Ordering::Relaxed);
        let _ = thread.join();
        let counted = pool.0.stats().requests_cancelled - cancelled_before;
        drop(held);
        let next_after = next_checkout(&pool).await?;
        // Read as "before" is: after a checkout and a pause.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let rss_after = rss_kib();
        rows.push(format!(
            "| {cancelled} checkouts queued, their tasks aborted, round {round} | {queued} queued, {counted} counted cancelled, \
             {finished_anyway} finished anyway; queue empty {:.1} ms after the aborts | {:.1} → {:.1} → {:.1} | {} | {waiting_after} | – | \
             {next_before:.1} / {next_after:.1} | {:.0} |",
            emptied.as_secs_f64() * 1e3,
            mib(rss_before),
            mib(peak.rss.load(Ordering::Relaxed)),
            mib(rss_after),
            peak.waiting.load(Ordering::Relaxed),
            took.as_secs_f64() * 1e3
        ));
        eprintln!("{}", rows.last().expect("a row"));
        }
        Ok::<(), String>(())
    })?;
    let status = pool.0.status();
    println!(
        "| flood | outcome | RSS before → peak → after (MiB) | wait queue at its longest | wait queue after | \
         return after the deadline, p50 / p99 / max (ms) | a free checkout before / after (µs, median of 200) | took (ms) |\n\
         | --- | --- | --: | --: | --: | --: | --: | --: |"
    );
    for row in rows {
        println!("{row}");
    }
    println!(
        "\na `get_owned_timeout` future: {future_size} bytes (each spawned task holds one; the tasks of a round are \
         all alive until they are joined)"
    );
    println!(
        "\npool at the end: total {}, available {}, in use {}, waiting {}; load average {}",
        status.total,
        status.available,
        status.in_use,
        status.waiting,
        super::chaos::loadavg()
    );
    drop(pool);
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}
