//! `bench outage --chaos --seed S --minutes M` (issue 34): a random
//! schedule of faults, drawn from the seed, applied to the four
//! PostgreSQL pools and the MongoDB pair at once while the usual load
//! runs on each.
//!
//! Every pool (cmap-tokio, cmap-blocking, deadpool, bb8; cmap-mongodb and
//! the official driver, on FerretDB: [`mongo`]) gets its own fault
//! proxy ([`Route`]) and the load of `bench outage` (maxPoolSize 10, 5 s
//! wait timeout, 50 tasks looping over `get()` and `select 1`, 10 ms
//! pause after an error); one scheduler thread applies each step to every
//! proxy in turn, so the pools live through the same faults at the same
//! time. The steps are refuse (listener closed, sessions closed: the
//! server went away), cut (sessions closed, new ones accepted),
//! blackhole, delay (new connections held 10 ms to 1 s before they are
//! forwarded) and pass, each 50 ms to 8 s long (log-uniform), then 10 s
//! of pass for the pools to settle. The schedule is printed first, so that
//! a failing seed can be replayed.
//!
//! Checked while it runs, per pool: `get()`s that returned later than their
//! deadline + 5 ms, `get()`s still running 1 s after their deadline (hung),
//! failed checkouts begun in a pass period longer than 1 s and failed
//! before it ended, the time from each return of the server (a pass period
//! after refuse or blackhole) to the first success, panics, and the pool's
//! total against maxPoolSize every 100 ms; at the end, the server's own
//! count of the pool's sessions (`pg_stat_activity`, by
//! `application_name`; FerretDB's open connections) against the pool's
//! count, and again after the pool is dropped.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cmap_testkit::proxy::{Mode, Proxy};

use super::pg::{self, AsyncPgPool, PgSetup};
use crate::fleet::rng::Rng;

mod mongo;

pub const POOLS: [&str; 4] = ["cmap-tokio", pg::CMAP_BLOCKING, "deadpool", "bb8"];
pub const TASKS: usize = 50;
const MAX: u32 = 10;
const WAIT: Duration = Duration::from_secs(5);
const PAUSE: Duration = Duration::from_millis(10);
const QUERY_TIMEOUT: Duration = Duration::from_secs(1);
/// A `get()` may return this much after its deadline (issue 34).
const LATE_OK: Duration = Duration::from_millis(5);
/// A `get()` still running this long after its deadline hangs.
const HUNG: Duration = Duration::from_secs(1);
/// A step lasts from `SHORTEST` to `LONGEST`, log-uniform.
const SHORTEST: Duration = Duration::from_millis(50);
const LONGEST: Duration = Duration::from_secs(8);
/// A delay step holds new connections this long, log-uniform.
const DELAY_MIN: Duration = Duration::from_millis(10);
const DELAY_MAX: Duration = Duration::from_secs(1);
/// Pass before the first step and after the last.
const WARM: Duration = Duration::from_secs(2);
const SETTLE: Duration = Duration::from_secs(10);
/// A pass period longer than this must see no failed checkout.
const LONG_PASS: Duration = Duration::from_secs(1);
/// The project's fault proxy stops by itself after 300 s: a step renews
/// it (a new proxy, the old one dropped: its sessions closed, as a cut)
/// at the first refuse or cut once it is this old, and at any step once
/// it is `RENEW_BY` old.
const RENEW_AFTER: Duration = Duration::from_secs(200);
const RENEW_BY: Duration = Duration::from_secs(260);
const SAMPLE: Duration = Duration::from_millis(100);
const POSTGRES: &str = "127.0.0.1:5432";

/// What the proxies do during one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Pass,
    /// Refused, and the sessions closed: the server went away.
    Refuse,
    /// The sessions closed, new ones accepted.
    Cut,
    Blackhole,
    Delay(Duration),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Pass => f.write_str("pass"),
            Fault::Refuse => f.write_str("refuse"),
            Fault::Cut => f.write_str("cut"),
            Fault::Blackhole => f.write_str("blackhole"),
            Fault::Delay(d) => write!(f, "delay({} ms)", d.as_millis()),
        }
    }
}

/// One step of the schedule.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// From the start of the schedule.
    pub at: Duration,
    pub fault: Fault,
    pub length: Duration,
    /// The proxy is renewed as the step begins.
    pub renew: bool,
}

fn log_uniform(rng: &mut Rng, lo: Duration, hi: Duration) -> Duration {
    let (lo, hi) = (lo.as_secs_f64(), hi.as_secs_f64());
    Duration::from_secs_f64(lo * (hi / lo).powf(rng.unit())).max(Duration::from_millis(1))
}

/// The schedule of `seed`: random steps for `length`, then `SETTLE` of
/// pass.
pub fn schedule(seed: u64, length: Duration) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut steps = Vec::new();
    let mut at = Duration::ZERO;
    // The proxies are started `WARM` before the first step.
    let mut age = WARM;
    let mut push = |at: &mut Duration, fault: Fault, length: Duration| {
        let renew = (age >= RENEW_AFTER && matches!(fault, Fault::Refuse | Fault::Cut)) || age >= RENEW_BY;
        if renew {
            age = Duration::ZERO;
        }
        age += length;
        steps.push(Step {
            at: *at,
            fault,
            length,
            renew,
        });
        *at += length;
    };
    while at < length {
        let fault = match rng.next_u64() % 5 {
            0 => Fault::Pass,
            1 => Fault::Refuse,
            2 => Fault::Cut,
            3 => Fault::Blackhole,
            _ => Fault::Delay(log_uniform(&mut rng, DELAY_MIN, DELAY_MAX)),
        };
        let length = log_uniform(&mut rng, SHORTEST, LONGEST);
        push(&mut at, fault, length);
    }
    push(&mut at, Fault::Pass, SETTLE);
    steps
}

/// The schedule as printed: one step a line, and the time in each fault.
pub fn describe(steps: &[Step]) -> String {
    let mut s = String::new();
    for (i, step) in steps.iter().enumerate() {
        s.push_str(&format!(
            "  #{i:<4} at {:>8.3} s  {:<16} {:>6} ms{}\n",
            step.at.as_secs_f64(),
            step.fault.to_string(),
            step.length.as_millis(),
            if step.renew { "  (proxy renewed)" } else { "" }
        ));
    }
    s.push_str(&format!("  {}\n", summary(steps)));
    s
}

/// Steps and seconds per kind of fault.
pub fn summary(steps: &[Step]) -> String {
    let kinds = ["pass", "refuse", "cut", "blackhole", "delay"];
    let mut parts = Vec::new();
    for kind in kinds {
        let of: Vec<&Step> = steps
            .iter()
            .filter(|s| s.fault.to_string().starts_with(kind))
            .collect();
        let secs: f64 = of.iter().map(|s| s.length.as_secs_f64()).sum();
        parts.push(format!("{kind} {} ({secs:.0} s)", of.len()));
    }
    let renewals = steps.iter().filter(|s| s.renew).count();
    format!(
        "{} steps: {}; proxies renewed {renewals} times",
        steps.len(),
        parts.join(", ")
    )
}

/// The load averages (1, 5, 15 min).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

fn upstream() -> std::net::SocketAddr {
    POSTGRES.parse().expect("a socket address")
}

/// A pool's way to its server: the project's fault proxy, renewed before
/// it reaches its 300 s lifetime; the managers read the port from `port`.
/// A route whose clients cannot follow a new port ([`Route::fixed`]) keeps
/// one proxy for the whole run, and a renewal is a cut there.
pub struct Route {
    proxy: Proxy,
    pub port: Arc<AtomicU16>,
    upstream: std::net::SocketAddr,
    fixed: bool,
}

impl Route {
    /// To PostgreSQL, renewed as the schedule says.
    pub fn start() -> Route {
        let proxy = Proxy::start(upstream()).expect("the fault proxy starts");
        Route::of(proxy, upstream(), false)
    }

    /// To `upstream`, one proxy living `lifetime`.
    pub fn fixed(upstream: std::net::SocketAddr, lifetime: Duration) -> Route {
        let proxy = Proxy::start_for(upstream, lifetime).expect("the fault proxy starts");
        Route::of(proxy, upstream, true)
    }

    fn of(proxy: Proxy, upstream: std::net::SocketAddr, fixed: bool) -> Route {
        let port = Arc::new(AtomicU16::new(proxy.port()));
        Route {
            proxy,
            port,
            upstream,
            fixed,
        }
    }

    /// Applies `fault`, on a new proxy when `renew` (the old one is then
    /// dropped, which closes its sessions; on a fixed route: the sessions
    /// cut); returns when it took effect.
    pub fn apply(&mut self, fault: Fault, renew: bool) -> Instant {
        if renew && self.fixed {
            let at = Self::set(&self.proxy, fault);
            self.proxy.cut();
            return at;
        }
        if renew {
            let fresh = Proxy::start(self.upstream).expect("the fault proxy starts");
            Self::set(&fresh, fault);
            self.port.store(fresh.port(), Ordering::Relaxed);
            drop(std::mem::replace(&mut self.proxy, fresh));
            return Instant::now();
        }
        Self::set(&self.proxy, fault)
    }

    fn set(proxy: &Proxy, fault: Fault) -> Instant {
        match fault {
            Fault::Pass => proxy.set(Mode::Pass),
            Fault::Refuse => {
                let at = proxy.set(Mode::Refuse);
                proxy.cut();
                at
            }
            Fault::Cut => {
                proxy.set(Mode::Pass);
                proxy.cut()
            }
            Fault::Blackhole => proxy.set(Mode::Blackhole),
            Fault::Delay(d) => proxy.set(Mode::Delay(d)),
        }
    }

    /// A cut: the proxy renewed when it is older than `RENEW_AFTER`.
    pub fn cut(&mut self, born: &mut Instant) -> Instant {
        let renew = born.elapsed() >= RENEW_AFTER;
        if renew {
            *born = Instant::now();
        }
        self.apply(Fault::Cut, renew)
    }
}

/// The setup of one pool: its application name (`{app}-{name}`), its
/// live port.
pub fn setup(app: &str, name: &str, route: &Route, round_trip_check: bool) -> PgSetup {
    PgSetup {
        port: route.port.load(Ordering::Relaxed),
        max: MAX,
        min: 0,
        wait: Some(WAIT),
        round_trip_check,
        counters: Arc::default(),
        application_name: format!("{app}-{name}"),
        live_port: Some(route.port.clone()),
    }
}

/// What is checked of one pool while the schedule runs.
pub struct Probe {
    pub name: &'static str,
    base: Instant,
    /// The step now running (set by the scheduler).
    step: Arc<AtomicUsize>,
    /// Per step: whether a failed checkout begun in it counts (a pass
    /// period longer than `LONG_PASS`).
    long_pass: Vec<bool>,
    /// Per step: the first success that ended in it (ns from `base` + 1).
    first_ok: Vec<AtomicU64>,
    /// Per task: when its `get()` in flight began (ns from `base` + 1; 0:
    /// none), and the last one found hung.
    in_flight: Vec<AtomicU64>,
    flagged: Vec<AtomicU64>,
    gets: AtomicU64,
    failed: AtomicU64,
    late: AtomicU64,
    /// The latest return relative to the deadline, µs.
    latest_us: AtomicI64,
    latest: Mutex<String>,
    failed_in_pass: AtomicU64,
    failed_in_pass_sample: Mutex<Option<String>>,
    /// That failure's start and end.
    failed_in_pass_at: Mutex<Option<(Instant, Instant)>>,
    hung: AtomicU64,
    pub query_failures: AtomicU64,
    panics: AtomicU64,
    samples: AtomicU64,
    over_max: AtomicU64,
    max_total: AtomicUsize,
}

impl Probe {
    pub fn new(
        name: &'static str,
        base: Instant,
        step: Arc<AtomicUsize>,
        steps: &[Step],
        tasks: usize,
    ) -> Probe {
        Probe {
            name,
            base,
            step,
            long_pass: steps
                .iter()
                .map(|s| s.fault == Fault::Pass && s.length > LONG_PASS)
                .collect(),
            first_ok: steps.iter().map(|_| AtomicU64::new(0)).collect(),
            in_flight: (0..tasks).map(|_| AtomicU64::new(0)).collect(),
            flagged: (0..tasks).map(|_| AtomicU64::new(0)).collect(),
            gets: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            late: AtomicU64::new(0),
            latest_us: AtomicI64::new(i64::MIN),
            latest: Mutex::new(String::new()),
            failed_in_pass: AtomicU64::new(0),
            failed_in_pass_sample: Mutex::new(None),
            failed_in_pass_at: Mutex::new(None),
            hung: AtomicU64::new(0),
            query_failures: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            samples: AtomicU64::new(0),
            over_max: AtomicU64::new(0),
            max_total: AtomicUsize::new(0),
        }
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_nanos() as u64 + 1
    }

    /// A `get()` begins: its instant and the step it began in.
    pub fn begin(&self, task: usize) -> (Instant, usize) {
        let start = Instant::now();
        self.in_flight[task].store(self.ns(start), Ordering::Relaxed);
        (start, self.step.load(Ordering::Relaxed))
    }

    /// A `get()` returned.
    pub fn end(&self, task: usize, (start, began): (Instant, usize), result: Result<(), String>) {
        let end = Instant::now();
        self.in_flight[task].store(0, Ordering::Relaxed);
        let now_step = self.step.load(Ordering::Relaxed);
        self.gets.fetch_add(1, Ordering::Relaxed);
        let deadline = start + WAIT;
        let vs_us = if end >= deadline {
            (end - deadline).as_micros() as i64
        } else {
            -((deadline - end).as_micros() as i64)
        };
        if end > deadline + LATE_OK {
            self.late.fetch_add(1, Ordering::Relaxed);
        }
        if self.latest_us.fetch_max(vs_us, Ordering::Relaxed) < vs_us {
            let what = match &result {
                Ok(()) => "a success".to_owned(),
                Err(e) => e.clone(),
            };
            *self.latest.lock().unwrap_or_else(|e| e.into_inner()) =
                format!("{:+.1} ms after its deadline: {what}", vs_us as f64 / 1e3);
        }
        match result {
            Ok(()) => {
                let slot = &self.first_ok[now_step.min(self.first_ok.len() - 1)];
                let _ = slot.compare_exchange(0, self.ns(end), Ordering::Relaxed, Ordering::Relaxed);
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                if self.long_pass.get(began).copied().unwrap_or(false) && now_step == began {
                    self.failed_in_pass.fetch_add(1, Ordering::Relaxed);
                    let mut sample = self
                        .failed_in_pass_sample
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    if sample.is_none() {
                        *sample = Some(format!("step #{began}: {e}"));
                        *self.failed_in_pass_at.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some((start, end));
                    }
                }
            }
        }
    }

    /// `get()`s returned, failed, later than deadline + 5 ms, and hung.
    pub fn counts(&self) -> [u64; 4] {
        [&self.gets, &self.failed, &self.late, &self.hung].map(|c| c.load(Ordering::Relaxed))
    }

    /// The periodic check: `get()`s that hang, the pool's total.
    pub fn sample(&self, total: usize) {
        let now = self.ns(Instant::now());
        let hung = (WAIT + HUNG).as_nanos() as u64;
        for (slot, flagged) in self.in_flight.iter().zip(&self.flagged) {
            let began = slot.load(Ordering::Relaxed);
            if began != 0
                && now.saturating_sub(began) > hung
                && flagged.swap(began, Ordering::Relaxed) != began
            {
                self.hung.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.samples.fetch_add(1, Ordering::Relaxed);
        self.max_total.fetch_max(total, Ordering::Relaxed);
        if total > MAX as usize {
            self.over_max.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The pools' names for the panic hook: a panic on a thread whose name
/// contains one is counted against it.
static PANICS: OnceLock<Vec<Arc<Probe>>> = OnceLock::new();
static OTHER_PANICS: AtomicU64 = AtomicU64::new(0);

fn count_panics(probes: Vec<Arc<Probe>>) {
    if PANICS.set(probes).is_err() {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("");
        // The longest name the thread's contains: `chaos-cmap-mongodb`
        // is cmap-mongodb's, not mongodb's.
        match PANICS.get().and_then(|probes| {
            probes
                .iter()
                .filter(|p| name.contains(p.name))
                .max_by_key(|p| p.name.len())
        }) {
            Some(p) => p.panics.fetch_add(1, Ordering::Relaxed),
            None => OTHER_PANICS.fetch_add(1, Ordering::Relaxed),
        };
        previous(info);
    }));
}

/// A pool under load: its total, and how to stop and drop it.
pub struct Running {
    pub total: Box<dyn Fn() -> usize + Send + Sync>,
    /// The cmap pools' status and counters.
    pub stats: Box<dyn Fn() -> Option<(cmap_core::Status, cmap_core::Stats)> + Send + Sync>,
    /// Stops the load, waits for it (at most `wait`), drops the pool;
    /// returns the tasks that did not finish.
    pub finish: Box<dyn FnOnce(Duration) -> usize + Send>,
    /// Drops the pool (after `finish` kept it for the final count).
    pub drop_pool: Box<dyn FnOnce() + Send>,
}

/// How one round of a chaos task ended.
pub enum Round {
    /// The checkout succeeded; then the query did or did not.
    Served { query_ok: bool },
    /// The checkout failed.
    Failed,
}

/// A pool the chaos load runs on: one round is a checkout, timed by the
/// probe against its deadline, then one query on the connection.
pub trait Load: Send + Sync + 'static {
    fn round(&self, probe: &Probe, task: usize) -> impl Future<Output = Round> + Send;
}

/// The PostgreSQL pools: `get()`, then `select 1` given up after 1 s (the
/// guard is then dropped: the connection goes back to the pool).
impl<P: AsyncPgPool> Load for P {
    async fn round(&self, probe: &Probe, task: usize) -> Round {
        let began = probe.begin(task);
        match self.get().await {
            Ok(conn) => {
                probe.end(task, began, Ok(()));
                let done = tokio::time::timeout(QUERY_TIMEOUT, conn.simple_query("select 1")).await;
                Round::Served {
                    query_ok: matches!(done, Ok(Ok(_))),
                }
            }
            Err(e) => {
                probe.end(task, began, Err(e));
                Round::Failed
            }
        }
    }
}

async fn load_task<L: Load>(
    pool: Arc<L>,
    probe: Arc<Probe>,
    task: usize,
    stop: Arc<AtomicBool>,
    think: Duration,
) {
    while !stop.load(Ordering::Relaxed) {
        match pool.round(&probe, task).await {
            Round::Served { query_ok } => {
                if !query_ok {
                    probe.query_failures.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(PAUSE).await;
                }
                if !think.is_zero() {
                    tokio::time::sleep(think).await;
                }
            }
            Round::Failed => tokio::time::sleep(PAUSE).await,
        }
    }
}

/// Builds a pool with `build` on a 2-worker tokio runtime of its own (its
/// threads named after the probe's pool) and starts the load on it;
/// `total` and `stats` read it while it lives.
pub fn run_async<L: Load>(
    build: impl Future<Output = L>,
    probe: Arc<Probe>,
    total: fn(&L) -> usize,
    stats: fn(&L) -> Option<(cmap_core::Status, cmap_core::Stats)>,
    think: Duration,
) -> Running {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(format!("chaos-{}", probe.name))
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let pool = Arc::new(rt.block_on(build));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| rt.spawn(load_task(pool.clone(), probe.clone(), i, stop.clone(), think)))
        .collect();
    // Weak: once `drop_pool` has dropped it, nothing else keeps the pool.
    let for_total = Arc::downgrade(&pool);
    let for_stats = Arc::downgrade(&pool);
    let kept: Arc<Mutex<Option<Arc<L>>>> = Arc::new(Mutex::new(Some(pool)));
    let kept_for_drop = kept.clone();
    let rt = Arc::new(Mutex::new(Some(rt)));
    let rt_for_drop = rt.clone();
    Running {
        total: Box::new(move || for_total.upgrade().map_or(0, |p| total(&p))),
        stats: Box::new(move || for_stats.upgrade().and_then(|p| stats(&p))),
        finish: Box::new(move |wait| {
            stop.store(true, Ordering::Relaxed);
            let guard = rt.lock().unwrap_or_else(|e| e.into_inner());
            let rt = guard.as_ref().expect("the runtime runs");
            rt.block_on(async {
                let mut unfinished = 0;
                let until = tokio::time::Instant::now() + wait;
                for task in tasks {
                    if tokio::time::timeout_at(until, task).await.is_err() {
                        unfinished += 1;
                    }
                }
                unfinished
            })
        }),
        drop_pool: Box::new(move || {
            let pool = kept_for_drop.lock().unwrap_or_else(|e| e.into_inner()).take();
            let rt = rt_for_drop.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(rt) = rt {
                // Dropped inside the runtime: the pool's close may spawn.
                rt.block_on(async move { drop(pool) });
                rt.shutdown_timeout(Duration::from_secs(2));
            }
        }),
    }
}

fn run_blocking(setup: &PgSetup, probe: Arc<Probe>, think: Duration) -> Running {
    let pool = Arc::new(pg::build_blocking(setup));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    for task in 0..TASKS {
        let (pool, probe, stop, done) = (pool.clone(), probe.clone(), stop.clone(), done.clone());
        std::thread::Builder::new()
            .name(format!("chaos-{}-{task}", probe.name))
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let began = probe.begin(task);
                    match pool.get() {
                        Ok(mut conn) => {
                            probe.end(task, began, Ok(()));
                            let ok = conn.simple_query("select 1").is_ok();
                            drop(conn);
                            if !ok {
                                probe.query_failures.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(PAUSE);
                            }
                            if !think.is_zero() {
                                std::thread::sleep(think);
                            }
                        }
                        Err(e) => {
                            probe.end(task, began, Err(e.to_string()));
                            std::thread::sleep(PAUSE);
                        }
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
            })
            .expect("a load thread");
    }
    let for_total = Arc::downgrade(&pool);
    let for_stats = Arc::downgrade(&pool);
    let kept = Arc::new(Mutex::new(Some(pool)));
    let kept_for_drop = kept.clone();
    Running {
        total: Box::new(move || for_total.upgrade().map_or(0, |p| p.status().total)),
        stats: Box::new(move || for_stats.upgrade().map(|p| (p.status(), p.stats()))),
        finish: Box::new(move |wait| {
            stop.store(true, Ordering::Relaxed);
            let until = Instant::now() + wait;
            while done.load(Ordering::Relaxed) < TASKS && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            TASKS - done.load(Ordering::Relaxed)
        }),
        drop_pool: Box::new(move || {
            drop(kept_for_drop.lock().unwrap_or_else(|e| e.into_inner()).take());
        }),
    }
}

/// Starts the load of `TASKS` tasks on the pool `name`, each pausing
/// `think` after a successful query (none in the chaos run).
pub fn start(name: &'static str, setup: &PgSetup, probe: Arc<Probe>, think: Duration) -> Running {
    match name {
        "cmap-tokio" => run_async(
            pg::CmapTokio::build(setup),
            probe,
            |p| p.0.status().total,
            |p| Some((p.0.status(), p.0.stats())),
            think,
        ),
        "deadpool" => run_async(
            pg::Deadpool::build(setup),
            probe,
            |p| p.0.status().size,
            |_| None,
            think,
        ),
        "bb8" => run_async(
            pg::Bb8::build(setup),
            probe,
            |p| p.0.state().connections as usize,
            |_| None,
            think,
        ),
        _ => run_blocking(setup, probe, think),
    }
}

/// The server's own count of sessions per `application_name` beginning
/// with `chaos-`.
fn server_sessions() -> Result<Vec<(String, i64)>, String> {
    let mut client = postgres::Config::new()
        .host("127.0.0.1")
        .port(5432)
        .user("postgres")
        .dbname("test")
        .application_name("bench-chaos-count")
        .connect(postgres::NoTls)
        .map_err(|e| format!("PostgreSQL at {POSTGRES}: {e}"))?;
    let rows = client
        .query(
            "select application_name, count(*) from pg_stat_activity \
             where application_name like 'chaos-%' group by 1",
            &[],
        )
        .map_err(|e| format!("pg_stat_activity: {e}"))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The pool's connect attempts: how many, how long the successful ones
/// took; and those around its first failure in a pass period.
fn connects(name: &str, setup: &PgSetup, probe: &Probe) -> String {
    let attempts = setup
        .counters
        .attempts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut took: Vec<f64> = attempts
        .iter()
        .filter(|a| a.2)
        .map(|a| (a.1 - a.0).as_secs_f64() * 1e3)
        .collect();
    took.sort_by(f64::total_cmp);
    let mut s = format!(
        "{name}: connects started {}, ended {}, failed {}; a successful one took p50 {} / p99 {} / max {} ms",
        setup.counters.started.load(Ordering::Relaxed),
        attempts.len(),
        attempts.iter().filter(|a| !a.2).count(),
        percentile(&took, 0.5).map_or("–".to_owned(), |v| format!("{v:.1}")),
        percentile(&took, 0.99).map_or("–".to_owned(), |v| format!("{v:.1}")),
        percentile(&took, 1.0).map_or("–".to_owned(), |v| format!("{v:.1}")),
    );
    let at = *probe.failed_in_pass_at.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((start, end)) = at {
        let around: Vec<String> = attempts
            .iter()
            .filter(|a| a.1 + Duration::from_secs(1) >= start && a.0 <= end)
            .take(60)
            .map(|a| {
                format!(
                    "{:+.0}+{:.0}{}",
                    diff_ms(a.0, start),
                    (a.1 - a.0).as_secs_f64() * 1e3,
                    if a.2 { "" } else { "✗" }
                )
            })
            .collect();
        s.push_str(&format!(
            "; the attempts that ended from 1 s before its first failure in a pass began to its end (ms from its start + ms taken, ✗ failed): {}",
            if around.is_empty() { "none".to_owned() } else { around.join(" ") }
        ));
    }
    s
}

fn diff_ms(a: Instant, b: Instant) -> f64 {
    if a >= b {
        (a - b).as_secs_f64() * 1e3
    } else {
        -(b - a).as_secs_f64() * 1e3
    }
}

fn sessions_of(counts: &[(String, i64)], name: &str) -> i64 {
    let app = format!("chaos-{name}");
    counts.iter().find(|(a, _)| *a == app).map_or(0, |(_, n)| *n)
}

fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    Some(sorted[i])
}

/// One pool of the run, by its server.
enum Target {
    /// On PostgreSQL, through a proxy renewed as the schedule says.
    Pg(PgSetup),
    /// On a FerretDB of its own.
    Mongo(mongo::Mongo),
}

impl Target {
    fn start(&self, name: &'static str, route: &Route, probe: Arc<Probe>) -> Running {
        match self {
            Target::Pg(setup) => start(name, setup, probe, Duration::ZERO),
            Target::Mongo(m) => m.run(route, probe),
        }
    }

    /// The server's own count of the pool's sessions.
    fn server_count(&self, name: &str) -> Result<i64, String> {
        match self {
            Target::Pg(_) => server_sessions().map(|counts| sessions_of(&counts, name)),
            Target::Mongo(m) => Ok(m.server_count()),
        }
    }
}

/// The options of `--chaos`.
pub struct ChaosOptions {
    pub seed: u64,
    pub minutes: f64,
    pub pools: Vec<String>,
}

pub const HELP: &str = "\
usage: bench outage --chaos [--seed S] [--minutes M] [--pools A,B] [--schedule-only]

A random schedule of refuse, cut, blackhole, delay and pass (each 50 ms to 8 s), drawn from the
seed, applied at once to every pool, each behind its own fault proxy, under the usual 50-task
load; then 10 s of pass. Prints the schedule, then one line per pool (markdown). The pools
(default: all): cmap-tokio, cmap-blocking, deadpool and bb8 on PostgreSQL (127.0.0.1:5432);
cmap-mongodb (cmap-tokio with cmap-mongodb's manager) and mongodb (the official driver's pool),
each on a FerretDB of its own started for the run (the binary .ci/ferretdb.sh builds).
";

pub fn parse(args: &[String]) -> Result<(ChaosOptions, bool), String> {
    let mut o = ChaosOptions {
        seed: 1,
        minutes: 10.0,
        pools: POOLS
            .iter()
            .chain(&mongo::POOLS)
            .map(|p| (*p).to_owned())
            .collect(),
    };
    let mut schedule_only = false;
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--seed" => o.seed = value()?.parse().map_err(|_| "--seed: a number".to_owned())?,
            "--minutes" => o.minutes = value()?.parse().map_err(|_| "--minutes: a number".to_owned())?,
            "--pools" => o.pools = value()?.split(',').map(str::to_owned).collect(),
            "--schedule-only" => schedule_only = true,
            _ => return Err(format!("unknown option {arg}\n\n{HELP}")),
        }
    }
    Ok((o, schedule_only))
}

pub fn run(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "--help") {
        print!("{HELP}");
        return Ok(());
    }
    let (o, schedule_only) = parse(args)?;
    let steps = schedule(o.seed, Duration::from_secs_f64(o.minutes * 60.0));
    println!(
        "chaos: seed {}, {} min, the schedule (replay: bench outage --chaos --seed {} --minutes {}):",
        o.seed, o.minutes, o.seed, o.minutes
    );
    print!("{}", describe(&steps));
    if schedule_only {
        return Ok(());
    }
    let every: Vec<&'static str> = POOLS.iter().chain(&mongo::POOLS).copied().collect();
    let names: Vec<&'static str> = every
        .iter()
        .copied()
        .filter(|p| o.pools.iter().any(|n| n == p))
        .collect();
    if names.is_empty() {
        return Err(format!("no pool selected; the pools are {}", every.join(", ")));
    }
    // The MongoDB pools' proxies live the whole run (and the wait for the
    // load to stop, and the counts after it).
    let lifetime = WARM + steps.last().map_or(Duration::ZERO, |s| s.at + s.length) + Duration::from_secs(120);
    let (mut routes, targets): (Vec<Route>, Vec<Target>) = names
        .iter()
        .map(|name| {
            if mongo::POOLS.contains(name) {
                let server = mongo::Mongo::start(name);
                (Route::fixed(server.upstream(), lifetime), Target::Mongo(server))
            } else {
                let route = Route::start();
                let setup = setup("chaos", name, &route, true);
                (route, Target::Pg(setup))
            }
        })
        .unzip();
    for (name, target) in names.iter().zip(&targets) {
        let n = target.server_count(name)?;
        if n != 0 {
            return Err(format!(
                "{n} sessions of chaos-{name} already on the server: another chaos run?"
            ));
        }
    }
    let began = Instant::now();
    let base = Instant::now();
    let step_now = Arc::new(AtomicUsize::new(0));
    let probes: Vec<Arc<Probe>> = names
        .iter()
        .map(|n| Arc::new(Probe::new(n, base, step_now.clone(), &steps, TASKS)))
        .collect();
    count_panics(probes.clone());
    let runs: Vec<Running> = names
        .iter()
        .zip(&targets)
        .zip(routes.iter().zip(&probes))
        .map(|((name, target), (route, probe))| target.start(name, route, probe.clone()))
        .collect();
    let totals: Vec<_> = runs.iter().map(|r| &r.total).collect();
    // The sampler: every 100 ms, each pool's total and its hung `get()`s.
    let sampling = AtomicBool::new(true);
    // Per step, per pool: when the step took effect on its proxy.
    let mut applied: Vec<Vec<Instant>> = Vec::new();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while sampling.load(Ordering::Relaxed) {
                for (probe, total) in probes.iter().zip(&totals) {
                    probe.sample(total());
                }
                std::thread::sleep(SAMPLE);
            }
        });
        std::thread::sleep(WARM);
        let start = Instant::now();
        for (i, step) in steps.iter().enumerate() {
            let at = start + step.at;
            if let Some(wait) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let instants: Vec<Instant> = routes
                .iter_mut()
                .map(|r| r.apply(step.fault, step.renew))
                .collect();
            step_now.store(i, Ordering::Relaxed);
            applied.push(instants);
            if i % 50 == 0 {
                eprintln!(
                    "  step {i}/{} at {:.0} s (load {})",
                    steps.len(),
                    step.at.as_secs_f64(),
                    loadavg()
                );
            }
        }
        let end = start + steps.last().map_or(Duration::ZERO, |s| s.at + s.length);
        if let Some(wait) = end.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        sampling.store(false, Ordering::Relaxed);
    });
    drop(totals);
    // The load stops; the pools are kept for the final count.
    let mut unfinished = Vec::new();
    let mut drops = Vec::new();
    let mut totals_at_end = Vec::new();
    for run in runs {
        unfinished.push((run.finish)(Duration::from_secs(20)));
        drops.push((run.total, run.drop_pool));
    }
    std::thread::sleep(Duration::from_secs(1));
    for (total, _) in &drops {
        totals_at_end.push(total());
    }
    let server_counts = || -> Result<Vec<i64>, String> {
        names
            .iter()
            .zip(&targets)
            .map(|(name, target)| target.server_count(name))
            .collect()
    };
    let at_end = server_counts()?;
    for (_, drop_pool) in drops {
        drop_pool();
    }
    std::thread::sleep(Duration::from_secs(2));
    let after_drop = server_counts()?;
    drop(routes);

    println!(
        "\nseed {}, {} min, {:.0} s in all, load average at the end {}; {}",
        o.seed,
        o.minutes,
        began.elapsed().as_secs_f64(),
        loadavg(),
        summary(&steps)
    );
    println!(
        "\n| pool | seed | `get()`s | failed | later than deadline + 5 ms | latest vs deadline (ms) | hung | \
         failed in pass > 1 s | returns | first success after return, p50 / max (ms) | returns > 1 s without a success | \
         panics | sessions at the end: server / pool | after drop | total ≤ 10 (samples; max) |"
    );
    println!("| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --- |");
    let mut notes = Vec::new();
    for (p, probe) in probes.iter().enumerate() {
        // Returns: a pass step after a refuse or a blackhole.
        let mut recover = Vec::new();
        let mut none = 0;
        for i in 1..steps.len() {
            if steps[i].fault != Fault::Pass
                || !matches!(steps[i - 1].fault, Fault::Refuse | Fault::Blackhole)
            {
                continue;
            }
            let back = applied[i][p];
            let first = probe.first_ok[i].load(Ordering::Relaxed);
            if first == 0 {
                if steps[i].length > LONG_PASS {
                    none += 1;
                }
                continue;
            }
            let first = base + Duration::from_nanos(first - 1);
            recover.push(first.saturating_duration_since(back).as_secs_f64() * 1e3);
        }
        recover.sort_by(f64::total_cmp);
        let returns = recover.len() + none;
        let name = probe.name;
        let hung = probe.hung.load(Ordering::Relaxed) + unfinished[p] as u64;
        let latest = probe.latest_us.load(Ordering::Relaxed) as f64 / 1e3;
        let (server, dropped) = (at_end[p], after_drop[p]);
        println!(
            "| {name} | {} | {} | {} | {} | {latest:.1} | {hung} | {} | {returns} | {} / {} | {none} | {} | {server} / {} | {dropped} | {} ({} samples; max {}) |",
            o.seed,
            probe.gets.load(Ordering::Relaxed),
            probe.failed.load(Ordering::Relaxed),
            probe.late.load(Ordering::Relaxed),
            probe.failed_in_pass.load(Ordering::Relaxed),
            percentile(&recover, 0.5).map_or("–".to_owned(), |v| format!("{v:.1}")),
            percentile(&recover, 1.0).map_or("–".to_owned(), |v| format!("{v:.1}")),
            probe.panics.load(Ordering::Relaxed),
            totals_at_end[p],
            if probe.over_max.load(Ordering::Relaxed) == 0 { "met" } else { "MISSED" },
            probe.samples.load(Ordering::Relaxed),
            probe.max_total.load(Ordering::Relaxed),
        );
        notes.push(format!(
            "{name}: latest `get()`: {}",
            probe.latest.lock().unwrap_or_else(|e| e.into_inner())
        ));
        if let Some(s) = probe
            .failed_in_pass_sample
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            notes.push(format!("{name}: first failure in a pass period: {s}"));
        }
        notes.push(format!(
            "{name}: query failures (`select 1`, `ping`): {}",
            probe.query_failures.load(Ordering::Relaxed)
        ));
        notes.push(match &targets[p] {
            Target::Pg(setup) => connects(name, setup, probe),
            Target::Mongo(m) => m.note(name, server, totals_at_end[p]),
        });
    }
    println!();
    for n in notes {
        println!("- {n}");
    }
    println!(
        "- panics on other threads: {}",
        OTHER_PANICS.load(Ordering::Relaxed)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_schedule_within_its_bounds() {
        let a = schedule(7, Duration::from_secs(600));
        let b = schedule(7, Duration::from_secs(600));
        assert_eq!(describe(&a), describe(&b));
        assert_ne!(describe(&a), describe(&schedule(8, Duration::from_secs(600))));
        let (last, random) = a.split_last().expect("steps");
        assert_eq!((last.fault, last.length), (Fault::Pass, SETTLE));
        assert!(random.iter().all(|s| (SHORTEST..=LONGEST).contains(&s.length)));
        // No proxy lives to its 300 s limit.
        let mut age = WARM;
        for s in &a {
            if s.renew {
                age = Duration::ZERO;
            }
            age += s.length;
            assert!(age < Duration::from_secs(280), "a proxy would be {age:?} old");
        }
    }
}
