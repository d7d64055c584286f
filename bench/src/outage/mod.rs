//! `bench outage`: the pools against a PostgreSQL that refuses, cuts or
//! blackholes connections (issue 16's fault benchmark).
//!
//! Each pool, in turn, gets a fresh fault proxy ([`Proxy`]) in
//! front of the local PostgreSQL (127.0.0.1:5432, user `postgres`, trust
//! authentication, database `test`) and the issue's load: maxPoolSize 10,
//! a 5 s wait timeout, every other option at the pool's builder default,
//! 50 tasks (threads, for cmap-blocking) looping over `get()` and
//! `select 1`, with a 10 ms pause after an error. A scenario script then
//! switches the proxy's modes while every `get()` is timed.

pub mod adaptive;
pub mod chaos;
pub mod flood;
mod local;
pub mod mongo;
pub mod pg;
pub mod refusals;
pub mod soak;
pub mod third_party;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use cmap_testkit::proxy::{Mode, Proxy};
use pg::{AsyncPgPool, Counters, PgSetup};

const POSTGRES: &str = "127.0.0.1:5432";
const TASKS: usize = 50;
const MAX: u32 = 10;
const WAIT: Duration = Duration::from_secs(5);
const PAUSE: Duration = Duration::from_millis(10);
/// The async load gives up on a query after this long (the guard is then
/// dropped, and the connection goes back to the pool): what lets a
/// blackholed connection reach the pool's check. The synchronous client
/// has no query timeout.
const QUERY_TIMEOUT: Duration = Duration::from_secs(1);
/// No load runs longer than this, whatever the script does.
const HARD_STOP: Duration = Duration::from_secs(120);
/// The outage lengths.
const SHORT_DOWN: Duration = Duration::from_secs(1);
const LONG_DOWN: Duration = Duration::from_secs(8);
const BLACKHOLE: Duration = Duration::from_secs(8);
const WARM: Duration = Duration::from_secs(1);
const AFTER: Duration = Duration::from_secs(2);
/// A `get()` may return this much after its deadline (the issue's target).
const LATE_OK: Duration = Duration::from_millis(2);
/// The spike: requests, hold, maxPoolSize, minPoolSize.
const SPIKE_REQUESTS: usize = 50;
const SPIKE_HOLD: Duration = Duration::from_millis(150);
const SPIKE_MAX: u32 = 50;
const SPIKE_MIN: u32 = 5;
/// The most connect attempts a second a pool may send a refusing server
/// (issue 50: a few a second, as the official drivers' monitors and
/// psycopg_pool's backoff; 1,000 processes at 400 a second are 400,000
/// SYNs a second).
const REFUSED_RATE: f64 = 25.0;
/// The core's default maxConnecting.
const MAX_CONNECTING: u32 = 2;

pub const POOLS: [&str; 4] = ["cmap-tokio", pg::CMAP_BLOCKING, "deadpool", "bb8"];

/// One `get()`.
struct Rec {
    start: Instant,
    end: Instant,
    ok: bool,
    err: Option<String>,
}

/// What the script marked: when the fault began and when it ended.
#[derive(Clone, Copy)]
struct Marks {
    fault: Instant,
    back: Option<Instant>,
}

/// One pool's run of one scenario.
struct Outcome {
    recs: Vec<Rec>,
    query_failures: u64,
    cleared: u64,
    /// Connect attempts that ran to their end: (start, end, success).
    attempts: Vec<(Instant, Instant, bool)>,
    marks: Marks,
}

impl Outcome {
    /// After the return: when the first connect attempt began, the median
    /// time a successful one took, and when the 10th connection was made
    /// (ms from the return).
    fn reconnects(&self, back: Instant) -> [Option<f64>; 3] {
        let after: Vec<&(Instant, Instant, bool)> = self.attempts.iter().filter(|a| a.0 >= back).collect();
        let first = min(after.iter().map(|a| diff_ms(a.0, back)));
        let mut took: Vec<Duration> = after.iter().filter(|a| a.2).map(|a| a.1 - a.0).collect();
        took.sort();
        let median = took.get(took.len().saturating_sub(1) / 2).map(|d| ms(*d));
        let mut ends: Vec<Instant> = after.iter().filter(|a| a.2).map(|a| a.1).collect();
        ends.sort();
        let tenth = ends.get(MAX as usize - 1).map(|e| diff_ms(*e, back));
        [first, median, tenth]
    }
}

fn attempts(counters: &Counters) -> Vec<(Instant, Instant, bool)> {
    counters
        .attempts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scenario {
    ShortDown,
    LongDown,
    Blackhole,
    Cut,
}

impl Scenario {
    fn script(self, proxy: &Proxy) -> Marks {
        std::thread::sleep(WARM);
        let (fault, back) = match self {
            Scenario::ShortDown | Scenario::LongDown => {
                // The server goes away: new connects are refused and the
                // sessions it had are closed.
                let fault = proxy.set(Mode::Refuse);
                proxy.cut();
                std::thread::sleep(if self == Scenario::ShortDown {
                    SHORT_DOWN
                } else {
                    LONG_DOWN
                });
                (fault, Some(proxy.set(Mode::Pass)))
            }
            Scenario::Blackhole => {
                let fault = proxy.set(Mode::Blackhole);
                std::thread::sleep(BLACKHOLE);
                (fault, Some(proxy.set(Mode::Pass)))
            }
            Scenario::Cut => (proxy.cut(), None),
        };
        std::thread::sleep(AFTER);
        Marks { fault, back }
    }
}

fn upstream() -> SocketAddr {
    POSTGRES.parse().expect("a socket address")
}

fn setup(port: u16, round_trip_check: bool) -> PgSetup {
    PgSetup {
        port,
        max: MAX,
        min: 0,
        wait: Some(WAIT),
        round_trip_check,
        counters: Arc::default(),
        application_name: "bench-outage".to_owned(),
        live_port: None,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

async fn load_task<P: AsyncPgPool>(pool: Arc<P>, stop: Arc<AtomicBool>, until: Instant) -> (Vec<Rec>, u64) {
    let mut recs = Vec::new();
    let mut query_failures = 0;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        let start = Instant::now();
        match pool.get().await {
            Ok(conn) => {
                recs.push(Rec {
                    start,
                    end: Instant::now(),
                    ok: true,
                    err: None,
                });
                let done = tokio::time::timeout(QUERY_TIMEOUT, conn.simple_query("select 1")).await;
                drop(conn);
                if !matches!(done, Ok(Ok(_))) {
                    query_failures += 1;
                    tokio::time::sleep(PAUSE).await;
                }
            }
            Err(e) => {
                recs.push(Rec {
                    start,
                    end: Instant::now(),
                    ok: false,
                    err: Some(e),
                });
                tokio::time::sleep(PAUSE).await;
            }
        }
    }
    (recs, query_failures)
}

fn drive_async<P: AsyncPgPool>(scenario: Scenario) -> Outcome {
    let proxy = Proxy::start(upstream()).expect("the fault proxy starts");
    let setup = setup(proxy.port(), scenario == Scenario::Blackhole);
    let rt = runtime();
    let pool = Arc::new(rt.block_on(P::build(&setup)));
    let stop = Arc::new(AtomicBool::new(false));
    let until = Instant::now() + HARD_STOP;
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| rt.spawn(load_task(pool.clone(), stop.clone(), until)))
        .collect();
    let marks = scenario.script(&proxy);
    stop.store(true, Ordering::Relaxed);
    let mut recs = Vec::new();
    let mut query_failures = 0;
    rt.block_on(async {
        for task in tasks {
            if let Ok(Ok((r, q))) = tokio::time::timeout(Duration::from_secs(20), task).await {
                recs.extend(r);
                query_failures += q;
            }
        }
        drop(pool);
    });
    drop(proxy);
    rt.shutdown_timeout(Duration::from_secs(1));
    Outcome {
        recs,
        query_failures,
        cleared: setup.counters.cleared.load(Ordering::Relaxed),
        attempts: attempts(&setup.counters),
        marks,
    }
}

fn drive_blocking(
    scenario: Scenario,
    build: fn(&PgSetup) -> cmap_blocking::Pool<pg::BlockingManager>,
) -> Outcome {
    let proxy = Proxy::start(upstream()).expect("the fault proxy starts");
    let setup = setup(proxy.port(), scenario == Scenario::Blackhole);
    let pool = Arc::new(build(&setup));
    let stop = Arc::new(AtomicBool::new(false));
    let until = Instant::now() + HARD_STOP;
    let threads: Vec<_> = (0..TASKS)
        .map(|_| {
            let (pool, stop) = (pool.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut recs = Vec::new();
                let mut query_failures = 0u64;
                while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                    let start = Instant::now();
                    match pool.get() {
                        Ok(mut conn) => {
                            recs.push(Rec {
                                start,
                                end: Instant::now(),
                                ok: true,
                                err: None,
                            });
                            let ok = conn.simple_query("select 1").is_ok();
                            drop(conn);
                            if !ok {
                                query_failures += 1;
                                std::thread::sleep(PAUSE);
                            }
                        }
                        Err(e) => {
                            recs.push(Rec {
                                start,
                                end: Instant::now(),
                                ok: false,
                                err: Some(e.to_string()),
                            });
                            std::thread::sleep(PAUSE);
                        }
                    }
                }
                (recs, query_failures)
            })
        })
        .collect();
    let marks = scenario.script(&proxy);
    stop.store(true, Ordering::Relaxed);
    let mut recs = Vec::new();
    let mut query_failures = 0;
    for t in threads {
        if let Ok((r, q)) = t.join() {
            recs.extend(r);
            query_failures += q;
        }
    }
    drop(pool);
    drop(proxy);
    Outcome {
        recs,
        query_failures,
        cleared: setup.counters.cleared.load(Ordering::Relaxed),
        attempts: attempts(&setup.counters),
        marks,
    }
}

/// cmap-local's load runs on a thread of its own (its pool is not `Send`).
fn drive_local(scenario: Scenario, adaptive: bool) -> Outcome {
    let proxy = Proxy::start(upstream()).expect("the fault proxy starts");
    let setup = setup(proxy.port(), scenario == Scenario::Blackhole);
    let stop = Arc::new(AtomicBool::new(false));
    let until = Instant::now() + HARD_STOP;
    let load = local::load(setup.clone(), adaptive, TASKS, stop.clone(), until);
    let marks = scenario.script(&proxy);
    stop.store(true, Ordering::Relaxed);
    let (recs, query_failures) = load.join().unwrap_or_default();
    drop(proxy);
    Outcome {
        recs,
        query_failures,
        cleared: setup.counters.cleared.load(Ordering::Relaxed),
        attempts: attempts(&setup.counters),
        marks,
    }
}

fn drive(pool: &str, scenario: Scenario) -> Outcome {
    match pool {
        "cmap-tokio" => drive_async::<pg::CmapTokio>(scenario),
        adaptive::TOKIO => drive_async::<adaptive::CmapTokioAdaptive>(scenario),
        "deadpool" => drive_async::<pg::Deadpool>(scenario),
        "bb8" => drive_async::<pg::Bb8>(scenario),
        adaptive::BLOCKING => drive_blocking(scenario, adaptive::build_blocking),
        local::NAME => drive_local(scenario, false),
        local::ADAPTIVE => drive_local(scenario, true),
        _ => drive_blocking(scenario, pg::build_blocking),
    }
}

/// Connect attempts begun while the server refused, per second of the
/// refusal: what a pool sends a server that is down (the manager's count,
/// the same for every pool).
fn connects_during(o: &Outcome) -> Option<f64> {
    let (fault, back) = (o.marks.fault, o.marks.back?);
    let n = o.attempts.iter().filter(|a| a.0 >= fault && a.0 < back).count();
    Some(n as f64 / (back - fault).as_secs_f64())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `a - b` in ms, negative when `a` is earlier.
fn diff_ms(a: Instant, b: Instant) -> f64 {
    if a >= b {
        ms(a - b)
    } else {
        -ms(b - a)
    }
}

/// The median (the lower middle of an even count); `None` when empty.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len().saturating_sub(1) / 2).copied()
}

fn max(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.fold(None, |m, v| Some(m.map_or(v, |m: f64| m.max(v))))
}

fn min(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.fold(None, |m, v| Some(m.map_or(v, |m: f64| m.min(v))))
}

/// One table: its columns, and for each pool the values of every run.
struct Table {
    title: &'static str,
    what: &'static str,
    columns: Vec<(&'static str, Unit)>,
    /// (pool, runs), each run one value per column.
    rows: Vec<(&'static str, Vec<Vec<Option<f64>>>)>,
    /// The targets, as (column, most allowed, how it is said).
    targets: Vec<(usize, f64, &'static str)>,
    /// A sample error Display per pool (the last run's).
    samples: Vec<(&'static str, String)>,
    /// What the samples are.
    sample_is: &'static str,
}

#[derive(Clone, Copy)]
enum Unit {
    Ms,
    Count,
}

impl Table {
    fn push(&mut self, pool: &'static str, values: Vec<Option<f64>>) {
        match self.rows.iter_mut().find(|(p, _)| *p == pool) {
            Some((_, runs)) => runs.push(values),
            None => self.rows.push((pool, vec![values])),
        }
    }

    fn cell(runs: &[Vec<Option<f64>>], column: usize, unit: Unit) -> String {
        let values: Vec<f64> = runs.iter().filter_map(|r| r[column]).collect();
        let missing = values.len() < runs.len();
        let (Some(lo), Some(hi)) = (min(values.iter().copied()), max(values.iter().copied())) else {
            return "–".to_owned();
        };
        let f = |v: f64| match unit {
            Unit::Ms => format!("{v:.1}"),
            Unit::Count => format!("{v:.0}"),
        };
        let mut s = if f(lo) == f(hi) {
            f(lo)
        } else {
            format!("{}–{}", f(lo), f(hi))
        };
        if missing {
            s.push_str(" (some runs: –)");
        }
        s
    }

    fn verdict(&self, runs: &[Vec<Option<f64>>]) -> String {
        let missed: Vec<&str> = self
            .targets
            .iter()
            .filter(|(column, most, _)| runs.iter().any(|r| r[*column].is_some_and(|v| v > *most)))
            .map(|(_, _, said)| *said)
            .collect();
        if self.targets.is_empty() {
            String::new()
        } else if missed.is_empty() {
            "met".to_owned()
        } else {
            format!("missed: {}", missed.join("; "))
        }
    }

    /// The heading, the description and the table, with its samples.
    fn markdown(&self) -> String {
        format!("{}{}", self.table_markdown(), self.samples_markdown())
    }

    /// The heading, the description and the table, without the samples.
    fn table_markdown(&self) -> String {
        let mut s = format!("### {}\n\n{}\n\n| pool |", self.title, self.what);
        for (name, _) in &self.columns {
            s.push_str(&format!(" {name} |"));
        }
        if !self.targets.is_empty() {
            s.push_str(" targets |");
        }
        s.push_str("\n| --- |");
        for _ in &self.columns {
            s.push_str(" --: |");
        }
        if !self.targets.is_empty() {
            s.push_str(" --- |");
        }
        s.push('\n');
        for (pool, runs) in &self.rows {
            s.push_str(&format!("| {pool} |"));
            for (i, (_, unit)) in self.columns.iter().enumerate() {
                s.push_str(&format!(" {} |", Self::cell(runs, i, *unit)));
            }
            if !self.targets.is_empty() {
                s.push_str(&format!(" {} |", self.verdict(runs)));
            }
            s.push('\n');
        }
        s
    }

    /// The first pool's sample in a block; the pools whose sample reads
    /// the same but for its numbers named after it; every other one
    /// quoted inline. Empty without samples; otherwise it begins with a
    /// blank line and ends with a newline.
    fn samples_markdown(&self) -> String {
        let Some(((first, sample), rest)) = self.samples.split_first() else {
            return String::new();
        };
        let (same, other): (Vec<_>, Vec<_>) = rest
            .iter()
            .partition(|(_, s)| without_numbers(s) == without_numbers(sample));
        let same: Vec<String> = same.iter().map(|(pool, _)| format!("{pool}'s")).collect();
        let same = match same.len() {
            0 => String::new(),
            1 => format!(" ({} reads the same, with its own counts)", same[0]),
            _ => format!(" ({} read the same, with their own counts)", same.join(" and ")),
        };
        let mut s = format!(
            "\n{}, {first}{same}:\n\n```text\n{sample}\n```\n",
            capitalized(self.sample_is)
        );
        if !other.is_empty() {
            let other: Vec<String> = other.iter().map(|(pool, s)| format!("{pool}'s: `{s}`")).collect();
            s.push_str(&format!("\n{}.\n", other.join("; ")));
        }
        s
    }
}

/// `text` with its first letter in upper case.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

/// `text` with every run of digits (and decimal point) replaced by `#`:
/// two errors that differ only in their counts compare equal.
fn without_numbers(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() || (in_number && c == '.') {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

/// Down for less than the wait timeout.
fn short_down(o: &Outcome) -> Vec<Option<f64>> {
    let back = o.marks.back.expect("a return");
    let failed = o.recs.iter().filter(|r| !r.ok).count();
    let waiting: Vec<f64> = o
        .recs
        .iter()
        .filter(|r| r.ok && r.start < back && r.end > back)
        .map(|r| diff_ms(r.end, back))
        .collect();
    let within = waiting.iter().filter(|w| **w <= 20.0).count();
    let [first, took, tenth] = o.reconnects(back);
    vec![
        Some(failed as f64),
        Some(waiting.len() as f64),
        Some(within as f64),
        max(waiting.iter().copied()),
        first,
        took,
        tenth,
        Some(o.query_failures as f64),
        connects_during(o),
    ]
}

/// Down for longer: the failing `get()`s whose deadline fell in the outage.
fn long_down_deadlines(o: &Outcome) -> (Vec<Option<f64>>, Option<String>) {
    let (fault, back) = (o.marks.fault, o.marks.back.expect("a return"));
    let in_outage: Vec<&Rec> = o
        .recs
        .iter()
        .filter(|r| !r.ok && r.start + WAIT >= fault && r.start + WAIT <= back)
        .collect();
    let lateness: Vec<f64> = in_outage.iter().map(|r| diff_ms(r.end, r.start + WAIT)).collect();
    let early = lateness.iter().filter(|l| **l < 0.0).count();
    let sample = in_outage.iter().max_by_key(|r| r.end).and_then(|r| r.err.clone());
    (
        vec![
            Some(in_outage.len() as f64),
            Some(early as f64),
            min(lateness.iter().copied()),
            max(lateness.iter().copied()),
        ],
        sample,
    )
}

/// Down for longer: the recovery.
fn long_down_recovery(o: &Outcome) -> Vec<Option<f64>> {
    let back = o.marks.back.expect("a return");
    let first = min(o
        .recs
        .iter()
        .filter(|r| r.ok && r.end >= back)
        .map(|r| diff_ms(r.end, back)));
    let failed_after = o.recs.iter().filter(|r| !r.ok && r.start >= back).count();
    let failed_during = o.recs.iter().filter(|r| !r.ok && r.start < back).count();
    let [begins, took, _] = o.reconnects(back);
    vec![
        first,
        begins,
        took,
        Some(failed_after as f64),
        Some(failed_during as f64),
        connects_during(o),
    ]
}

/// The blackhole's row.
fn blackhole(o: &Outcome, cmap: bool) -> Vec<Option<f64>> {
    let lateness: Vec<f64> = o.recs.iter().map(|r| diff_ms(r.end, r.start + WAIT)).collect();
    let late = lateness.iter().filter(|l| **l > ms(LATE_OK)).count();
    let failed = o.recs.iter().filter(|r| !r.ok).count();
    vec![
        max(lateness.iter().copied()),
        Some(late as f64),
        Some(failed as f64),
        cmap.then_some(o.cleared as f64),
    ]
}

fn cut(o: &Outcome) -> Vec<Option<f64>> {
    let at = o.marks.fault;
    let failed_after = o.recs.iter().filter(|r| !r.ok && r.start >= at).count();
    vec![Some(failed_after as f64), Some(o.query_failures as f64)]
}

/// One spike on a fresh pool.
struct SpikeRun {
    connect_ms: f64,
    to_min_ms: Option<f64>,
    latencies: Vec<Duration>,
    waits: Vec<Duration>,
    opened: u64,
    failures: usize,
}

fn to_min(build: Instant, counters: &Counters) -> Option<f64> {
    let finished = counters.finished.lock().unwrap_or_else(|e| e.into_inner());
    let mut times: Vec<Instant> = finished.clone();
    times.sort();
    times.get(SPIKE_MIN as usize - 1).map(|t| diff_ms(*t, build))
}

fn spike_setup(port: u16) -> PgSetup {
    PgSetup {
        port,
        max: SPIKE_MAX,
        min: SPIKE_MIN,
        wait: None,
        round_trip_check: false,
        counters: Arc::default(),
        application_name: "bench-outage".to_owned(),
        live_port: None,
    }
}

/// How the proxy slows the spike: each new connection held `connect`
/// before it is forwarded (the delay mode), and every chunk delayed
/// `packet` either way, as over a long link (the latency line).
#[derive(Clone, Copy, Debug, Default)]
pub struct Link {
    pub connect: Duration,
    pub packet: Duration,
}

impl Link {
    pub fn connect(connect: Duration) -> Link {
        Link {
            connect,
            packet: Duration::ZERO,
        }
    }

    pub fn packet(packet: Duration) -> Link {
        Link {
            connect: Duration::ZERO,
            packet,
        }
    }

    /// A fresh fault proxy to PostgreSQL, slowed as this link says.
    fn proxy(self) -> Proxy {
        let proxy = Proxy::start(upstream()).expect("the fault proxy starts");
        if !self.connect.is_zero() {
            proxy.set(Mode::Delay(self.connect));
        }
        if !self.packet.is_zero() {
            proxy.set_latency(self.packet);
        }
        proxy
    }
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "connect delay {} ms, packet delay {} ms",
            self.connect.as_millis(),
            self.packet.as_millis()
        )
    }
}

fn spike_async<P: AsyncPgPool>(link: Link) -> SpikeRun {
    let proxy = link.proxy();
    let rt = runtime();
    let connect_ms = ms(rt.block_on(pg::connect_latency(proxy.port(), 20)));
    let setup = spike_setup(proxy.port());
    let build = Instant::now();
    let pool = Arc::new(rt.block_on(P::build(&setup)));
    std::thread::sleep(Duration::from_secs(1));
    let to_min_ms = to_min(build, &setup.counters);
    let before = setup.counters.started.load(Ordering::Relaxed);
    let results: Vec<(bool, Duration, Duration)> = rt.block_on(async {
        let gate = Arc::new(tokio::sync::Barrier::new(SPIKE_REQUESTS));
        let tasks: Vec<_> = (0..SPIKE_REQUESTS)
            .map(|_| {
                let (pool, gate) = (pool.clone(), gate.clone());
                tokio::spawn(async move {
                    gate.wait().await;
                    let arrived = Instant::now();
                    match pool.get().await {
                        Ok(conn) => {
                            let wait = arrived.elapsed();
                            tokio::time::sleep(SPIKE_HOLD).await;
                            drop(conn);
                            (true, wait, arrived.elapsed())
                        }
                        Err(_) => (false, arrived.elapsed(), arrived.elapsed()),
                    }
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            if let Ok(r) = t.await {
                out.push(r);
            }
        }
        out
    });
    let opened = setup.counters.started.load(Ordering::Relaxed) - before;
    rt.block_on(async move { drop(pool) });
    drop(proxy);
    rt.shutdown_timeout(Duration::from_secs(1));
    spike_run(connect_ms, to_min_ms, results, opened)
}

fn spike_blocking(
    link: Link,
    build_pool: fn(&PgSetup) -> cmap_blocking::Pool<pg::BlockingManager>,
) -> SpikeRun {
    let proxy = link.proxy();
    let connect_ms = {
        let rt = runtime();
        ms(rt.block_on(pg::connect_latency(proxy.port(), 20)))
    };
    let setup = spike_setup(proxy.port());
    let build = Instant::now();
    let pool = Arc::new(build_pool(&setup));
    std::thread::sleep(Duration::from_secs(1));
    let to_min_ms = to_min(build, &setup.counters);
    let before = setup.counters.started.load(Ordering::Relaxed);
    let gate = Arc::new(Barrier::new(SPIKE_REQUESTS));
    let threads: Vec<_> = (0..SPIKE_REQUESTS)
        .map(|_| {
            let (pool, gate) = (pool.clone(), gate.clone());
            std::thread::spawn(move || {
                gate.wait();
                let arrived = Instant::now();
                match pool.get() {
                    Ok(conn) => {
                        let wait = arrived.elapsed();
                        std::thread::sleep(SPIKE_HOLD);
                        drop(conn);
                        (true, wait, arrived.elapsed())
                    }
                    Err(_) => (false, arrived.elapsed(), arrived.elapsed()),
                }
            })
        })
        .collect();
    let results = threads.into_iter().filter_map(|t| t.join().ok()).collect();
    let opened = setup.counters.started.load(Ordering::Relaxed) - before;
    drop(pool);
    drop(proxy);
    spike_run(connect_ms, to_min_ms, results, opened)
}

fn spike_run(
    connect_ms: f64,
    to_min_ms: Option<f64>,
    results: Vec<(bool, Duration, Duration)>,
    opened: u64,
) -> SpikeRun {
    let mut run = SpikeRun {
        connect_ms,
        to_min_ms,
        latencies: Vec::new(),
        waits: Vec::new(),
        opened,
        failures: 0,
    };
    for (ok, wait, latency) in results {
        if ok {
            run.waits.push(wait);
            run.latencies.push(latency);
        } else {
            run.failures += 1;
        }
    }
    run
}

fn percentile(values: &[Duration], p: f64) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort();
    if v.is_empty() {
        return None;
    }
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    Some(ms(v[i]))
}

/// The p50 and p99 latency (ms) of the best a pool paced by maxConnecting
/// can do in the spike: `min` connections ready at the burst, a new
/// establishment started the instant a slot frees while the waiters
/// outnumber the connects in flight, every connection handed at once to
/// the next waiter, each request holding it `hold`.
fn paced_model(connect: f64, hold: f64) -> (f64, f64) {
    let (mut idle, mut total) = (SPIKE_MIN, SPIKE_MIN);
    let mut waiting = SPIKE_REQUESTS;
    let mut pending: Vec<f64> = Vec::new();
    let mut releases: Vec<f64> = Vec::new();
    let mut latencies: Vec<Duration> = Vec::new();
    let mut t = 0.0;
    // Bounded: every turn serves a request or consumes an event.
    for _ in 0..10 * SPIKE_REQUESTS {
        while waiting > 0 && idle > 0 {
            idle -= 1;
            waiting -= 1;
            latencies.push(Duration::from_secs_f64((t + hold) / 1e3));
            releases.push(t + hold);
        }
        while waiting > pending.len() && pending.len() < MAX_CONNECTING as usize && total < SPIKE_MAX {
            pending.push(t + connect);
            total += 1;
        }
        if waiting == 0 {
            break;
        }
        let next = |v: &Vec<f64>| v.iter().copied().enumerate().min_by(|a, b| a.1.total_cmp(&b.1));
        match (next(&pending), next(&releases)) {
            (Some((i, p)), r) if r.is_none_or(|(_, r)| p <= r) => {
                t = p;
                pending.swap_remove(i);
            }
            (_, Some((i, r))) => {
                t = r;
                releases.swap_remove(i);
            }
            (_, None) => break,
        }
        idle += 1;
    }
    (
        percentile(&latencies, 0.5).unwrap_or_default(),
        percentile(&latencies, 0.99).unwrap_or_default(),
    )
}

/// The columns of a spike's table, in the order [`spike`] gives its
/// values.
fn spike_columns() -> Vec<(&'static str, Unit)> {
    vec![
        ("connect (ms)", Unit::Ms),
        ("p50 (ms)", Unit::Ms),
        ("p99 (ms)", Unit::Ms),
        ("paced model p50 (ms)", Unit::Ms),
        ("paced model p99 (ms)", Unit::Ms),
        ("wait p50 (ms)", Unit::Ms),
        ("opened", Unit::Count),
        ("failed", Unit::Count),
        ("build to minPoolSize (ms)", Unit::Ms),
        ("over target (ms)", Unit::Ms),
        ("over paced target (ms)", Unit::Ms),
    ]
}

fn spike(pool: &str, link: Link) -> Vec<Option<f64>> {
    let r = match pool {
        "cmap-tokio" => spike_async::<pg::CmapTokio>(link),
        "deadpool" => spike_async::<pg::Deadpool>(link),
        "bb8" => spike_async::<pg::Bb8>(link),
        adaptive::TOKIO => spike_async::<adaptive::CmapTokioAdaptive>(link),
        adaptive::BLOCKING => spike_blocking(link, adaptive::build_blocking),
        _ => spike_blocking(link, pg::build_blocking),
    };
    let native_min = pool != "deadpool";
    let (model_p50, model_p99) = paced_model(r.connect_ms, ms(SPIKE_HOLD));
    // The paced model is maxConnecting's: not the adaptive pace's.
    let cmap = pool.starts_with("cmap") && !adaptive::is_adaptive(pool);
    // The issue's target, and the same with whole rounds of maxConnecting
    // connects (5 connections at 2 at a time take 3 connects' time).
    let target = (f64::from(SPIKE_MIN) / f64::from(MAX_CONNECTING)) * r.connect_ms + 10.0;
    let paced = f64::from(SPIKE_MIN.div_ceil(MAX_CONNECTING)) * r.connect_ms + 10.0;
    vec![
        Some(r.connect_ms),
        percentile(&r.latencies, 0.5),
        percentile(&r.latencies, 0.99),
        cmap.then_some(model_p50),
        cmap.then_some(model_p99),
        percentile(&r.waits, 0.5),
        Some(r.opened as f64),
        Some(r.failures as f64),
        if native_min { r.to_min_ms } else { None },
        if native_min {
            r.to_min_ms.map(|t| t - target)
        } else {
            None
        },
        if native_min {
            r.to_min_ms.map(|t| t - paced)
        } else {
            None
        },
    ]
}

/// The spike's label for `link`, in the list and the rows of the spikes'
/// table.
fn spike_title(link: Link) -> &'static str {
    if !link.packet.is_zero() {
        "long link"
    } else if !link.connect.is_zero() {
        "slowed connects"
    } else {
        "direct"
    }
}

/// The spikes' tables as one (they share their columns and targets): each
/// spike described in a list, then a row per spike and pool. Empty
/// without a spike.
fn spikes_markdown(spikes: &[Table]) -> String {
    let Some(first) = spikes.first() else {
        return String::new();
    };
    let mut s = String::from("### Spike\n\n");
    for t in spikes {
        s.push_str(&format!("- **{}**: {}\n", t.title, t.what));
    }
    s.push_str("\n| spike | pool |");
    for (name, _) in &first.columns {
        s.push_str(&format!(" {name} |"));
    }
    s.push_str(" targets |\n| --- | --- |");
    s.push_str(&" --: |".repeat(first.columns.len()));
    s.push_str(" --- |\n");
    for t in spikes {
        for (pool, runs) in &t.rows {
            s.push_str(&format!("| {} | {pool} |", t.title));
            for (i, (_, unit)) in t.columns.iter().enumerate() {
                s.push_str(&format!(" {} |", Table::cell(runs, i, *unit)));
            }
            s.push_str(&format!(" {} |\n", t.verdict(runs)));
        }
    }
    s
}

/// What the spike over a long link is.
const SPIKE_OVER_A_LONG_LINK: &str = "The same, with the proxy delaying every packet either way by the \
     latency the command names (`--packet-delay-ms`), in order and without a stall, as over a long link: a \
     connect (PostgreSQL's startup, one round trip with trust authentication) takes twice that.";

/// The command's options.
pub struct OutageOptions {
    pub runs: usize,
    pub pools: Vec<String>,
    pub spike_delays: Vec<Duration>,
    /// Spikes over a long link: the proxy delaying every packet this long.
    pub packet_delays: Vec<Duration>,
    pub out: Option<std::path::PathBuf>,
    pub args: Vec<String>,
}

fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

pub fn run(o: &OutageOptions) -> Result<(), String> {
    let began = Instant::now();
    let pools: Vec<&'static str> = POOLS
        .iter()
        .copied()
        .filter(|p| o.pools.iter().any(|n| n == p))
        .collect();
    if pools.is_empty() {
        return Err(format!("no pool selected; the pools are {}", POOLS.join(", ")));
    }
    std::net::TcpStream::connect_timeout(&upstream(), Duration::from_secs(2))
        .map_err(|e| format!("PostgreSQL at {POSTGRES}: {e}"))?;
    let mut loads = vec![uptime()];
    let mut short = Table {
        title: "Server down for less than the wait timeout",
        what: "Refused (sessions closed) for 1 s. Times from the return: *served after return*, the latest of the \
               `get()`s *waiting at return*; the connect columns, from the manager's attempts. *failed*: in the run \
               (target 0); *query failures*: `select 1` on closed sessions; *connects during the outage*: per \
               second (target ≤ 25).",
        columns: vec![
            ("failed", Unit::Count),
            ("waiting at return", Unit::Count),
            ("of them served ≤ 20 ms", Unit::Count),
            ("served after return (ms, latest)", Unit::Ms),
            ("first connect begins (ms)", Unit::Ms),
            ("a connect takes (ms, median)", Unit::Ms),
            ("10th connection made (ms)", Unit::Ms),
            ("query failures", Unit::Count),
            ("connects during the outage (/s)", Unit::Count),
        ],
        rows: Vec::new(),
        targets: vec![
            (0, 0.0, "failed checkouts"),
            (8, REFUSED_RATE, "more than 25 connects a second during the outage"),
        ],
        samples: Vec::new(),
        sample_is: "the last failing `get()`'s error",
    };
    let mut deadlines = Table {
        title: "Server down for longer than the wait timeout: deadlines",
        what: "Refused (sessions closed) for 8 s: the failed `get()`s whose deadline fell in the outage, how many \
               failed before it (target 0), and their return relative to it (target 0 to +2 ms).",
        columns: vec![
            ("failed in outage", Unit::Count),
            ("before deadline", Unit::Count),
            ("vs deadline, earliest (ms)", Unit::Ms),
            ("vs deadline, latest (ms)", Unit::Ms),
        ],
        rows: Vec::new(),
        targets: vec![(1, 0.0, "failed before the deadline"), (3, ms(LATE_OK), "returned > 2 ms late")],
        samples: Vec::new(),
        sample_is: "the last failing `get()`'s error",
    };
    let mut hole = Table {
        title: "Blackhole, with a round-trip check",
        what: "For 8 s the proxy forwards nothing; every pool's checkout check runs `select 1`, and the async load \
               abandons a query after 1 s, leaving the next `get()` to check the connection. *latest vs deadline*: \
               of any `get()` (target ≤ +2 ms); *cleared*: `ConnectionPoolCleared` events.",
        columns: vec![
            ("latest vs deadline (ms)", Unit::Ms),
            ("late > 2 ms", Unit::Count),
            ("failed", Unit::Count),
            ("cleared", Unit::Count),
        ],
        rows: Vec::new(),
        targets: vec![(0, ms(LATE_OK), "a get() returned > 2 ms late")],
        samples: Vec::new(),
        sample_is: "the last failing `get()`'s error",
    };
    let mut cuts = Table {
        title: "Cut",
        what: "Every session closed at once: failed `get()`s begun after the cut (target 0); `select 1` failures on \
               the cut sessions.",
        columns: vec![("failed after cut", Unit::Count), ("query failures", Unit::Count)],
        rows: Vec::new(),
        targets: vec![(0, 0.0, "failures after the cut")],
        samples: Vec::new(),
        sample_is: "the last failing `get()`'s error",
    };
    let spike_columns = spike_columns();
    let links: Vec<Link> = o
        .spike_delays
        .iter()
        .map(|d| Link::connect(*d))
        .chain(o.packet_delays.iter().map(|d| Link::packet(*d)))
        .collect();
    let mut spikes: Vec<Table> = links
        .iter()
        .map(|link| Table {
            title: spike_title(*link),
            what: if link.connect.is_zero() && link.packet.is_zero() {
                "maxPoolSize 50, minPoolSize 5 (deadpool has none), other options default; 1 s after `build`, 50 \
                 requests at once, each holding its connection 150 ms. *connect*: median; *p50/p99*: arrival to \
                 release; *paced model*: the best at 2 connects at a time; *opened*: by the burst; *build to \
                 minPoolSize*: to the 5th connect's end; *over target*: that minus (minPoolSize ÷ maxConnecting) × \
                 connect + 10 ms; *over paced target*: the same with ⌈minPoolSize ÷ maxConnecting⌉; negative: met."
            } else if link.packet.is_zero() {
                "The same, the proxy delaying each new connection before forwarding it."
            } else {
                SPIKE_OVER_A_LONG_LINK
            },
            columns: spike_columns.clone(),
            rows: Vec::new(),
            targets: vec![
                (9, 0.0, "minPoolSize later than the issue's target"),
                (10, 0.0, "minPoolSize later than the paced target"),
            ],
            samples: Vec::new(),
            sample_is: "",
        })
        .collect();
    for run in 1..=o.runs {
        eprintln!("run {run}/{} (load {})", o.runs, uptime());
        for &pool in &pools {
            let cmap = pool.starts_with("cmap");
            eprintln!("  {pool}: down {} s", SHORT_DOWN.as_secs());
            let out = drive(pool, Scenario::ShortDown);
            let row = short_down(&out);
            eprintln!("    {row:?}");
            short.push(pool, row);

            eprintln!("  {pool}: down {} s", LONG_DOWN.as_secs());
            let out = drive(pool, Scenario::LongDown);
            let (row, sample) = long_down_deadlines(&out);
            eprintln!("    {row:?}");
            deadlines.push(pool, row);
            if let Some(sample) = sample {
                deadlines.samples.retain(|(p, _)| *p != pool);
                deadlines.samples.push((pool, sample));
            }
            // The recovery is `outage --refuse-only`'s table (refusals.rs).
            eprintln!("    {:?}", long_down_recovery(&out));

            eprintln!("  {pool}: blackhole {} s", BLACKHOLE.as_secs());
            let out = drive(pool, Scenario::Blackhole);
            let row = blackhole(&out, cmap);
            eprintln!("    {row:?}");
            hole.push(pool, row);

            eprintln!("  {pool}: cut");
            let out = drive(pool, Scenario::Cut);
            let row = cut(&out);
            eprintln!("    {row:?}");
            cuts.push(pool, row);

            for (table, link) in spikes.iter_mut().zip(&links) {
                eprintln!("  {pool}: spike ({link})");
                let row = spike(pool, *link);
                eprintln!("    {row:?}");
                table.push(pool, row);
            }
        }
        loads.push(uptime());
    }
    let mut body = vec![
        short.markdown(),
        deadlines.markdown(),
        hole.markdown(),
        cuts.markdown(),
    ];
    if !spikes.is_empty() {
        body.push(spikes_markdown(&spikes));
    }
    let body = body.join("\n");
    let secs = began.elapsed().as_secs_f64();
    println!("{body}");
    println!(
        "load averages (1, 5, 15 min) at the start and after each run: {}",
        loads.join(" / ")
    );
    println!("took {secs:.0} s");
    if let Some(dir) = &o.out {
        let path = dir.join("reliability.md");
        let text = document(o, &body, &loads, secs, &path);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Where the hand-written part of docs/reliability.md begins: everything
/// from this line on is kept when the figures are written again.
const NOTES: &str = "<!-- Hand-written from here on: `bench outage --out docs` keeps it. -->";

fn document(o: &OutageOptions, body: &str, loads: &[String], secs: f64, path: &Path) -> String {
    let notes = std::fs::read_to_string(path)
        .ok()
        .and_then(|old| old.find(NOTES).map(|i| old[i..].to_owned()))
        .unwrap_or_else(|| format!("{NOTES}\n\n## Notes\n"));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "# Reliability: the pools when the server misbehaves\n\n\
         How checkouts fare when PostgreSQL refuses connections, drops them or stops answering: cmap-tokio and \
         cmap-blocking beside deadpool 0.13 and bb8 0.9 (issues 16 and 50).\n\n\
         ## How it is measured\n\n\
         `bench outage` switches a TCP fault proxy (`bench/src/outage/proxy.rs`, loopback) in front of \
         PostgreSQL (127.0.0.1:5432, trust authentication) while the load runs: it passes, refuses (listener \
         closed), cuts (closes every session), blackholes (accepts, forwards nothing) or delays new \
         connections.\n\n\
         The load is a new user's: maxPoolSize 10, a 5 s wait timeout, other options at the builder's defaults, 50 \
         tasks looping over `get()` and `select 1`, pausing 10 ms after an error (`tokio-postgres` on a 2-worker \
         tokio runtime; cmap-blocking: the `postgres` crate on 50 threads). One manager for every pool \
         (`bench/src/outage/pg.rs`): connect, refuse a closed session on checkout (blackhole: a `select 1` round \
         trip instead, within the checkout's deadline). Each pool runs alone with a fresh proxy, each scenario \
         {runs} times: a cell is the minimum–maximum of the {runs} runs; *targets* judges the worst run by issues \
         16 and 50 ([recovery](#connects-during-an-outage)).\n\n\
         ```sh\ncargo run --release -p bench -- outage --out docs\n```\n\n\
         This run: `bench {args}`, {secs:.0} s, {cores} shared cores, load average {load}: milliseconds include a \
         loaded machine's scheduling delay. The refusal is the proxy's: a real server that goes down may leave \
         connects hanging instead (the blackhole).\n\n\
         ## Figures\n\n{body}\n{notes}",
        runs = o.runs,
        args = o.args.join(" "),
        load = mongo::load_range(loads),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMED_OUT: &str = "Timed out while checking out a Connection from connection pool after 5000 ms \
                             (maxPoolSize 10, total 0, idle 0, in use 0, connecting 0, waiting 41)";

    #[test]
    fn samples_alike_but_for_their_counts_are_named_others_quoted() {
        let t = Table {
            title: "t",
            what: "w",
            columns: Vec::new(),
            rows: Vec::new(),
            targets: Vec::new(),
            samples: vec![
                ("cmap-tokio", TIMED_OUT.to_owned()),
                (
                    pg::CMAP_BLOCKING,
                    TIMED_OUT.replace("total 0", "total 2").replace("41", "7"),
                ),
                (
                    "deadpool",
                    "Error occurred while creating a new object".to_owned(),
                ),
                ("bb8", "Timed out in bb8".to_owned()),
            ],
            sample_is: "the last failing `get()`'s error",
        };
        assert_eq!(
            t.samples_markdown(),
            format!(
                "\nThe last failing `get()`'s error, cmap-tokio ({}'s reads the same, with its own counts):\n\n\
                 ```text\n{TIMED_OUT}\n```\n\ndeadpool's: `Error occurred while creating a new object`; bb8's: \
                 `Timed out in bb8`.\n",
                pg::CMAP_BLOCKING
            )
        );
    }
}
