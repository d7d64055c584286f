//! `bench fleet`: a fleet of processes, each with its own
//! `cmap_core::Pool` (the core users link), against one simulated server,
//! on virtual time, deterministic from a seed — for capacity planning
//! (issue 22). Every scenario runs with the pool's defaults and with each
//! mechanism switched off in turn; `--out docs` writes `docs/fleet.md`'s
//! generated section and `docs/img/fleet-*.svg`.
//!
//! - `sched.rs`: virtual time and the queue of timed events;
//! - `rng.rs`: the seeded generator;
//! - `scenario.rs`: load, server, scenario, variant, and the pool options;
//! - `server.rs`: the server model (latency, limits, failover);
//! - `process.rs`: a process, its requests and the driver around its core;
//! - `sim.rs`: the event loop;
//! - `metrics.rs`, `report.rs`: the figures, tables and plots.

mod metrics;
mod process;
mod report;
/// Shared with `bench outage --chaos` and `bench soak-core`.
pub(crate) mod rng;
mod scenario;
mod sched;
mod server;
mod sim;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Instant;

use scenario::{default_config, Config, Kind, Variant};
use sched::{Nanos, MS, SEC};

pub const HELP: &str = "\
usage: bench fleet [options]

A fleet of processes, one cmap-core pool each, against one simulated server, on virtual time
(deterministic from the seed). Every scenario runs with the pool's defaults and with each
mechanism off in turn (no maxConnecting limit, no jitter, no backpressure labels).

options (defaults in brackets):
  --out DIR              write DIR/fleet.md's generated section and DIR/img/fleet-*.svg
  --csv DIR              write each run's per-second series to DIR/fleet-SCENARIO-VARIANT.csv
  --processes N          processes [1000]
  --minutes M            simulated minutes [5]
  --seed S               [1]
  --scenarios A,B        steady, failover, deploy, spike [all]
  --variants A,B         defaults, no-max-connecting, no-jitter, no-labels, adaptive [all]
load, per process:
  --rate R               requests per second, Poisson [20]
  --hold-ms MS           mean hold time, exponential [50]
  --wait-ms MS           wait timeout (waitQueueTimeoutMS) [5000]
pool:
  --max-pool-size N      [100]
  --min-pool-size N      [0]
  --max-connecting N     [2]
  --waiting-pause-ms MS  the reconnect backoff's longest pause while checkouts wait
                         (Reconnect::max_delay_while_waiting) [the builder's: 60]
server:
  --connect-ms MS        connect + handshake + auth, mean [20]
  --connect-jitter F     ± fraction of it [0.5]
  --max-connections N    [20000]
  --accept-rate R        new connections per second (token bucket) [1000]
  --accept-burst N       the bucket's size [1000]
scenarios:
  --at-s S               when the event starts [120]
  --down-s S             failover: the server refuses this long [10]
  --spike-s S            spike: how long [60]
  --spike-factor F       spike: load multiplier [5]
  --waves N              deploy: waves [2]
  --wave-every-s S       deploy: between waves [60]
  --restart-s S          deploy: a process is down this long [5]
  --ramp-s S             the processes start evenly over this long [30]
  --warmup-s S           tables count from here on [60]
";

pub struct FleetOptions {
    pub config: Config,
    pub kinds: Vec<Kind>,
    pub variants: Vec<Variant>,
    pub out: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub args: Vec<String>,
}

fn secs(v: f64) -> Nanos {
    (v * SEC as f64) as Nanos
}

fn millis(v: f64) -> Nanos {
    (v * MS as f64) as Nanos
}

/// Parses `bench fleet`'s options (`args`: those after `fleet`).
pub fn parse(args: &[String], out: Option<PathBuf>) -> Result<FleetOptions, String> {
    let mut c = default_config();
    let mut o = FleetOptions {
        config: c.clone(),
        kinds: Kind::ALL.to_vec(),
        variants: Variant::ALL.to_vec(),
        out,
        csv: None,
        args: args.to_vec(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let value = it.next().ok_or_else(|| format!("{arg} needs a value"))?;
        let num = |v: &str| v.parse::<f64>().map_err(|_| format!("{arg}: bad number {v:?}"));
        let v = || num(value);
        match arg.as_str() {
            "--out" => o.out = Some(PathBuf::from(value)),
            "--csv" => o.csv = Some(PathBuf::from(value)),
            "--processes" => c.processes = v()?.max(1.0) as usize,
            "--minutes" => c.duration = secs(v()? * 60.0),
            "--seed" => {
                c.seed = value
                    .parse()
                    .map_err(|_| format!("--seed: bad number {value:?}"))?
            }
            "--scenarios" => o.kinds = value.split(',').map(Kind::parse).collect::<Result<_, _>>()?,
            "--variants" => o.variants = value.split(',').map(Variant::parse).collect::<Result<_, _>>()?,
            "--rate" => c.load.rate = v()?,
            "--hold-ms" => c.load.hold = millis(v()?),
            "--wait-ms" => c.load.wait_timeout = millis(v()?),
            "--max-pool-size" => c.sizes.max_pool_size = v()? as u32,
            "--min-pool-size" => c.sizes.min_pool_size = v()? as u32,
            "--max-connecting" => c.sizes.max_connecting = v()?.max(1.0) as u32,
            "--connect-ms" => c.server.connect = millis(v()?),
            "--connect-jitter" => c.server.connect_jitter = v()?.clamp(0.0, 1.0),
            "--max-connections" => c.server.max_connections = v()? as usize,
            "--accept-rate" => c.server.accept_rate = v()?,
            "--accept-burst" => c.server.accept_burst = v()?.max(1.0),
            "--at-s" => c.scenario.at = secs(v()?),
            "--down-s" => c.scenario.down_for = secs(v()?),
            "--spike-s" => c.scenario.spike_for = secs(v()?),
            "--spike-factor" => c.scenario.factor = v()?,
            "--waves" => c.scenario.waves = v()?.max(1.0) as usize,
            "--wave-every-s" => c.scenario.wave_every = secs(v()?),
            "--restart-s" => c.scenario.restart = secs(v()?),
            "--warmup-s" => c.warmup = secs(v()?),
            "--ramp-s" => c.ramp = secs(v()?),
            "--waiting-pause-ms" => c.waiting_pause = Some(millis(v()?)),
            _ => return Err(format!("unknown option {arg}\n\n{HELP}")),
        }
    }
    if c.load.rate <= 0.0 {
        return Err("--rate must be above 0".to_owned());
    }
    if c.duration == 0 {
        return Err("--minutes must be above 0".to_owned());
    }
    o.config = c;
    Ok(o)
}

/// Runs one scenario with one variant.
pub fn run_one(base: &Config, kind: Kind, variant: Variant) -> report::Run {
    let mut cfg = base.clone();
    cfg.scenario.kind = kind;
    cfg.variant = variant;
    let outcome = sim::Sim::run(cfg.clone());
    let summary = report::summarize(&cfg, &outcome);
    report::Run {
        kind,
        variant,
        cfg,
        outcome,
        summary,
    }
}

/// `bench fleet`: every selected scenario × variant, printed; with an
/// output directory, written into `fleet.md` and its plots.
pub fn run(o: &FleetOptions) -> Result<(), String> {
    let began = Instant::now();
    let mut runs = Vec::new();
    for &kind in &o.kinds {
        for &variant in &o.variants {
            let r = run_one(&o.config, kind, variant);
            let s = &r.summary;
            eprintln!(
                "  {:<9} {:<17} {:>6.1} s  {:>9} events  peak {:>6}  opened {:>7}  refused {:>8}  failed {:>6}  p99 {:>8}",
                kind.name(),
                variant.name(),
                r.outcome.wall_s,
                r.outcome.events,
                s.peak,
                s.opened,
                s.refused,
                s.failed,
                svg_time(s.wait_p99_us)
            );
            if let Some(dir) = &o.csv {
                report::write_csv(dir, &r).map_err(|e| format!("writing {}: {e}", dir.display()))?;
            }
            runs.push(r);
        }
    }
    let total_s = began.elapsed().as_secs_f64();
    let mut full_args = vec!["fleet".to_owned()];
    full_args.extend(o.args.iter().cloned());
    if o.out.is_some() && !o.args.iter().any(|a| a == "--out") {
        full_args.push("--out".to_owned());
        full_args.push(
            o.out
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        );
    }
    let text = report::markdown(&runs, &full_args, total_s);
    match &o.out {
        Some(dir) => {
            report::write(dir, &runs, &text).map_err(|e| format!("writing {}: {e}", dir.display()))?;
            eprintln!("wrote {}", dir.join("fleet.md").display());
        }
        None => println!("{text}"),
    }
    eprintln!("total {total_s:.1} s");
    Ok(())
}

fn svg_time(us: u64) -> String {
    crate::svg::time_ns(us as f64 * 1e3)
}
