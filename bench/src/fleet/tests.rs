//! The simulator's own checks: determinism, the server's limit, and
//! counts that add up. Nothing here depends on the machine's speed.

use std::time::Instant;

use super::report::summarize;
use super::scenario::{default_config, Config, Kind, Variant};
use super::sched::SEC;
use super::sim::{Outcome, Sim};

/// A fleet small enough for a debug build: 20 processes for 40 s.
fn tiny(kind: Kind, variant: Variant) -> Config {
    let mut c = default_config();
    c.processes = 20;
    c.duration = 40 * SEC;
    c.ramp = 2 * SEC;
    c.warmup = 5 * SEC;
    c.seed = 42;
    c.load.rate = 30.0;
    c.load.wait_timeout = 2 * SEC;
    c.server.accept_rate = 40.0;
    c.server.accept_burst = 10.0;
    c.scenario.kind = kind;
    c.scenario.at = 20 * SEC;
    c.scenario.down_for = 5 * SEC;
    c.scenario.spike_for = 10 * SEC;
    c.scenario.waves = 4;
    c.scenario.wave_every = 5 * SEC;
    c.scenario.restart = 2 * SEC;
    c.variant = variant;
    c
}

/// Runs `cfg`, then stops every process and lets every connection come
/// back, so that nothing is left in flight.
fn run_to_the_end(cfg: Config) -> Outcome {
    let duration = cfg.duration;
    let mut sim = Sim::new(cfg);
    sim.run_until(duration);
    sim.shut_down();
    sim.finish(Instant::now())
}

#[test]
fn the_same_seed_gives_the_same_figures() {
    for kind in Kind::ALL {
        let cfg = tiny(kind, Variant::Defaults);
        let (a, b) = (Sim::run(cfg.clone()), Sim::run(cfg.clone()));
        assert_eq!(summarize(&cfg, &a), summarize(&cfg, &b), "{kind:?}");
        let (ma, mb) = (&a.metrics, &b.metrics);
        assert_eq!(ma.opened, mb.opened);
        assert_eq!(ma.refused, mb.refused);
        assert_eq!(ma.peak, mb.peak);
        assert_eq!(ma.served, mb.served);
        assert_eq!(ma.failed, mb.failed);
        assert_eq!(a.server, b.server);
        assert_eq!(a.events, b.events);
    }
    // The report itself: its plots and its comparison table (the tables
    // beside them add each run's wall time).
    let report = |c: &Config| {
        let runs: Vec<_> = [Variant::Defaults, Variant::NoLabels]
            .into_iter()
            .map(|v| super::run_one(c, Kind::Failover, v))
            .collect();
        (super::report::charts(&runs), super::report::mechanisms(&runs))
    };
    let cfg = tiny(Kind::Failover, Variant::Defaults);
    assert_eq!(report(&cfg), report(&cfg));
    // And another seed gives other figures.
    let cfg = tiny(Kind::Steady, Variant::Defaults);
    let other = Config {
        seed: 43,
        ..cfg.clone()
    };
    assert_ne!(Sim::run(cfg).metrics.served, Sim::run(other).metrics.served);
}

#[test]
fn the_server_never_holds_more_than_its_maximum() {
    // Short runs: past the cap, waiting checkouts retry a connect every
    // few milliseconds, and a debug build is slow.
    let runs = Variant::ALL.into_iter().map(|v| (Kind::Spike, v)).chain([
        (Kind::Failover, Variant::Defaults),
        (Kind::Deploy, Variant::NoLabels),
    ]);
    for (kind, variant) in runs {
        let mut cfg = tiny(kind, variant);
        cfg.duration = 15 * SEC;
        cfg.scenario.at = 5 * SEC;
        cfg.server.max_connections = 15;
        cfg.server.accept_rate = 1000.0;
        cfg.server.accept_burst = 1000.0;
        let o = run_to_the_end(cfg);
        assert!(o.server.peak <= 15, "{kind:?} {variant:?}: {}", o.server.peak);
        assert!(o.metrics.peak.iter().all(|&p| p <= 15));
        assert!(
            o.server.refused_full > 0,
            "{kind:?} {variant:?}: the cap never bound"
        );
    }
}

#[test]
fn every_request_is_served_or_failed_and_every_connection_accounted_for() {
    for kind in Kind::ALL {
        for variant in Variant::ALL {
            let o = run_to_the_end(tiny(kind, variant));
            let m = &o.metrics;
            let served: u64 = m.served.iter().sum();
            let failed: u64 = m.failed.iter().sum();
            let what = format!("{kind:?} {variant:?}");
            assert!(served > 0, "{what}");
            assert_eq!(o.unfinished, 0, "{what}");
            assert_eq!(m.arrivals, served + failed, "{what}");
            assert_eq!(failed, m.failed_timeout + m.failed_stopped, "{what}");
            // Opened at the server = accepted; each accepted one either
            // completed its handshake or was dropped by the failover.
            let opened: u64 = m.opened.iter().sum();
            let refused: u64 = m.refused.iter().sum();
            let s = &o.server;
            assert_eq!(opened, s.accepted, "{what}");
            assert_eq!(opened + refused, s.attempts, "{what}");
            assert_eq!(
                refused,
                s.refused_down + s.refused_rate + s.refused_full,
                "{what}"
            );
            if kind != Kind::Failover {
                assert_eq!(s.accepted, s.established, "{what}");
                assert_eq!(s.refused_down, 0, "{what}");
            }
            // Every established connection reached a core, or its process
            // was gone; and every one was closed in the end.
            assert_eq!(s.established, o.reported + o.orphaned, "{what}");
            assert_eq!(o.held, 0, "{what}: connections left open");
        }
    }
}

#[test]
fn a_failover_cuts_operations_and_refuses_connects_then_recovers() {
    let o = run_to_the_end(tiny(Kind::Failover, Variant::Defaults));
    let m = &o.metrics;
    assert!(o.server.refused_down > 0 || m.cut.iter().sum::<u64>() > 0);
    // Served again after the server is back (from 25 s on).
    assert!(m.served[30..40].iter().sum::<u64>() > 0);
    assert!(o.server.established > 0);
}
