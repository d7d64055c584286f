//! `bench outage --refuse-only [--runs N] [--pools A,B]`: the refuse-8 s
//! scenario of `bench outage` alone (PostgreSQL refused, its sessions
//! closed, for 8 s under the load of 50 tasks on a pool of 10), for every
//! pool the issue names: cmap-tokio, cmap-blocking and cmap-local with the
//! fixed pace (maxConnecting 2) and the adaptive one, beside deadpool and
//! bb8 in the same run (issue 50). It prints one row per pool and run,
//! then each pool's medians over the runs against the targets: at most 25
//! connects a second during the refusal (cmap pools), no checkout failed
//! after the return, and the first success after the return no later than
//! deadpool's median + 25 ms.

use super::{
    adaptive, connects_during, drive, local, long_down_recovery, median, pg, Scenario, REFUSED_RATE,
};

pub const POOLS: [&str; 8] = [
    "cmap-tokio",
    adaptive::TOKIO,
    pg::CMAP_BLOCKING,
    adaptive::BLOCKING,
    local::NAME,
    local::ADAPTIVE,
    "deadpool",
    "bb8",
];

/// Deadpool's median first success after the return plus this is the
/// latest a cmap pool's may be.
const BEHIND_DEADPOOL_MS: f64 = 25.0;

/// `args` starts with `--refuse-only`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut runs = 3usize;
    let mut pools: Vec<String> = POOLS.iter().map(|p| (*p).to_owned()).collect();
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--runs" => runs = value()?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--pools" => pools = value()?.split(',').map(str::to_owned).collect(),
            _ => return Err(format!("outage --refuse-only: unknown option {arg}")),
        }
    }
    if let Some(bad) = pools.iter().find(|p| !POOLS.contains(&p.as_str())) {
        return Err(format!("unknown pool {bad}; the pools are {}", POOLS.join(", ")));
    }
    // (pool, [connects/s, first success ms, failed after, failed during,
    // first connect after return begins ms, a connect takes ms]) per run.
    let mut rows: Vec<(String, Vec<[Option<f64>; 6]>)> =
        pools.iter().map(|p| (p.clone(), Vec::new())).collect();
    println!(
        "| run | pool | connects during the refusal (/s) | first success after return (ms) | failed after return | \
         failed during | first connect after return begins (ms) | a connect takes (ms, median) |"
    );
    println!("| --: | --- | --: | --: | --: | --: | --: | --: |");
    for run in 1..=runs {
        eprintln!("run {run}/{runs} (load {})", super::uptime());
        for (pool, runs) in rows.iter_mut() {
            let out = drive(pool, Scenario::LongDown);
            let r = long_down_recovery(&out);
            let row = [connects_during(&out), r[0], r[3], r[4], r[1], r[2]];
            let f = |v: Option<f64>, d: usize| v.map_or("–".to_owned(), |v| format!("{v:.d$}"));
            println!(
                "| {run} | {pool} | {} | {} | {} | {} | {} | {} |",
                f(row[0], 1),
                f(row[1], 1),
                f(row[2], 0),
                f(row[3], 0),
                f(row[4], 1),
                f(row[5], 1)
            );
            runs.push(row);
        }
    }
    let med = |runs: &[[Option<f64>; 6]], c: usize| median(runs.iter().filter_map(|r| r[c]).collect());
    let deadpool = rows
        .iter()
        .find(|(p, _)| p == "deadpool")
        .and_then(|(_, r)| med(r, 1));
    println!("\nMedians over {runs} runs:\n");
    println!("| pool | connects during the refusal (/s) | first success after return (ms) | failed after return (most) | targets |");
    println!("| --- | --: | --: | --: | --- |");
    for (pool, r) in &rows {
        let (rate, first) = (med(r, 0), med(r, 1));
        let failed_after = r.iter().filter_map(|r| r[2]).fold(0.0, f64::max);
        let verdict = if pool.starts_with("cmap") {
            let mut missed = Vec::new();
            if rate.is_none_or(|v| v > REFUSED_RATE) {
                missed.push("rate");
            }
            if failed_after > 0.0 {
                missed.push("failures after the return");
            }
            if let (Some(first), Some(dp)) = (first, deadpool) {
                if first > dp + BEHIND_DEADPOOL_MS {
                    missed.push("first success");
                }
            }
            if missed.is_empty() {
                "met".to_owned()
            } else {
                format!("missed: {}", missed.join(", "))
            }
        } else {
            String::new()
        };
        let f = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1}"));
        println!(
            "| {pool} | {} | {} | {failed_after:.0} | {verdict} |",
            f(rate),
            f(first)
        );
    }
    Ok(())
}
