//! `bench outage --soak --pools P --minutes M` (issue 34): one pool, in
//! this process alone, under the usual 50-task load on PostgreSQL through
//! the fault proxy, with every session cut every 30 s; each minute a
//! line of this process's resident memory and open file descriptors
//! (`/proc/self`) and the pool's status and counters. Run one process per
//! pool so that the figures are the pool's.
//!
//! `bench outage --soak-report A.tsv,B.tsv [--out docs]` turns the lines
//! of such runs into a markdown table and two plots (`docs/img/soak-rss.svg`,
//! `docs/img/soak-fds.svg`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::chaos::{self, Fault, Probe, Route, Step};
use crate::svg::{Chart, Panel, Scale, Series};

pub const HELP: &str = "\
usage: bench outage --soak --pools P [--minutes 60] [--cut-every-s 30] [--sample-s 60] [--think-ms 50]
       bench outage --soak-report A.tsv,B.tsv [--out docs]

--soak: one pool (cmap-tokio, cmap-blocking, deadpool or bb8) under the 50-task load on PostgreSQL
(127.0.0.1:5432) through the fault proxy (each task pausing 50 ms after a query, so that the hour
leaves the machine's cores to other work), every session cut every 30 s; prints a tab-separated line
each minute: minute, RSS (KiB), open fds, threads, the load's get()s and failures, and the pool's
status and counters (cmap pools). Run it with its output to a file, one pool per process.
--soak-report: the table and plots from those files.
";

/// The columns of a line.
const COLUMNS: &str =
    "minute\trss_kib\tfds\tthreads\tgets\tfailed\tlate\thung\ttotal\tavailable\tin_use\twaiting\t\
                       requests\ttimed_out\tfailed_requests\topened\tclosed\tlost";

fn proc_status(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// This process's resident memory, KiB.
pub fn rss_kib() -> u64 {
    proc_status("VmRSS:")
}

/// This process's open file descriptors.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let mut pool = String::new();
    let mut minutes = 60.0f64;
    let mut cut_every = Duration::from_secs(30);
    let mut sample_every = Duration::from_secs(60);
    let mut think = Duration::from_millis(50);
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        let num = |v: &String| v.parse::<f64>().map_err(|_| format!("{arg}: a number"));
        match arg.as_str() {
            "--pools" => pool = value()?.clone(),
            "--minutes" => minutes = num(value()?)?,
            "--cut-every-s" => cut_every = Duration::from_secs_f64(num(value()?)?),
            "--sample-s" => sample_every = Duration::from_secs_f64(num(value()?)?),
            "--think-ms" => think = Duration::from_secs_f64(num(value()?)? / 1e3),
            "--help" => {
                print!("{HELP}");
                return Ok(());
            }
            _ => return Err(format!("unknown option {arg}\n\n{HELP}")),
        }
    }
    let Some(name) = chaos::POOLS.iter().copied().find(|p| *p == pool) else {
        return Err(format!(
            "--soak needs one pool: --pools {}",
            chaos::POOLS.join("|")
        ));
    };
    let length = Duration::from_secs_f64(minutes * 60.0);
    let steps = [Step {
        at: Duration::ZERO,
        fault: Fault::Pass,
        length,
        renew: false,
    }];
    let base = Instant::now();
    let probe = Arc::new(Probe::new(
        name,
        base,
        Arc::new(AtomicUsize::new(0)),
        &steps,
        chaos::TASKS,
    ));
    let mut route = Route::start();
    let mut born = Instant::now();
    let running = chaos::start(
        name,
        &chaos::setup("soak", name, &route, false),
        probe.clone(),
        think,
    );
    println!(
        "# bench outage --soak --pools {name} --minutes {minutes}: cut every {} s, a line every {} s, \
         each task pausing {} ms after a query",
        cut_every.as_secs_f64(),
        sample_every.as_secs_f64(),
        think.as_millis()
    );
    println!("{COLUMNS}");
    let line = |minute: f64| {
        let [gets, failed, late, hung] = probe.counts();
        let mut s = format!(
            "{minute:.1}\t{}\t{}\t{}\t{gets}\t{failed}\t{late}\t{hung}\t{}",
            rss_kib(),
            open_fds(),
            proc_status("Threads:"),
            (running.total)()
        );
        match (running.stats)() {
            Some((status, stats)) => {
                let _ = write!(
                    s,
                    "\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    status.available,
                    status.in_use,
                    status.waiting,
                    stats.requests,
                    stats.requests_timed_out,
                    stats.requests_failed,
                    stats.connections_opened,
                    stats.connections_closed,
                    stats.connections_lost
                );
            }
            None => s.push_str("\t-\t-\t-\t-\t-\t-\t-\t-\t-"),
        }
        println!("{s}");
    };
    line(0.0);
    let start = Instant::now();
    let mut next_cut = start + cut_every;
    let mut next_sample = start + sample_every;
    let end = start + length;
    let mut cuts = 0u64;
    loop {
        let next = next_cut.min(next_sample).min(end);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let now = Instant::now();
        if now >= next_sample {
            probe.sample((running.total)());
            line((now - start).as_secs_f64() / 60.0);
            next_sample += sample_every;
        }
        if now >= end {
            break;
        }
        if now >= next_cut {
            route.cut(&mut born);
            cuts += 1;
            next_cut += cut_every;
        }
    }
    let unfinished = (running.finish)(Duration::from_secs(20));
    (running.drop_pool)();
    drop(route);
    println!(
        "# done: {cuts} cuts, {unfinished} load tasks unfinished, load average {}",
        chaos::loadavg()
    );
    Ok(())
}

/// One run's lines: the pool, then (minute, column values).
struct Soak {
    pool: String,
    rows: Vec<Vec<f64>>,
    header: Vec<String>,
}

impl Soak {
    fn read(path: &str) -> Result<Soak, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let pool = text
            .lines()
            .find_map(|l| l.split("--pools ").nth(1))
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("?")
            .to_owned();
        let header: Vec<String> = COLUMNS.split('\t').map(str::to_owned).collect();
        let rows = text
            .lines()
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
            .map(|l| l.split('\t').map(|v| v.parse().unwrap_or(f64::NAN)).collect())
            .collect();
        Ok(Soak { pool, rows, header })
    }

    fn column(&self, name: &str) -> usize {
        self.header.iter().position(|h| h == name).expect("a column")
    }

    fn series(&self, name: &str, scale: f64) -> Vec<(f64, f64)> {
        let c = self.column(name);
        self.rows.iter().map(|r| (r[0], r[c] / scale)).collect()
    }

    /// The value at the first line at or after `minute`, and at the last.
    fn at(&self, name: &str, minute: f64) -> (f64, f64) {
        let c = self.column(name);
        let from = self
            .rows
            .iter()
            .find(|r| r[0] >= minute - 0.05)
            .map_or(f64::NAN, |r| r[c]);
        let last = self.rows.last().map_or(f64::NAN, |r| r[c]);
        (from, last)
    }

    /// The least-squares slope of a column over the lines from `from`
    /// to `to` minutes, per hour.
    fn slope(&self, name: &str, from: f64, to: f64) -> f64 {
        let c = self.column(name);
        let pts: Vec<(f64, f64)> = self
            .rows
            .iter()
            .filter(|r| r[0] >= from - 0.05 && r[0] <= to + 0.05)
            .map(|r| (r[0], r[c]))
            .collect();
        let n = pts.len() as f64;
        if pts.len() < 2 {
            return f64::NAN;
        }
        let (mx, my) = (
            pts.iter().map(|p| p.0).sum::<f64>() / n,
            pts.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
        sxy / sxx * 60.0
    }

    fn max_after(&self, name: &str, minute: f64) -> f64 {
        let c = self.column(name);
        self.rows
            .iter()
            .filter(|r| r[0] >= minute - 0.05)
            .map(|r| r[c])
            .fold(f64::NAN, f64::max)
    }
}

pub fn report(args: &[String]) -> Result<(), String> {
    let files: Vec<String> = args
        .get(1)
        .ok_or("--soak-report needs the files: A.tsv,B.tsv")?
        .split(',')
        .map(str::to_owned)
        .collect();
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let soaks: Vec<Soak> = files.iter().map(|f| Soak::read(f)).collect::<Result<_, _>>()?;
    let mut md = String::from(
        "| pool | minutes | RSS at 5 min → half → end (MiB) | RSS trend, 2nd half (KiB/h) | RSS highest, middle third → last third (MiB) | open fds at 5 min → end | fds max after 5 min | \
         threads at 5 min → end | `get()`s | failed | pool total at end | connections opened / closed / lost | target |\n\
         | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --- |\n",
    );
    for s in &soaks {
        let (rss5, rss_end) = s.at("rss_kib", 5.0);
        let minutes = s.rows.last().map_or(0.0, |r| r[0]);
        let (rss_half, _) = s.at("rss_kib", (minutes / 2.0).round());
        let trend = s.slope("rss_kib", (minutes / 2.0).round(), minutes);
        let (fd5, fd_end) = s.at("fds", 5.0);
        let fd_max = s.max_after("fds", 5.0);
        let (th5, th_end) = s.at("threads", 5.0);
        let last = s.rows.last().cloned().unwrap_or_default();
        let get = |name: &str| last.get(s.column(name)).copied().unwrap_or(f64::NAN);
        // Growth: the last third's highest memory more than 2 % above the
        // middle third's, or more descriptors than at five minutes.
        let third = |from: f64, to: f64| {
            let c = s.column("rss_kib");
            s.rows
                .iter()
                .filter(|r| r[0] > from + 0.05 && r[0] <= to + 0.05)
                .map(|r| r[c])
                .fold(f64::NAN, f64::max)
        };
        let (middle, last_third) = (
            third(minutes / 3.0, 2.0 * minutes / 3.0),
            third(2.0 * minutes / 3.0, minutes),
        );
        let grew = last_third > middle * 1.02 || fd_max > fd5;
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.1} → {:.1} → {:.1} | {trend:+.0} | {:.1} → {:.1} | {fd5:.0} → {fd_end:.0} | {fd_max:.0} | {th5:.0} → {th_end:.0} | {:.0} | {:.0} | {:.0} | {} / {} / {} | {} |",
            s.pool,
            last.first().copied().unwrap_or(0.0),
            rss5 / 1024.0,
            rss_half / 1024.0,
            rss_end / 1024.0,
            middle / 1024.0,
            last_third / 1024.0,
            get("gets"),
            get("failed"),
            get("total"),
            fmt(get("opened")),
            fmt(get("closed")),
            fmt(get("lost")),
            if grew {
                "missed: grew in the last third"
            } else {
                "met"
            }
        );
    }
    md.push_str("\nEvery line (each minute):\n\n");
    for s in &soaks {
        let _ = writeln!(
            md,
            "<details><summary>{}</summary>\n\n| minute | RSS (MiB) | fds | threads | `get()`s | failed | total | opened | closed | lost |\n| --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |",
            s.pool
        );
        for r in &s.rows {
            let v = |name: &str| r[s.column(name)];
            let _ = writeln!(
                md,
                "| {:.0} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} | {} |",
                v("minute"),
                v("rss_kib") / 1024.0,
                v("fds"),
                v("threads"),
                v("gets"),
                v("failed"),
                v("total"),
                fmt(v("opened")),
                fmt(v("closed")),
                fmt(v("lost"))
            );
        }
        md.push_str("\n</details>\n\n");
    }
    println!("{md}");
    if let Some(dir) = out {
        let img = dir.join("img");
        std::fs::create_dir_all(&img).map_err(|e| format!("{}: {e}", img.display()))?;
        for (file, title, column, scale, y) in [
            (
                "soak-rss.svg",
                "Soak: resident memory",
                "rss_kib",
                1024.0,
                "RSS (MiB)",
            ),
            (
                "soak-fds.svg",
                "Soak: open file descriptors",
                "fds",
                1.0,
                "open fds",
            ),
        ] {
            let chart = Chart {
                title: title.to_owned(),
                x_label: "minutes".to_owned(),
                y_label: y.to_owned(),
                panels: soaks
                    .iter()
                    .map(|s| Panel {
                        title: s.pool.clone(),
                        series: vec![Series {
                            name: s.pool.clone(),
                            points: s.series(column, scale),
                        }],
                    })
                    .collect(),
                x_scale: Scale::Linear,
                y_scale: Scale::Linear,
                x_format: crate::svg::plain,
                y_format: crate::svg::plain,
            };
            let path = img.join(file);
            std::fs::write(&path, chart.render()).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

fn fmt(v: f64) -> String {
    if v.is_nan() {
        "–".to_owned()
    } else {
        format!("{v:.0}")
    }
}
