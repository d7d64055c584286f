//! `bench mongo`: cmap-tokio with cmap-mongodb's `MongoManager` beside the
//! official MongoDB Rust driver's own pool (the `mongodb` crate), against
//! the same FerretDB (127.0.0.1:27018, no authentication), each through a
//! fresh fault proxy ([`Proxy`]) of its own (issue 31).
//!
//! The load is the PostgreSQL outage benchmark's: 50 tasks on a 2-worker
//! tokio runtime, maxPoolSize 10, each looping over one operation (a
//! checkout and `ping` on `admin`, the checkout included in its time) with
//! a 10 ms pause after an error, and a 5 s deadline per operation. Server
//! connections are counted by FerretDB itself (its Prometheus metrics),
//! read before and after each run.

mod report;
pub(super) use report::load_range;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_mongodb::{MongoManager, MongoPool};
use cmap_testkit::proxy::{Mode, Proxy};

use super::{runtime, uptime, Rec, HARD_STOP, MAX, PAUSE, TASKS, WAIT, WARM};

/// FerretDB without authentication, and its metrics endpoint.
const FERRETDB: &str = "127.0.0.1:27018";
const METRICS: &str = "127.0.0.1:28018";
/// How long the steady load runs, from a fresh pool.
const STEADY: Duration = Duration::from_secs(5);
/// connectTimeoutMS of both: the default of both (the specification's).
const CONNECT_TIMEOUT_MS: u64 = 10_000;
/// The official driver's serverSelectionTimeoutMS: the operation's 5 s.
const SERVER_SELECTION_TIMEOUT_MS: u64 = 5_000;
/// The outages.
const SHORT_DOWN: Duration = Duration::from_secs(1);
const LONG_DOWN: Duration = Duration::from_secs(8);
const BLACKHOLE: Duration = Duration::from_secs(8);
/// The load goes on this long after the server's return.
const AFTER: Duration = Duration::from_secs(3);

/// Ours, then the official driver's.
pub const POOLS: [&str; 2] = ["cmap-tokio + cmap-mongodb", "mongodb (official driver)"];

/// The connection strings, for the proxy's port.
fn ours_uri(port: u16) -> String {
    format!(
        "mongodb://127.0.0.1:{port}/?maxPoolSize={MAX}&timeoutMS={}&connectTimeoutMS={CONNECT_TIMEOUT_MS}",
        WAIT.as_millis()
    )
}

fn official_uri(port: u16) -> String {
    format!(
        "mongodb://127.0.0.1:{port}/?directConnection=true&maxPoolSize={MAX}\
         &serverSelectionTimeoutMS={SERVER_SELECTION_TIMEOUT_MS}&connectTimeoutMS={CONNECT_TIMEOUT_MS}"
    )
}

/// One of the two pools.
pub(super) enum Client {
    Ours(cmap_tokio::Pool<MongoManager>),
    Official(mongodb::Client),
}

/// Why an operation failed, and whether it was the checkout (ours only:
/// the official driver's checkout is inside its `run_command`).
pub(super) struct Failure {
    checkout: bool,
    pub(super) text: String,
}

/// What either pool's CMAP events say of its connections (both emit the
/// specification's events; the official driver's monitoring connections
/// are not the pool's and emit none).
#[derive(Default)]
pub(super) struct PoolEvents {
    pub(super) created: AtomicU64,
    pub(super) ready: AtomicU64,
    pub(super) closed: AtomicU64,
    pub(super) cleared: AtomicU64,
}

impl PoolEvents {
    /// The pool's connections, pending ones included: created less closed.
    pub(super) fn total(&self) -> usize {
        let closed = self.closed.load(Ordering::Relaxed);
        self.created.load(Ordering::Relaxed).saturating_sub(closed) as usize
    }

    fn count(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn ours(&self, event: &cmap_tokio::Event) {
        use cmap_tokio::Event as E;
        match event {
            E::ConnectionCreated { .. } => self.count(&self.created),
            E::ConnectionReady { .. } => self.count(&self.ready),
            E::ConnectionClosed { .. } => self.count(&self.closed),
            E::PoolCleared { .. } => self.count(&self.cleared),
            _ => {}
        }
    }

    fn official(&self, event: mongodb::event::cmap::CmapEvent) {
        use mongodb::event::cmap::CmapEvent as E;
        match event {
            E::ConnectionCreated(_) => self.count(&self.created),
            E::ConnectionReady(_) => self.count(&self.ready),
            E::ConnectionClosed(_) => self.count(&self.closed),
            E::PoolCleared(_) => self.count(&self.cleared),
            _ => {}
        }
    }
}

impl Client {
    /// Ours or the official driver's (`pool`: one of [`POOLS`]) through
    /// the proxy's `port`, its CMAP events counted into `events` if given.
    pub(super) async fn build(
        pool: &str,
        port: u16,
        events: Option<Arc<PoolEvents>>,
    ) -> Result<Client, String> {
        if pool == POOLS[0] {
            let uri = ours_uri(port);
            let manager = MongoManager::new(&uri).map_err(|e| format!("{uri}: {e}"))?;
            let mut builder = cmap_tokio::Pool::builder().connection_string(&uri);
            if let Some(events) = events {
                builder = builder.on_event(move |e: &cmap_tokio::Event| events.ours(e));
            }
            let pool = builder.build(manager).map_err(|e| format!("{uri}: {e}"))?;
            Ok(Client::Ours(pool))
        } else {
            let uri = official_uri(port);
            let mut options = mongodb::options::ClientOptions::parse(&uri)
                .await
                .map_err(|e| format!("{uri}: {e}"))?;
            if let Some(events) = events {
                options.cmap_event_handler = Some(mongodb::event::EventHandler::callback(move |e| {
                    events.official(e)
                }));
            }
            let client = mongodb::Client::with_options(options).map_err(|e| format!("{uri}: {e}"))?;
            Ok(Client::Official(client))
        }
    }

    /// One operation begun at `start`, given up at `start` + 5 s.
    pub(super) async fn ping(&self, start: Instant) -> Result<(), Failure> {
        let deadline = tokio::time::Instant::from_std(start) + WAIT;
        let late = || Failure {
            checkout: false,
            text: format!("no reply within {} s (the caller's deadline)", WAIT.as_secs()),
        };
        match self {
            Client::Ours(pool) => {
                // timeoutMS (5 s) bounds the checkout, then the command
                // (maxTimeMS, the write, the reads): no deadline by hand.
                let command = cmap_mongodb::bson::doc! { "ping": 1 };
                pool.run_command("admin", &command)
                    .await
                    .map(drop)
                    .map_err(|e| Failure {
                        checkout: matches!(
                            e,
                            cmap_mongodb::Error::Pool(_)
                                | cmap_mongodb::Error::TimedOut {
                                    during: cmap_mongodb::Stage::CheckOut,
                                    ..
                                }
                        ),
                        text: e.to_string(),
                    })
            }
            Client::Official(client) => {
                // No checkout timeout in this driver (waitQueueTimeoutMS is
                // parsed but "not supported by the Rust driver", and it
                // has no timeoutMS): the caller bounds the whole operation.
                let command = mongodb::bson::doc! { "ping": 1 };
                match tokio::time::timeout_at(deadline, client.database("admin").run_command(command)).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(Failure {
                        checkout: false,
                        text: e.to_string(),
                    }),
                    Err(_) => Err(late()),
                }
            }
        }
    }

    pub(super) async fn close(self) {
        match self {
            Client::Ours(pool) => pool.close(),
            Client::Official(client) => {
                let _ = tokio::time::timeout(Duration::from_secs(5), client.shutdown().immediate(true)).await;
            }
        }
    }
}

/// Each task's operations, and which of the failures were checkouts.
async fn load(client: Arc<Client>, stop: Arc<AtomicBool>, until: Instant) -> Vec<(Rec, bool)> {
    let mut recs = Vec::new();
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        let start = Instant::now();
        let done = client.ping(start).await;
        let end = Instant::now();
        let failed = done.is_err();
        let (checkout, err) = match done {
            Ok(()) => (false, None),
            Err(f) => (f.checkout, Some(f.text)),
        };
        recs.push((
            Rec {
                start,
                end,
                ok: !failed,
                err,
            },
            checkout,
        ));
        if failed {
            tokio::time::sleep(PAUSE).await;
        }
    }
    recs
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scenario {
    /// 5 s of load on a fresh pool.
    Steady,
    /// The proxy refuses from before the pool is built, for 1 s / 8 s.
    Refuse(Duration),
    /// A warm pool; every session cut and new ones refused for 1 s.
    Restart,
    /// A warm pool; nothing forwarded for 8 s.
    Blackhole,
}

/// One pool's run of one scenario.
struct Outcome {
    recs: Vec<(Rec, bool)>,
    /// When the load began.
    began: Instant,
    /// When the fault began and when the server was back.
    fault: Option<Instant>,
    back: Option<Instant>,
    /// Server connections opened during the run, and open at its end.
    opened: Option<f64>,
    open_at_end: Option<f64>,
    /// Connections the pool created while the server refused, per second
    /// (its `ConnectionCreated` events).
    connects_during: Option<f64>,
}

/// FerretDB's counters: connections accepted, and closed.
fn server_connections() -> Option<(f64, f64)> {
    let read = || -> std::io::Result<String> {
        let addr: SocketAddr = METRICS.parse().expect("a socket address");
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        s.set_write_timeout(Some(Duration::from_secs(2)))?;
        s.write_all(b"GET /debug/metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
        let mut text = String::new();
        // Bounded: HTTP/1.0 closes after the reply, and each read waits 2 s at most.
        s.take(16 << 20).read_to_string(&mut text)?;
        Ok(text)
    };
    let text = read()
        .map_err(|e| eprintln!("    FerretDB metrics at {METRICS}: {e}"))
        .ok()?;
    // Every label set of a metric, summed.
    let sum = |name: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    Some((
        sum("ferretdb_client_accepts_total"),
        sum("ferretdb_client_duration_seconds_count"),
    ))
}

fn drive(pool: &str, scenario: Scenario) -> Result<Outcome, String> {
    let upstream: SocketAddr = FERRETDB.parse().expect("a socket address");
    let proxy = Proxy::start(upstream).map_err(|e| format!("the fault proxy: {e}"))?;
    let before = server_connections();
    let mut fault = None;
    if let Scenario::Refuse(_) = scenario {
        fault = Some(proxy.set(Mode::Refuse));
    }
    let rt = runtime();
    let events = Arc::new(PoolEvents::default());
    let created = || events.created.load(Ordering::Relaxed);
    let mut created_at_fault = 0;
    let client = Arc::new(rt.block_on(Client::build(pool, proxy.port(), Some(events.clone())))?);
    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let until = began
        + if scenario == Scenario::Steady {
            STEADY
        } else {
            HARD_STOP
        };
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| rt.spawn(load(client.clone(), stop.clone(), until)))
        .collect();
    let mut back = None;
    match scenario {
        Scenario::Steady => std::thread::sleep(STEADY),
        Scenario::Refuse(down) => {
            std::thread::sleep(down);
            back = Some(proxy.set(Mode::Pass));
        }
        Scenario::Restart => {
            std::thread::sleep(WARM);
            fault = Some(proxy.set(Mode::Refuse));
            created_at_fault = created();
            proxy.cut();
            std::thread::sleep(SHORT_DOWN);
            back = Some(proxy.set(Mode::Pass));
        }
        Scenario::Blackhole => {
            std::thread::sleep(WARM);
            fault = Some(proxy.set(Mode::Blackhole));
            std::thread::sleep(BLACKHOLE);
            back = Some(proxy.set(Mode::Pass));
        }
    }
    let connects_during = match (fault, back) {
        (Some(fault), Some(back)) if matches!(scenario, Scenario::Refuse(_) | Scenario::Restart) => {
            Some((created() - created_at_fault) as f64 / (back - fault).as_secs_f64())
        }
        _ => None,
    };
    if scenario != Scenario::Steady {
        std::thread::sleep(AFTER);
    }
    stop.store(true, Ordering::Relaxed);
    let mut recs = Vec::new();
    rt.block_on(async {
        for task in tasks {
            // Every operation ends by its 5 s deadline.
            if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(20), task).await {
                recs.extend(r);
            }
        }
    });
    let after = server_connections();
    if let Ok(client) = Arc::try_unwrap(client) {
        rt.block_on(client.close());
    }
    drop(proxy);
    rt.shutdown_timeout(Duration::from_secs(1));
    let (opened, open_at_end) = match (before, after) {
        (Some((a0, c0)), Some((a1, c1))) if a1 >= a0 => (Some(a1 - a0), Some((a1 - c1) - (a0 - c0))),
        (Some(_), Some(_)) => {
            eprintln!(
                "    FerretDB's counters went back: restarted during the run; its connections not counted"
            );
            (None, None)
        }
        _ => (None, None),
    };
    Ok(Outcome {
        recs,
        began,
        fault,
        back,
        opened,
        open_at_end,
        connects_during,
    })
}

/// The command's options.
pub struct MongoOptions {
    pub runs: usize,
    pub out: Option<PathBuf>,
    pub args: Vec<String>,
}

pub fn run(o: &MongoOptions) -> Result<(), String> {
    let began = Instant::now();
    let upstream: SocketAddr = FERRETDB.parse().expect("a socket address");
    TcpStream::connect_timeout(&upstream, Duration::from_secs(2))
        .map_err(|e| format!("FerretDB at {FERRETDB}: {e} (start it with `bash .ci/services.sh`)"))?;
    if server_connections().is_none() {
        return Err(format!("no FerretDB metrics at http://{METRICS}/debug/metrics"));
    }
    let mut tables = report::Tables::new();
    let mut loads = vec![uptime()];
    let scenarios = [
        Scenario::Steady,
        Scenario::Refuse(SHORT_DOWN),
        Scenario::Refuse(LONG_DOWN),
        Scenario::Restart,
        Scenario::Blackhole,
    ];
    for run in 1..=o.runs {
        eprintln!("run {run}/{} (load {})", o.runs, uptime());
        for &scenario in &scenarios {
            // The two pools back to back, so that they meet the same machine.
            for pool in POOLS {
                eprintln!("  {pool}: {scenario:?}");
                let out = drive(pool, scenario)?;
                let row = tables.add(pool, scenario, &out);
                eprintln!("    {row:?}");
            }
        }
        loads.push(uptime());
    }
    let secs = began.elapsed().as_secs_f64();
    let (reliability, benchmarks) = tables.markdown(o, &loads, secs);
    println!("{benchmarks}\n{reliability}");
    println!("took {secs:.0} s");
    if let Some(dir) = &o.out {
        for (name, section) in [("reliability.md", &reliability), ("benchmarks.md", &benchmarks)] {
            let path = dir.join(name);
            report::write(&path, section).map_err(|e| format!("writing {}: {e}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
