//! The spike with the adaptive establishment pace
//! (`adaptive_connecting`), beside the fixed maxConnecting and the peers:
//! `bench outage --spike-only [--runs N] [--spike-delay-ms A,B]
//! [--packet-delay-ms C,D]` runs the spike alone (the scenario of `bench
//! outage`'s spike tables: maxPoolSize 50, minPoolSize 5, 50 requests at
//! once each holding its connection 150 ms) for cmap-tokio and
//! cmap-blocking with either pace, deadpool and bb8, once per link: new
//! connections held A ms by the proxy, or every packet delayed C ms either
//! way (a long link; default: a 100 ms connect delay alone), and prints
//! its table with each row's p50 and p99 against deadpool's.

use std::future::Future;
use std::time::Duration;

use cmap_tokio::AdaptiveConnecting;

use super::pg::{self, AsyncPgPool, BlockingManager, CmapManager, PgSetup};
use super::{spike, Link, Table, SPIKE_MAX};

pub const TOKIO: &str = "cmap-tokio, adaptive";
pub const BLOCKING: &str = "cmap-blocking, adaptive";

/// The pace of the adaptive rows: from the spec's default maxConnecting
/// up to maxPoolSize.
pub const PACE: AdaptiveConnecting = AdaptiveConnecting {
    min: 2,
    max: SPIKE_MAX,
};

pub fn is_adaptive(pool: &str) -> bool {
    pool == TOKIO || pool == BLOCKING
}

fn address(setup: &PgSetup) -> String {
    format!("127.0.0.1:{}", setup.port)
}

/// cmap-tokio as `pg::CmapTokio` builds it, with the adaptive pace.
pub struct CmapTokioAdaptive(cmap_tokio::Pool<CmapManager>);

impl AsyncPgPool for CmapTokioAdaptive {
    type Guard<'a> = cmap_tokio::PooledConnection<'a, CmapManager>;

    async fn build(setup: &PgSetup) -> Self {
        let mut builder = cmap_tokio::Pool::builder()
            .address(address(setup).as_str())
            .max_pool_size(setup.max)
            .min_pool_size(setup.min)
            .adaptive_connecting(PACE);
        if let Some(wait) = setup.wait {
            builder = builder.wait_queue_timeout(wait);
        }
        let manager = CmapManager { setup: setup.clone() };
        CmapTokioAdaptive(builder.build(manager).expect("valid cmap-tokio options"))
    }

    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send {
        let get = self.0.get();
        async move { get.await.map_err(|e| e.to_string()) }
    }
}

/// cmap-blocking as `pg::build_blocking` builds it, with the adaptive pace.
pub fn build_blocking(setup: &PgSetup) -> cmap_blocking::Pool<BlockingManager> {
    let mut builder = cmap_blocking::Pool::builder()
        .address(address(setup).as_str())
        .max_pool_size(setup.max)
        .min_pool_size(setup.min)
        .adaptive_connecting(PACE);
    if let Some(wait) = setup.wait {
        builder = builder.wait_queue_timeout(wait);
    }
    builder
        .build(BlockingManager { setup: setup.clone() })
        .expect("valid cmap-blocking options")
}

const POOLS: [&str; 6] = [
    "cmap-tokio",
    TOKIO,
    pg::CMAP_BLOCKING,
    BLOCKING,
    "deadpool",
    "bb8",
];

/// `bench outage --spike-only`: `args` starts with `--spike-only`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut runs = 2usize;
    let mut delays: Option<Vec<Duration>> = None;
    let mut packets: Vec<Duration> = Vec::new();
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--runs" => runs = value()?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--spike-delay-ms" => delays = Some(millis(value()?, arg)?),
            "--packet-delay-ms" => packets = millis(value()?, arg)?,
            _ => return Err(format!("outage --spike-only: unknown option {arg}")),
        }
    }
    let delays = match delays {
        Some(d) => d,
        None if packets.is_empty() => vec![Duration::from_millis(100)],
        None => Vec::new(),
    };
    let links = delays
        .into_iter()
        .map(Link::connect)
        .chain(packets.into_iter().map(Link::packet));
    for link in links {
        let mut table = Table {
            title: if link.packet.is_zero() {
                "Spike, adaptive pace"
            } else {
                "Spike over a long link, adaptive pace"
            },
            what: "",
            columns: super::spike_columns(),
            rows: Vec::new(),
            targets: Vec::new(),
            samples: Vec::new(),
            sample_is: "",
        };
        for run in 1..=runs {
            eprintln!("run {run}/{runs}, {link} (load {})", super::uptime());
            for pool in POOLS {
                let row = spike(pool, link);
                eprintln!("  {pool}: {row:?}");
                table.push(pool, row);
            }
        }
        println!("{link}\n\n{}", table.markdown());
        // Each row's p50 and p99 against deadpool's: its worst run
        // against deadpool's best, and its best against deadpool's worst.
        let column = |pool: &str, c: usize| -> Vec<f64> {
            table
                .rows
                .iter()
                .find(|(p, _)| *p == pool)
                .map(|(_, runs)| runs.iter().filter_map(|r| r[c]).collect())
                .unwrap_or_default()
        };
        let lo = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        for pool in POOLS {
            let ratios: Vec<String> = [(1, "p50"), (2, "p99")]
                .into_iter()
                .map(|(c, name)| {
                    let (mine, theirs) = (column(pool, c), column("deadpool", c));
                    format!(
                        "{name} {:.2}–{:.2}×",
                        lo(&mine) / hi(&theirs),
                        hi(&mine) / lo(&theirs)
                    )
                })
                .collect();
            println!("{pool} against deadpool: {}", ratios.join(", "));
        }
    }
    Ok(())
}

/// A list of milliseconds, `A,B`.
fn millis(list: &str, flag: &str) -> Result<Vec<Duration>, String> {
    list.split(',')
        .map(|d| d.trim().parse().map(Duration::from_millis))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{flag}: {e}"))
}
