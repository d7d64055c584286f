//! The MongoDB pair of `bench outage --chaos`: cmap-tokio with
//! cmap-mongodb's manager (`cmap-mongodb`) and the official driver's own
//! pool (`mongodb`), as `bench mongo` builds them (maxPoolSize 10, a 5 s
//! deadline), each against a FerretDB of its own, started for the run on
//! free loopback ports (`cmap_testkit::mongo::OwnFerretDb`, no
//! authentication): the server's count of open connections (its
//! Prometheus metrics) is then that pool's alone, whoever else uses the
//! shared servers. Each pool's fault proxy lives the whole run (neither
//! client can follow a new port): a renewal of the schedule is a cut there.
//!
//! A round: ours, `get()` (timed by the probe against its 5 s
//! waitQueueTimeoutMS), then `ping` given up after 1 s, as the PostgreSQL
//! load's `select 1`; the official driver has no checkout of its own to
//! time (and no checkout timeout), so its round is one `ping` bounded at
//! 5 s by the caller, timed whole. Its pool's count is what its CMAP events
//! say (created less closed); its monitoring connection is no part of the
//! pool and emits none: the server counts it, the pool does not.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use cmap_testkit::mongo::OwnFerretDb;

use super::super::mongo::{self as bench_mongo, Client, PoolEvents};
use super::{run_async, Load, Probe, Round, Route, Running, QUERY_TIMEOUT};

/// Ours, then the official driver's.
pub const POOLS: [&str; 2] = ["cmap-mongodb", "mongodb"];

/// One of the pair, with its own server.
pub struct Mongo {
    /// `bench mongo`'s name of the pool.
    pool: &'static str,
    server: OwnFerretDb,
    events: Arc<PoolEvents>,
}

/// A pool under the chaos load.
struct Pool {
    client: Client,
    events: Arc<PoolEvents>,
}

impl Load for Pool {
    async fn round(&self, probe: &Probe, task: usize) -> Round {
        let began = probe.begin(task);
        match &self.client {
            Client::Ours(pool) => match pool.get().await {
                Ok(mut conn) => {
                    probe.end(task, began, Ok(()));
                    let ping = cmap_mongodb::bson::doc! { "ping": 1 };
                    let done = tokio::time::timeout(QUERY_TIMEOUT, conn.run_command("admin", &ping)).await;
                    Round::Served {
                        query_ok: matches!(done, Ok(Ok(_))),
                    }
                }
                Err(e) => {
                    probe.end(task, began, Err(e.to_string()));
                    Round::Failed
                }
            },
            Client::Official(_) => match self.client.ping(began.0).await {
                Ok(()) => {
                    probe.end(task, began, Ok(()));
                    Round::Served { query_ok: true }
                }
                Err(f) => {
                    probe.end(task, began, Err(f.text));
                    Round::Failed
                }
            },
        }
    }
}

impl Pool {
    fn total(&self) -> usize {
        match &self.client {
            Client::Ours(pool) => pool.status().total,
            Client::Official(_) => self.events.total(),
        }
    }

    fn stats(&self) -> Option<(cmap_core::Status, cmap_core::Stats)> {
        match &self.client {
            Client::Ours(pool) => Some((pool.status(), pool.stats())),
            Client::Official(_) => None,
        }
    }
}

impl Mongo {
    /// `name`: one of [`POOLS`]; starts its FerretDB.
    pub fn start(name: &str) -> Mongo {
        let pool = if name == POOLS[0] {
            bench_mongo::POOLS[0]
        } else {
            bench_mongo::POOLS[1]
        };
        Mongo {
            pool,
            server: OwnFerretDb::start(&format!("chaos-{name}")),
            events: Arc::default(),
        }
    }

    /// Where its FerretDB listens.
    pub fn upstream(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.server.port()))
    }

    /// Builds the pool through `route` and starts the load on it.
    pub fn run(&self, route: &Route, probe: Arc<Probe>) -> Running {
        let (pool, events) = (self.pool, self.events.clone());
        let port = route.port.load(Ordering::Relaxed);
        let build = async move {
            let client = Client::build(pool, port, Some(events.clone()))
                .await
                .unwrap_or_else(|e| panic!("{pool}: {e}"));
            Pool { client, events }
        };
        run_async(build, probe, Pool::total, Pool::stats, Duration::ZERO)
    }

    /// The server's own count of the connections open to it.
    pub fn server_count(&self) -> i64 {
        self.server.open_connections()
    }

    /// What the pool's events counted, and what the server counts beyond
    /// the pool (`at_end`: the server's count at the end, `pool`: the
    /// pool's).
    pub fn note(&self, name: &str, at_end: i64, pool: usize) -> String {
        let n = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let e = &self.events;
        let mut s = format!(
            "{name}: connections created {}, ready {}, closed {} (CMAP events, the drop's included); pool cleared {} times",
            n(&e.created),
            n(&e.ready),
            n(&e.closed),
            n(&e.cleared)
        );
        if self.pool == bench_mongo::POOLS[1] {
            s.push_str(&format!(
                "; the driver's pool count is created less closed; the server's count includes its \
                 monitoring connections, outside the pool (at the end: {} beyond the pool)",
                at_end - pool as i64
            ));
        }
        s
    }
}
