//! `bench outage --third-party [--runs N]`: one manager the project did not
//! write, bb8-postgres's `PostgresConnectionManager`, through the restart
//! (refused 1 s, its sessions closed) and refuse-8 s scenarios of `bench
//! outage`, three ways (issue 47): on its own pool (bb8), on cmap-tokio
//! through `compat::Bb8`, and cmap-postgres's own manager on cmap-tokio
//! beside them. The same load as `bench outage`; the managers' connects
//! are not counted (they are not ours), so the figures come from the
//! `get()`s alone.

use std::ops::{Deref, DerefMut};

use bb8_postgres::PostgresConnectionManager;
use cmap_tokio::compat::Bb8 as Compat;
use tokio_postgres::{Client, NoTls};

use super::pg::{AsyncPgPool, PgSetup};
use super::{diff_ms, drive_async, max, min, Outcome, Scenario};

fn config(setup: &PgSetup) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(setup.port())
        .user("postgres")
        .dbname("test")
        .application_name(&setup.application_name);
    config
}

fn address(setup: &PgSetup) -> String {
    format!("127.0.0.1:{}", setup.port)
}

type Bb8Pg = PostgresConnectionManager<NoTls>;

/// bb8 with bb8-postgres's manager: the third-party manager on its own pool.
pub struct Bb8Own(bb8::Pool<Bb8Pg>);

impl AsyncPgPool for Bb8Own {
    type Guard<'a> = bb8::PooledConnection<'a, Bb8Pg>;

    async fn build(setup: &PgSetup) -> Self {
        let mut builder = bb8::Pool::builder().max_size(setup.max);
        if let Some(wait) = setup.wait {
            builder = builder.connection_timeout(wait);
        }
        Bb8Own(builder.build_unchecked(Bb8Pg::new(config(setup), NoTls)))
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }
}

fn cmap_builder<M: cmap_tokio::ManageConnection>(setup: &PgSetup) -> cmap_tokio::PoolBuilder<M> {
    let mut builder = cmap_tokio::Pool::builder()
        .address(address(setup).as_str())
        .max_pool_size(setup.max);
    if let Some(wait) = setup.wait {
        builder = builder.wait_queue_timeout(wait);
    }
    builder
}

/// The same manager on cmap-tokio, through `compat::Bb8`.
pub struct CmapCompat(cmap_tokio::Pool<Compat<Bb8Pg>>);

impl AsyncPgPool for CmapCompat {
    type Guard<'a> = cmap_tokio::PooledConnection<'a, Compat<Bb8Pg>>;

    async fn build(setup: &PgSetup) -> Self {
        let manager = Compat::new(Bb8Pg::new(config(setup), NoTls));
        CmapCompat(cmap_builder(setup).build(manager).expect("valid options"))
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }
}

/// cmap-postgres's own manager on cmap-tokio, at its defaults.
pub struct CmapNative(cmap_tokio::Pool<cmap_postgres::PgManager>);

/// A cmap-postgres guard seen as its client (the load runs `select 1`).
pub struct NativeGuard<'a>(cmap_tokio::PooledConnection<'a, cmap_postgres::PgManager>);

impl Deref for NativeGuard<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0
    }
}

impl DerefMut for NativeGuard<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

impl AsyncPgPool for CmapNative {
    type Guard<'a> = NativeGuard<'a>;

    async fn build(setup: &PgSetup) -> Self {
        let manager = cmap_postgres::PgManager::new(config(setup), NoTls);
        CmapNative(cmap_builder(setup).build(manager).expect("valid options"))
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map(NativeGuard).map_err(|e| e.to_string())
    }
}

const POOLS: [&str; 3] = [
    "bb8 + bb8-postgres",
    "cmap-tokio + bb8-postgres (compat::Bb8)",
    "cmap-tokio + cmap-postgres",
];

fn drive(pool: usize, scenario: Scenario) -> Outcome {
    match pool {
        0 => drive_async::<Bb8Own>(scenario),
        1 => drive_async::<CmapCompat>(scenario),
        _ => drive_async::<CmapNative>(scenario),
    }
}

/// A run's row: failed `get()`s in all, of them begun after the return
/// (the goal: 0), the first success after the return (ms), and `select 1`
/// failures.
fn row(o: &Outcome) -> [Option<f64>; 4] {
    let back = o.marks.back.expect("a return");
    let count = |f: &dyn Fn(&super::Rec) -> bool| Some(o.recs.iter().filter(|r| f(r)).count() as f64);
    [
        count(&|r| !r.ok),
        count(&|r| !r.ok && r.start >= back),
        min(o
            .recs
            .iter()
            .filter(|r| r.ok && r.end >= back)
            .map(|r| diff_ms(r.end, back))),
        Some(o.query_failures as f64),
    ]
}

/// `args` starts with `--third-party`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut runs = 3usize;
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--runs" => {
                let value = it.next().ok_or("--runs needs a value")?;
                runs = value.parse().map_err(|e| format!("--runs: {e}"))?;
            }
            _ => return Err(format!("outage --third-party: unknown option {arg}")),
        }
    }
    let scenarios = [
        ("restart (refused 1 s)", Scenario::ShortDown),
        ("refused 8 s", Scenario::LongDown),
    ];
    // [scenario][pool] → the rows of every run.
    let mut rows = vec![vec![Vec::new(); POOLS.len()]; scenarios.len()];
    for run in 1..=runs {
        eprintln!("run {run}/{runs} (load {})", super::uptime());
        for (s, (name, scenario)) in scenarios.iter().enumerate() {
            for (p, pool) in POOLS.iter().enumerate() {
                let r = row(&drive(p, *scenario));
                eprintln!("  {pool}, {name}: {r:?}");
                rows[s][p].push(r);
            }
        }
    }
    println!(
        "| scenario | pool | failed `get()`s | of them begun after the return | first success after return (ms) | \
         query failures |"
    );
    println!("| --- | --- | --: | --: | --: | --: |");
    for (s, (name, _)) in scenarios.iter().enumerate() {
        for (p, pool) in POOLS.iter().enumerate() {
            let cells: Vec<String> = (0..4)
                .map(|c| {
                    let values = || rows[s][p].iter().filter_map(|r: &[Option<f64>; 4]| r[c]);
                    let digits = if c == 2 { 1 } else { 0 };
                    match (min(values()), max(values())) {
                        (Some(lo), Some(hi)) if format!("{lo:.digits$}") == format!("{hi:.digits$}") => {
                            format!("{lo:.digits$}")
                        }
                        (Some(lo), Some(hi)) => format!("{lo:.digits$}–{hi:.digits$}"),
                        _ => "–".to_owned(),
                    }
                })
                .collect();
            println!("| {name} | {pool} | {} |", cells.join(" | "));
        }
    }
    Ok(())
}
