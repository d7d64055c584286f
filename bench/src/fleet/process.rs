//! One simulated process: its application's requests and the driver
//! around its `cmap_core::Pool` — the same core users link, fed the way
//! cmap-async feeds it, on virtual time.
//!
//! The driver model, beyond what the core does itself:
//!
//! - A request checks out with a deadline of its arrival + the wait
//!   timeout, holds the connection for its hold time, checks it in.
//! - A checkout that fails retryably (`PoolClearedError`, or a connection
//!   error when a refused connect cleared the pool) is retried until that
//!   deadline; while the pool is paused the request waits, as a MongoDB
//!   driver's server selection waits for a server marked Unknown.
//! - The monitor (SDAM): after a clear it re-checks the server every
//!   `min_heartbeat` and marks the pool ready once it answers; after a
//!   failover it notices at its next heartbeat and clears the pool.
//! - A connection the server dropped fails the operation that uses it
//!   (a network error on an established connection): the connection is
//!   checked in marked errored and the pool cleared (SDAM's reaction), once
//!   per failover.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Instant;

use cmap_core::virtual_time::{self, VirtualDriver};
use cmap_core::{Action, CheckOut, CheckOutError, Clear, ConnectionId, Output, Pool, PoolState, Pooled};

use super::metrics::Failure;
use super::sched::Nanos;
use super::server::{Conn, Refusal};
use super::sim::{Ev, World};

/// A request waiting for a connection.
#[derive(Clone, Copy, Debug)]
struct Req {
    arrived: Nanos,
    deadline: Nanos,
}

pub struct Process {
    pool: Pool<Conn>,
    /// Which start of the process this is (a deploy restarts it): events
    /// of an earlier one are for a process that is gone.
    inst: u32,
    /// Taking requests: false from a deploy's stop to the next start.
    up: bool,
    waiters: HashMap<u64, Req>,
    /// Requests waiting for the paused pool to be ready.
    parked: Vec<Req>,
    /// Requests to check out again once the outputs are drained.
    retry: Vec<Req>,
    timer_at: Option<Nanos>,
    monitor_scheduled: bool,
    /// The server epoch this process's monitor last saw.
    known_epoch: u32,
    /// Connections reported established to the core (abandoned ones too).
    pub established: u64,
}

impl Process {
    /// A process started at `now`: a new pool, marked ready, and its
    /// first request scheduled.
    pub fn new(w: &mut World, p: u32, inst: u32) -> Process {
        let now = w.sched.now();
        let options = w.cfg.pool_options(w.rng.next_u64());
        let mut pool = Pool::new(w.instant(now), "db:27017".parse().expect("an address"), options);
        pool.set_events_enabled(false);
        let mut process = Process {
            pool,
            inst,
            up: true,
            waiters: HashMap::new(),
            parked: Vec::new(),
            retry: Vec::new(),
            timer_at: None,
            monitor_scheduled: false,
            known_epoch: w.server.epoch,
            established: 0,
        };
        process.pool.handle_ready(w.instant(now)).expect("a new pool");
        process.settle(w, p);
        let next = w.next_arrival(now);
        w.sched.at(next, Ev::Arrival { p, inst });
        process
    }

    pub fn inst(&self) -> u32 {
        self.inst
    }

    /// Requests still waiting for a connection.
    pub fn waiting(&self) -> u64 {
        (self.waiters.len() + self.parked.len() + self.retry.len()) as u64
    }

    /// The process starts again (a deploy's second half, or its turn in
    /// the start ramp): a new pool, the old one dropped (its connections
    /// still out are closed as they come back).
    pub fn restart(&mut self, w: &mut World, p: u32) {
        let established = self.established;
        *self = Process::new(w, p, self.inst + 1);
        self.established += established;
    }

    pub fn on_arrival(&mut self, w: &mut World, p: u32, inst: u32) {
        if inst != self.inst || !self.up {
            return;
        }
        let now = w.sched.now();
        w.metrics.arrivals += 1;
        self.attempt(
            w,
            p,
            Req {
                arrived: now,
                deadline: now + w.cfg.load.wait_timeout,
            },
        );
        self.settle(w, p);
        let next = w.next_arrival(now);
        w.sched.at(next, Ev::Arrival { p, inst });
    }

    pub fn on_hold_end(&mut self, w: &mut World, p: u32, inst: u32, mut conn: Pooled<Conn>) {
        if inst != self.inst {
            // The process that held it is gone, and its socket with it.
            w.server_close(*conn);
            return;
        }
        let now = w.instant(w.sched.now());
        if !w.server.alive(*conn) {
            w.metrics.cut(w.sched.now());
            conn.mark_errored();
            self.pool.handle_check_in(now, conn).expect("this pool's");
            self.detect(w);
        } else {
            self.pool.handle_check_in(now, conn).expect("this pool's");
        }
        self.settle(w, p);
    }

    pub fn on_connected(
        &mut self,
        w: &mut World,
        p: u32,
        inst: u32,
        id: ConnectionId,
        result: Result<Conn, Refusal>,
    ) {
        let now = w.instant(w.sched.now());
        let result = match result {
            Ok(conn) if !w.server.handshake_done(conn) => Err(Refusal::Down),
            other => other,
        };
        if inst != self.inst {
            if let Ok(conn) = result {
                w.orphaned += 1;
                w.server_close(conn);
            }
            return;
        }
        match result {
            Ok(conn) => {
                self.established += 1;
                self.pool
                    .handle_established(now, id, conn, None)
                    .expect("an id the pool issued");
            }
            Err(refusal) => {
                let error = w.refusal_error(refusal);
                self.pool
                    .handle_establish_failed(now, id, error)
                    .expect("an id the pool issued");
            }
        }
        self.settle(w, p);
    }

    pub fn on_timer(&mut self, w: &mut World, p: u32, inst: u32, at: Nanos) {
        if inst != self.inst || self.timer_at != Some(at) {
            return;
        }
        self.timer_at = None;
        self.pool.handle_timeout(w.instant(w.sched.now()));
        self.settle(w, p);
    }

    /// The monitor's re-check while the pool is paused.
    pub fn on_monitor(&mut self, w: &mut World, p: u32, inst: u32) {
        if inst != self.inst {
            return;
        }
        self.monitor_scheduled = false;
        if self.up && self.pool.state() == PoolState::Paused && w.server.up {
            self.known_epoch = w.server.epoch;
            self.pool
                .handle_ready(w.instant(w.sched.now()))
                .expect("not closed");
        }
        self.settle(w, p);
    }

    /// The monitor's regular heartbeat, after a failover.
    pub fn on_heartbeat(&mut self, w: &mut World, p: u32, inst: u32) {
        if inst != self.inst || !self.up {
            return;
        }
        self.detect(w);
        self.settle(w, p);
    }

    /// A deploy stops the process: no more requests; the pool is closed
    /// (idle connections closed, connects abandoned, waiters failed), and
    /// the connections in use close as their requests end.
    pub fn stop(&mut self, w: &mut World, p: u32) {
        self.up = false;
        self.pool.handle_close(w.instant(w.sched.now()));
        for _ in self.parked.drain(..) {
            w.metrics.failed(w.sched.now(), Failure::Stopped);
        }
        self.settle(w, p);
    }

    /// The driver learns the server restarted (a dead connection, or its
    /// monitor): it clears the pool, once per failover.
    fn detect(&mut self, w: &mut World) {
        if self.known_epoch != w.server.epoch {
            self.known_epoch = w.server.epoch;
            let now = w.instant(w.sched.now());
            self.pool
                .handle_clear(now, Clear::default())
                .expect("not load-balanced");
        }
    }

    /// Checks a request out, or parks it, or fails it at its deadline.
    fn attempt(&mut self, w: &mut World, p: u32, req: Req) {
        let now = w.sched.now();
        if now >= req.deadline {
            w.metrics.failed(req.deadline, Failure::Timeout);
            return;
        }
        match self.pool.state() {
            PoolState::Paused => self.parked.push(req),
            PoolState::Closed => w.metrics.failed(now, Failure::Stopped),
            PoolState::Ready => {
                let deadline = cmap_core::Wait::Until(Some(w.instant(req.deadline)));
                match self.pool.handle_check_out_direct(w.instant(now), deadline) {
                    CheckOut::Ready(conn) => self.use_connection(w, p, req, conn),
                    CheckOut::Later(id) => {
                        self.waiters.insert(id.0, req);
                    }
                }
            }
        }
    }

    /// A request got `conn`: it holds it, or, if the server dropped it,
    /// the operation fails on it and the request tries again.
    fn use_connection(&mut self, w: &mut World, p: u32, req: Req, mut conn: Pooled<Conn>) {
        let now = w.sched.now();
        if !w.server.alive(*conn) {
            w.metrics.cut(now);
            conn.mark_errored();
            self.pool
                .handle_check_in(w.instant(now), conn)
                .expect("this pool's");
            self.detect(w);
            self.retry.push(req);
            return;
        }
        w.metrics.served(now, now - req.arrived);
        let hold = w.rng.exp(w.cfg.load.hold as f64) as Nanos;
        w.sched.at(
            now + hold,
            Ev::HoldEnd {
                p,
                inst: self.inst,
                conn,
            },
        );
    }

    /// Carries out the core's outputs until there are none and no request
    /// is left to retry, then schedules the timers the core and the
    /// monitor need.
    fn settle(&mut self, w: &mut World, p: u32) {
        loop {
            let now = w.instant(w.sched.now());
            let Ok(()) = virtual_time::drain(&mut Settling {
                process: self,
                w,
                p,
                now,
            });
            if !self.retry.is_empty() {
                for req in std::mem::take(&mut self.retry) {
                    self.attempt(w, p, req);
                }
                continue;
            }
            if self.pool.state() == PoolState::Ready && !self.parked.is_empty() {
                for req in std::mem::take(&mut self.parked) {
                    self.attempt(w, p, req);
                }
                continue;
            }
            break;
        }
        let now = w.sched.now();
        if self.up && self.pool.state() == PoolState::Paused && !self.monitor_scheduled {
            self.monitor_scheduled = true;
            w.sched.at(
                now + w.cfg.monitor.min_heartbeat,
                Ev::Monitor { p, inst: self.inst },
            );
        }
        if let Some(t) = self.pool.poll_timeout() {
            let at = w.nanos(t).max(now);
            if self.timer_at.is_none_or(|old| at < old) {
                self.timer_at = Some(at);
                w.sched.at(
                    at,
                    Ev::Timer {
                        p,
                        inst: self.inst,
                        at,
                    },
                );
            }
        }
    }

    fn carry_out(&mut self, w: &mut World, p: u32, output: Output<Conn>) {
        let Output::Action(action) = output else {
            return;
        };
        match action {
            Action::Establish { id } => w.connect(p, self.inst, id),
            Action::Deliver { waiter, connection } => match self.waiters.remove(&waiter.0) {
                Some(req) => self.use_connection(w, p, req, connection),
                None => unreachable!("a delivery for a checkout this driver made"),
            },
            Action::Fail { waiter, error } => {
                let req = self
                    .waiters
                    .remove(&waiter.0)
                    .expect("a checkout this driver made");
                let now = w.sched.now();
                match error {
                    CheckOutError::WaitQueueTimeout { .. } => w.metrics.failed(now, Failure::Timeout),
                    CheckOutError::PoolClosed { .. } => w.metrics.failed(now, Failure::Stopped),
                    // Retryable: a cleared pool, a refused connect.
                    _ => self.retry.push(req),
                }
            }
            Action::Close { connection, .. } => w.server_close(connection),
            // An abandoned connect still completes at the server; the core
            // disposes of its late result (a `Close`). No clear here
            // interrupts connections in use.
            _ => {}
        }
    }
}

/// A process draining its pool on cmap-core's virtual-time loop, at the
/// world's instant: each output carried out in the world.
struct Settling<'a> {
    process: &'a mut Process,
    w: &'a mut World,
    p: u32,
    now: Instant,
}

impl VirtualDriver<Conn> for Settling<'_> {
    type Error = Infallible;

    fn pool(&mut self) -> &mut Pool<Conn> {
        &mut self.process.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    fn perform(&mut self, output: Output<Conn>) -> Result<(), Infallible> {
        self.process.carry_out(self.w, self.p, output);
        Ok(())
    }
}
