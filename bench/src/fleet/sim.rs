//! The discrete-event loop: one `World` (the clock and its queue of
//! events, the server, the figures, the seeded generator) and the
//! processes, each event handed to whom it concerns.

use std::time::Instant;

use cmap_core::{ConnectionId, EstablishError, Pooled};

use super::metrics::Metrics;
use super::process::Process;
use super::rng::Rng;
use super::scenario::{Config, Kind};
use super::sched::{instant, Nanos, Scheduler, SEC};
use super::server::{Answer, Conn, Counters, Refusal, Server};

/// Something that happens at an instant.
pub enum Ev {
    /// A request arrives at process `p`.
    Arrival {
        p: u32,
        inst: u32,
    },
    /// A request is done with its connection.
    HoldEnd {
        p: u32,
        inst: u32,
        conn: Pooled<Conn>,
    },
    /// A connect's outcome reaches the process.
    Connected {
        p: u32,
        inst: u32,
        id: ConnectionId,
        result: Result<Conn, Refusal>,
    },
    /// The core's `poll_timeout` of process `p`, as scheduled at `at`.
    Timer {
        p: u32,
        inst: u32,
        at: Nanos,
    },
    /// The monitor re-checks a paused pool's server.
    Monitor {
        p: u32,
        inst: u32,
    },
    /// The monitor's next heartbeat after a failover.
    Heartbeat {
        p: u32,
        inst: u32,
    },
    /// A deploy stops, then starts, process `p`.
    Stop {
        p: u32,
    },
    Start {
        p: u32,
    },
    ServerDown,
    ServerUp,
}

/// Everything but the processes.
pub struct World {
    pub cfg: Config,
    pub sched: Scheduler<Ev>,
    pub server: Server,
    pub metrics: Metrics,
    pub rng: Rng,
    /// Established connections whose process had restarted meanwhile.
    pub orphaned: u64,
    base: Instant,
    /// One error per refusal, cloned into every failure (an `Arc`).
    refused: [EstablishError; 3],
}

impl World {
    pub fn instant(&self, t: Nanos) -> Instant {
        instant(self.base, t)
    }

    pub fn nanos(&self, t: Instant) -> Nanos {
        t.saturating_duration_since(self.base).as_nanos() as Nanos
    }

    /// The next arrival of a Poisson process whose rate is the load's
    /// times the scenario's multiplier: exact across a change of rate,
    /// since the wait for the next arrival has no memory.
    pub fn next_arrival(&mut self, now: Nanos) -> Nanos {
        let mut t = now;
        loop {
            let (factor, change) = self.cfg.scenario.load_at(t);
            let mean = SEC as f64 / (self.cfg.load.rate * factor);
            let at = t + self.rng.exp(mean) as Nanos;
            match change {
                Some(c) if at >= c => t = c,
                _ => return at,
            }
        }
    }

    /// Process `p` starts establishing connection `id`.
    pub fn connect(&mut self, p: u32, inst: u32, id: ConnectionId) {
        let now = self.sched.now();
        self.metrics.connect_started(now);
        let (at, result) = match self.server.connect(now, &mut self.rng) {
            Answer::Accepted(at, conn) => {
                self.metrics.opened(now, self.server.held);
                (at, Ok(conn))
            }
            Answer::Refused(at, refusal) => {
                self.metrics.refused(now);
                (at, Err(refusal))
            }
        };
        self.sched.at(at, Ev::Connected { p, inst, id, result });
    }

    /// A process closes a connection.
    pub fn server_close(&mut self, conn: Conn) {
        self.server.close(conn);
        self.metrics.held(self.sched.now(), self.server.held);
    }

    /// The error a refused connect fails with: a network error (connection
    /// refused, or reset by the server's limiter or its connection cap),
    /// labelled or not as the variant says.
    pub fn refusal_error(&self, refusal: Refusal) -> EstablishError {
        self.refused[refusal as usize].clone()
    }
}

/// A run's outcome.
pub struct Outcome {
    pub metrics: Metrics,
    pub server: Counters,
    /// Connections the processes reported established to their cores, and
    /// those whose process was gone when their handshake completed (for
    /// the tests' accounting).
    #[cfg_attr(not(test), allow(dead_code))]
    pub reported: u64,
    #[cfg_attr(not(test), allow(dead_code))]
    pub orphaned: u64,
    /// Connections the server still holds at the end.
    #[cfg_attr(not(test), allow(dead_code))]
    pub held: usize,
    /// Checkouts still waiting at the end.
    pub unfinished: u64,
    pub events: u64,
    pub wall_s: f64,
}

pub struct Sim {
    pub w: World,
    procs: Vec<Process>,
    events: u64,
    /// Shutting down: a deploy's pending starts are dropped.
    closing: bool,
}

impl Sim {
    pub fn new(cfg: Config) -> Sim {
        let kind = cfg.variant.refusal_kind();
        let error = |io: std::io::ErrorKind| EstablishError::new(kind, std::io::Error::from(io));
        let refused = [
            error(std::io::ErrorKind::ConnectionRefused),
            error(std::io::ErrorKind::ConnectionReset),
            error(std::io::ErrorKind::ConnectionReset),
        ];
        let mut w = World {
            sched: Scheduler::new(),
            server: Server::new(cfg.server.clone()),
            metrics: Metrics::new(cfg.duration, cfg.bucket),
            rng: Rng::new(cfg.seed),
            orphaned: 0,
            // The one real instant: the origin of virtual time. Only
            // differences from it ever reach the figures.
            base: Instant::now(),
            refused,
            cfg,
        };
        let n = w.cfg.processes as u32;
        let ramp = w.cfg.ramp;
        let mut procs: Vec<Process> = (0..n).map(|p| Process::new(&mut w, p, 0)).collect();
        if ramp > 0 {
            // Each process is down until its turn: its first pool closed
            // before anything happened, and a new one at its start.
            for p in 1..n {
                procs[p as usize].stop(&mut w, p);
                w.sched.at(ramp * p as Nanos / n as Nanos, Ev::Start { p });
            }
        }
        let s = w.cfg.scenario.clone();
        match s.kind {
            Kind::Steady | Kind::Spike => {}
            Kind::Failover => {
                w.sched.at(s.at, Ev::ServerDown);
                w.sched.at(s.at + s.down_for, Ev::ServerUp);
            }
            Kind::Deploy => {
                let waves = s.waves.max(1) as u32;
                for p in 0..n {
                    // Contiguous waves: processes 0.. first.
                    let wave = (p as u64 * waves as u64 / n.max(1) as u64) as Nanos;
                    let stop = s.at + wave * s.wave_every;
                    w.sched.at(stop, Ev::Stop { p });
                    w.sched.at(stop + s.restart, Ev::Start { p });
                }
            }
        }
        Sim {
            w,
            procs,
            events: 0,
            closing: false,
        }
    }

    /// Runs every event due up to `until`.
    pub fn run_until(&mut self, until: Nanos) {
        while let Some(ev) = self.w.sched.next(until) {
            self.events += 1;
            self.dispatch(ev);
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        let w = &mut self.w;
        match ev {
            Ev::Arrival { p, inst } => self.procs[p as usize].on_arrival(w, p, inst),
            Ev::HoldEnd { p, inst, conn } => self.procs[p as usize].on_hold_end(w, p, inst, conn),
            Ev::Connected { p, inst, id, result } => {
                w.metrics.connect_answered(w.sched.now());
                self.procs[p as usize].on_connected(w, p, inst, id, result)
            }
            Ev::Timer { p, inst, at } => self.procs[p as usize].on_timer(w, p, inst, at),
            Ev::Monitor { p, inst } => self.procs[p as usize].on_monitor(w, p, inst),
            Ev::Heartbeat { p, inst } => self.procs[p as usize].on_heartbeat(w, p, inst),
            Ev::Stop { p } => self.procs[p as usize].stop(w, p),
            Ev::Start { .. } if self.closing => {}
            Ev::Start { p } => self.procs[p as usize].restart(w, p),
            Ev::ServerDown => {
                w.server.go_down();
                w.metrics.held(w.sched.now(), 0);
                // Each monitor notices at its next heartbeat: processes'
                // heartbeats are not in phase.
                let now = w.sched.now();
                for (p, proc) in self.procs.iter().enumerate() {
                    let after = (w.rng.unit() * w.cfg.monitor.heartbeat as f64) as Nanos;
                    let inst = proc.inst();
                    w.sched.at(now + after, Ev::Heartbeat { p: p as u32, inst });
                }
            }
            Ev::ServerUp => w.server.come_up(w.sched.now()),
        }
    }

    /// Runs the configured duration and returns the figures.
    pub fn run(cfg: Config) -> Outcome {
        let began = Instant::now();
        let duration = cfg.duration;
        let mut sim = Sim::new(cfg);
        sim.run_until(duration);
        sim.finish(began)
    }

    /// Stops every process at the current instant and runs until nothing
    /// is left to happen: every connection comes back and is closed.
    #[cfg(test)]
    pub fn shut_down(&mut self) {
        self.closing = true;
        for p in 0..self.procs.len() as u32 {
            self.procs[p as usize].stop(&mut self.w, p);
        }
        self.run_until(Nanos::MAX);
    }

    pub fn finish(mut self, began: Instant) -> Outcome {
        let end = self.w.sched.now().max(self.w.cfg.duration);
        self.w.metrics.finish(end);
        let unfinished = self.procs.iter().map(Process::waiting).sum();
        Outcome {
            reported: self.procs.iter().map(|p| p.established).sum(),
            orphaned: self.w.orphaned,
            held: self.w.server.held,
            server: self.w.server.counters.clone(),
            unfinished,
            events: self.events,
            metrics: self.w.metrics,
            wall_s: began.elapsed().as_secs_f64(),
        }
    }
}
