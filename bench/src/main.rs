//! Benchmarks of the cmap pools against the pools users would pick instead
//! (deadpool, bb8, mobc, r2d2) and two floors, side by side in one run.
//!
//! ```text
//! cargo run --release -p bench -- all --out docs     # everything; rewrites docs/benchmarks.md's
//!                                                     # generated section and docs/img/*.svg
//! cargo run --release -p bench -- sweep [--pools cmap-tokio,deadpool] [--m 16] [--t 1,64]
//! cargo run --release -p bench -- spike
//! cargo run --release -p bench -- events
//! cargo run --release -p bench -- cycle
//! cargo run --release -p bench -- pair
//! cargo run --release -p bench -- instructions --out docs  # instructions per cycle under callgrind
//! cargo run --release -p bench -- list
//! cargo run --release -p bench -- outage --out docs  # against PostgreSQL at 127.0.0.1:5432;
//!                                                     # writes docs/reliability.md
//! cargo run --release -p bench -- mongo --out docs   # against FerretDB at 127.0.0.1:27018; writes
//!                                                     # the MongoDB sections of docs/reliability.md
//!                                                     # and docs/benchmarks.md
//! cargo run --release -p bench -- fleet --out docs   # a fleet of pools, simulated;
//!                                                     # writes docs/fleet.md
//! ```
//!
//! `cargo run --release -p bench -- help` lists the options.

mod cycle;
mod fleet;
mod harness;
mod instructions;
mod outage;
mod per_core;
mod pools;
mod report;
mod rt;
mod soak_core;
mod spike;
mod svg;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use harness::{Hold, Params, Sample};
use pools::{Entry, Family, CMAP_TOKIO_EVENTS};

const HELP: &str = "\
usage: bench <command> [options]

commands:
  sweep    every pool through check out -> hold -> check in, over M x T
  spike    50 requests at once on a pool pre-warmed to 5 (connect 150 ms, use 2 ms)
  events   cmap-tokio with a subscriber counting every event vs without
  cycle    ns per uncontended check out + check in, one task, no hold (M = 16)
  pair     the same loop on two threads at once, pinned to cores 0 and 1
  instructions
           instructions per check out -> check in under valgrind's callgrind (stable on a busy
           machine): (a) 1 task, M = 16; (b) 64 tasks, M = 4, hold across one yield_now; with
           --out DIR writes its table into DIR/benchmarks.md
  all      sweep + spike + events + cycle + pair; with --out DIR also writes DIR/benchmarks.md
           (its generated section) and DIR/img/*.svg (`sweep` prints every figure)
  per-core one pool per core (cmap-local, a thread each) against one shared pool (cmap-tokio),
           checkouts/s on every core; --reps N (default 3), --measure-ms (default 500)
  list     the pools
  outage   cmap-tokio, cmap-blocking, deadpool and bb8 on PostgreSQL (127.0.0.1:5432) through a
           fault proxy that refuses, cuts, blackholes or delays; with --out DIR writes
           DIR/reliability.md. `outage --chaos --seed S --minutes M`: a seeded schedule of faults on
           the four pools and the MongoDB pair (cmap-mongodb, the official driver; FerretDB) at once
           (`outage --chaos --help`); `outage --spike-only [--spike-delay-ms A] [--packet-delay-ms B]`:
           the spike alone, with the adaptive pace too, new connections held A ms or every packet
           delayed B ms (a long link); `outage --soak --pools P --minutes M`: one pool for an hour, a
           cut every 30 s, memory and fds each minute (`--soak-report A.tsv,B.tsv` tables them);
           `outage --flood`: 100,000 1 ms checkouts and 10,000 cancelled waiters on cmap-tokio;
           `outage --refuse-only [--runs N] [--pools A,B]`: the refuse-8 s scenario alone, cmap-tokio,
           cmap-blocking and cmap-local with either pace beside deadpool and bb8, connects a second
           during the refusal and the recovery against the targets; `outage --third-party [--runs N]`:
           bb8-postgres's manager on bb8 and on cmap-tokio (compat::Bb8) beside cmap-postgres's, restart
           and refused 8 s
  soak-core
           cmap-core's pool on virtual time for --hours H (default 24), random inputs, its
           invariants checked after each one; --seed S
  mongo    cmap-tokio with cmap-mongodb's manager beside the official MongoDB driver's pool (the
           mongodb crate), on FerretDB (127.0.0.1:27018) through the fault proxy: steady load, refused
           1 s and 8 s, restart, blackhole; --runs N (default 3); with --out DIR rewrites the MongoDB
           sections of DIR/reliability.md and DIR/benchmarks.md
  fleet    N processes, one cmap-core pool each, against a simulated server on virtual time
           (steady, failover, rolling deploy, spike; defaults vs no maxConnecting, no jitter, no
           backpressure labels); with --out DIR writes DIR/fleet.md. `bench fleet --help` lists
           its own options

options:
  --out DIR            where `all` writes (e.g. docs)
  --pools A,B          only these pools (names as `list` prints them)
  --m 4,16,64          maxPoolSize values
  --t 1,16,64,256,1024 concurrent tasks, async pools
  --bt 1,4,16,64       concurrent threads, blocking pools
  --warmup-ms 200      warm-up before each window
  --measure-ms 500     the measured window
  --spin-hold-us N     hold the connection N µs busy-spinning (default: one yield_now)
  --threads N          runtime worker threads (default: the number of cores)
  --reps N             sweep repetitions; the median-throughput one is kept (default 1)
  --event-reps N       repetitions of the events pairs (default 3)
  --spike-rounds N     spike rounds, each on a fresh pool (default 5)
  --runs N             outage, mongo: runs of every scenario (default 3)
  --spike-delay-ms A,B outage: spikes with the proxy delaying new connections this long (default 0,100)
  --packet-delay-ms A  outage: spikes over a long link, the proxy delaying every packet either way this
                       long (default none)
  --jobs N             instructions: callgrind runs at a time (default 2)
";

/// Everything the command line sets.
#[derive(Clone, Debug)]
pub struct Options {
    /// The command line, as given.
    pub args: Vec<String>,
    pub command: String,
    pub out: Option<PathBuf>,
    pub pools: Option<Vec<String>>,
    pub m: Vec<u32>,
    pub t: Vec<usize>,
    pub bt: Vec<usize>,
    pub warmup: Duration,
    pub measure: Duration,
    pub hold: Hold,
    pub threads: usize,
    pub reps: usize,
    pub event_reps: usize,
    pub spike_rounds: usize,
    pub runs: usize,
    pub spike_delays: Vec<u64>,
    pub packet_delays: Vec<u64>,
    pub jobs: usize,
    /// `cycles-inner` (run by `instructions` under callgrind): the pool,
    /// the regime and the cycles.
    pub pool: String,
    pub regime: String,
    pub n: u64,
    /// `fleet`: the options after the command, which it parses itself.
    pub fleet_args: Vec<String>,
}

fn list<T: std::str::FromStr>(s: &str, flag: &str) -> Result<Vec<T>, String> {
    s.split(',')
        .map(|v| v.trim().parse().map_err(|_| format!("{flag}: bad value {v:?}")))
        .collect()
}

fn parse(args: Vec<String>) -> Result<Options, String> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut o = Options {
        args: args.clone(),
        command: String::new(),
        out: None,
        pools: None,
        m: vec![4, 16, 64],
        t: vec![1, 16, 64, 256, 1024],
        bt: vec![1, 4, 16, 64],
        warmup: Duration::from_millis(200),
        measure: Duration::from_millis(500),
        hold: Hold::Yield,
        threads: cores,
        reps: 1,
        event_reps: 3,
        spike_rounds: 5,
        runs: 3,
        spike_delays: vec![0, 100],
        packet_delays: Vec::new(),
        jobs: 2,
        pool: String::new(),
        regime: "a".to_owned(),
        n: 0,
        fleet_args: Vec::new(),
    };
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        if !arg.starts_with("--") {
            if o.command.is_empty() {
                o.command = arg;
                if o.command == "fleet" || o.command == "soak-core" {
                    o.fleet_args = it.by_ref().collect();
                }
                continue;
            }
            return Err(format!("unexpected argument {arg:?}"));
        }
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|_| format!("{arg}: bad number {v:?}"));
        match arg.as_str() {
            "--out" => o.out = Some(PathBuf::from(value()?)),
            "--pools" => o.pools = Some(value()?.split(',').map(str::to_owned).collect()),
            "--m" => o.m = list(&value()?, "--m")?,
            "--t" => o.t = list(&value()?, "--t")?,
            "--bt" => o.bt = list(&value()?, "--bt")?,
            "--warmup-ms" => o.warmup = Duration::from_millis(num(value()?)?),
            "--measure-ms" => o.measure = Duration::from_millis(num(value()?)?.max(1)),
            "--spin-hold-us" => o.hold = Hold::Spin(Duration::from_micros(num(value()?)?)),
            "--threads" => o.threads = num(value()?)?.max(1) as usize,
            "--reps" => o.reps = num(value()?)?.max(1) as usize,
            "--event-reps" => o.event_reps = num(value()?)?.max(1) as usize,
            "--spike-rounds" => o.spike_rounds = num(value()?)?.max(1) as usize,
            "--runs" => o.runs = num(value()?)?.max(1) as usize,
            "--spike-delay-ms" => o.spike_delays = list(&value()?, "--spike-delay-ms")?,
            "--packet-delay-ms" => o.packet_delays = list(&value()?, "--packet-delay-ms")?,
            "--jobs" => o.jobs = num(value()?)?.max(1) as usize,
            "--pool" => o.pool = value()?,
            "--regime" => o.regime = value()?,
            "--n" => o.n = num(value()?)?,
            "--help" => o.command = "help".to_owned(),
            // `outage --chaos | --soak | --soak-report | --flood`: the rest is theirs
            // (bench/src/outage/chaos.rs, soak.rs, flood.rs).
            "--chaos" | "--soak" | "--soak-report" | "--flood" | "--spike-only" | "--refuse-only"
            | "--third-party"
                if o.command == "outage" =>
            {
                o.fleet_args = std::iter::once(arg.clone()).chain(it.by_ref()).collect();
            }
            _ => return Err(format!("unknown option {arg}")),
        }
    }
    if o.command.is_empty() {
        o.command = "help".to_owned();
    }
    Ok(o)
}

fn selected(o: &Options) -> Vec<Entry> {
    pools::registry()
        .into_iter()
        .filter(|e| match &o.pools {
            Some(names) => names.iter().any(|n| n == e.name),
            None => e.name != CMAP_TOKIO_EVENTS,
        })
        .collect()
}

fn params(o: &Options, m: u32, t: usize) -> Params {
    Params {
        m,
        t,
        warmup: o.warmup,
        measure: o.measure,
        hold: o.hold,
        threads: o.threads,
    }
}

fn progress(s: &Sample) {
    eprintln!(
        "  M={:<3} T={:<5} {:<26} {:>9} ops/s  p50 {:>8}  p99 {:>8}  p99.9 {:>8}  fair {:>6}  starved {:<4} created {:<4} timeouts {}",
        s.m,
        s.t,
        s.pool,
        svg::si(s.ops),
        svg::time_ns(s.p50_ns as f64),
        svg::time_ns(s.p99_ns as f64),
        svg::time_ns(s.p999_ns as f64),
        report::fair(s.fairness),
        s.starved,
        s.created,
        s.timeouts
    );
}

/// The sweep: for each configuration, every pool one after the other (and
/// the repetitions of one configuration back to back), so that the pools
/// compared are measured close in time: this machine's speed drifts. With
/// `reps` > 1 the median-throughput repetition of each pool is kept.
fn sweep(o: &Options) -> Vec<Sample> {
    let entries = selected(o);
    let mut samples = Vec::new();
    for (family, ts) in [(Family::Async, &o.t), (Family::Blocking, &o.bt)] {
        let family_entries: Vec<&Entry> = entries.iter().filter(|e| e.family == family).collect();
        for &m in &o.m {
            for &t in ts {
                let mut reps: Vec<Vec<Sample>> = vec![Vec::new(); family_entries.len()];
                for _ in 0..o.reps {
                    for (i, e) in family_entries.iter().enumerate() {
                        let s = (e.sweep)(&params(o, m, t));
                        progress(&s);
                        reps[i].push(s);
                    }
                }
                for mut r in reps {
                    r.sort_by(|a, b| a.ops.total_cmp(&b.ops));
                    samples.push(r.swap_remove(r.len() / 2));
                }
            }
        }
    }
    samples
}

fn spike(o: &Options) -> Vec<spike::SpikeResult> {
    let p = spike::SpikeParams {
        threads: o.threads,
        ..spike::SpikeParams::default()
    };
    let mut results = Vec::new();
    for e in selected(o) {
        let rounds: Vec<_> = (0..o.spike_rounds).map(|_| (e.spike)(&p)).collect();
        let r = spike::summarize(e.name, e.family, &rounds);
        eprintln!(
            "  spike {:<26} before {:<3} opened {:>5.1} (max {:<3}) wait p50 {:>8} p99 {:>8}  request p50 {:>8} p99 {:>8}  failures {}",
            r.pool,
            r.before,
            r.opened_mean,
            r.opened_max,
            svg::time_ns(r.wait_p50.as_nanos() as f64),
            svg::time_ns(r.wait_p99.as_nanos() as f64),
            svg::time_ns(r.p50.as_nanos() as f64),
            svg::time_ns(r.p99.as_nanos() as f64),
            r.failures
        );
        results.push(r);
    }
    results
}

/// cmap-tokio without and with a subscriber, paired per configuration
/// and repetition (measured back to back).
fn events(o: &Options) -> Vec<report::EventPair> {
    let all = pools::registry();
    let find = |name: &str| all.iter().find(|e| e.name == name).expect("registered");
    let (plain, with) = (find("cmap-tokio"), find(CMAP_TOKIO_EVENTS));
    let mut pairs = Vec::new();
    for &m in &o.m {
        for &t in &o.t {
            let mut reps = Vec::new();
            for _ in 0..o.event_reps {
                let p = params(o, m, t);
                reps.push(((plain.sweep)(&p), (with.sweep)(&p)));
            }
            let pair = report::EventPair::new(m, t, reps, (o.warmup + o.measure).as_secs_f64());
            eprintln!(
                "  events M={:<3} T={:<5} without {:>9}  with {:>9}  ratio {:.3}",
                m,
                t,
                svg::si(pair.without),
                svg::si(pair.with),
                pair.ratio
            );
            pairs.push(pair);
        }
    }
    pairs
}

/// Every selected pool's uncontended cycle, `reps` runs each (reps
/// default to 1: pass `--reps 5` for steadier figures).
fn cycles(o: &Options) -> report::CycleRuns {
    cycle_runs(o, "cycle", |e| e.cycle)
}

/// The same on two pinned threads at once (`bench pair`).
fn pair_cycles(o: &Options) -> report::CycleRuns {
    cycle_runs(o, "pair", |e| e.pair)
}

fn cycle_runs(o: &Options, what: &str, measure: impl Fn(&Entry) -> fn(u64) -> f64) -> report::CycleRuns {
    let mut rows = Vec::new();
    for e in selected(o) {
        let runs: Vec<f64> = (0..o.reps).map(|_| measure(&e)(cycle::CYCLES)).collect();
        let best = runs.iter().copied().fold(f64::INFINITY, f64::min);
        eprintln!("  {what} {:<26} {best:>6.0} ns", e.name);
        rows.push((e.name, runs));
    }
    rows
}

fn run(o: &Options) -> Result<(), String> {
    let began = Instant::now();
    match o.command.as_str() {
        "help" => print!("{HELP}"),
        "list" => {
            for e in pools::registry() {
                println!("{:<26} {:?}", e.name, e.family);
            }
        }
        "sweep" => {
            let samples = sweep(o);
            let secs = began.elapsed().as_secs_f64();
            println!("{}", report::full_table(&samples));
            println!("sweep took {secs:.1} s");
        }
        "spike" => {
            let results = spike(o);
            println!("{}", report::spike_table(&results));
        }
        "events" => {
            let pairs = events(o);
            println!("{}", report::events_table(&pairs));
        }
        "cycle" => {
            println!("{}", report::cycle_table(&cycles(o)));
        }
        "per-core" => {
            println!("{}", per_core::run(o.reps.max(3), o.measure));
        }
        "pair" => {
            println!("{}", report::cycle_table(&pair_cycles(o)));
        }
        "all" => {
            eprintln!("sweep");
            let t0 = Instant::now();
            let samples = sweep(o);
            let sweep_s = t0.elapsed().as_secs_f64();
            eprintln!("spike");
            let t1 = Instant::now();
            let spikes = spike(o);
            let spike_s = t1.elapsed().as_secs_f64();
            eprintln!("events");
            let t2 = Instant::now();
            let pairs = events(o);
            let events_s = t2.elapsed().as_secs_f64();
            eprintln!("cycle and pair");
            let results = report::Results {
                options: o.clone(),
                cycle: cycles(o),
                pair: pair_cycles(o),
                samples,
                spikes,
                events: pairs,
                sweep_s,
                spike_s,
                events_s,
                total_s: began.elapsed().as_secs_f64(),
            };
            let text = report::markdown(&results);
            match &o.out {
                Some(dir) => {
                    report::write(dir, &results, &text)
                        .map_err(|e| format!("writing {}: {e}", dir.display()))?;
                    eprintln!("wrote {}", dir.join("benchmarks.md").display());
                }
                None => println!("{text}"),
            }
            eprintln!(
                "total {:.1} s (sweep {:.1} s, spike {:.1} s, events {:.1} s)",
                results.total_s, sweep_s, spike_s, events_s
            );
        }
        "instructions" => {
            let m = instructions::measure(o.pools.as_deref(), o.jobs)?;
            let text = instructions::markdown(&m, &o.args);
            if let Some(dir) = &o.out {
                instructions::write(dir, &text).map_err(|e| format!("writing {}: {e}", dir.display()))?;
                eprintln!("wrote {}", dir.join("benchmarks.md").display());
            }
            println!("{text}");
            eprintln!("took {:.1} s", m.took.as_secs_f64());
        }
        instructions::INNER => {
            instructions::inner(&o.pool, instructions::Regime::parse(&o.regime)?, o.n)?;
        }
        "outage" if !o.fleet_args.is_empty() => match o.fleet_args[0].as_str() {
            "--chaos" => outage::chaos::run(&o.fleet_args)?,
            "--soak" => outage::soak::run(&o.fleet_args)?,
            "--soak-report" => outage::soak::report(&o.fleet_args)?,
            "--spike-only" => outage::adaptive::run(&o.fleet_args)?,
            "--refuse-only" => outage::refusals::run(&o.fleet_args)?,
            "--third-party" => outage::third_party::run(&o.fleet_args)?,
            _ => outage::flood::run(&o.fleet_args)?,
        },
        "soak-core" => soak_core::run(&o.fleet_args)?,
        "outage" => {
            let pools = match &o.pools {
                Some(p) => p.clone(),
                None => outage::POOLS.iter().map(|p| (*p).to_owned()).collect(),
            };
            outage::run(&outage::OutageOptions {
                runs: o.runs,
                pools,
                spike_delays: o.spike_delays.iter().map(|d| Duration::from_millis(*d)).collect(),
                packet_delays: o
                    .packet_delays
                    .iter()
                    .map(|d| Duration::from_millis(*d))
                    .collect(),
                out: o.out.clone(),
                args: o.args.clone(),
            })?;
        }
        "mongo" => {
            outage::mongo::run(&outage::mongo::MongoOptions {
                runs: o.runs,
                out: o.out.clone(),
                args: o.args.clone(),
            })?;
        }
        "fleet" => {
            if o.fleet_args.iter().any(|a| a == "--help") {
                print!("{}", fleet::HELP);
                return Ok(());
            }
            fleet::run(&fleet::parse(&o.fleet_args, o.out.clone())?)?;
        }
        other => return Err(format!("unknown command {other:?}\n\n{HELP}")),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
