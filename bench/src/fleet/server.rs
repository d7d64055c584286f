//! The simulated server: what it does with a connect (accept after the
//! connect latency, or refuse: down, rate-limited, full), how many
//! connections it holds, and the failover (every connection dropped,
//! connects refused, then accepting again).

use super::rng::Rng;
use super::scenario::ServerModel;
use super::sched::{Nanos, SEC};

/// A connection as the simulated processes hold it: the server's epoch
/// when it was accepted. A failover starts a new epoch; a connection of an
/// older one is dead (its socket was reset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conn {
    pub epoch: u32,
}

/// Why a connect was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The server is down (failover).
    Down,
    /// The ingress rate limiter had no token.
    RateLimited,
    /// At its maximum connection count.
    Full,
}

/// What the server answers a connect with, and when.
pub enum Answer {
    /// Accepted: established at `Nanos` (the connect latency from now).
    Accepted(Nanos, Conn),
    /// Refused: the client learns it at `Nanos`.
    Refused(Nanos, Refusal),
}

/// The server's counters since the start of the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub attempts: u64,
    pub accepted: u64,
    pub refused_down: u64,
    pub refused_rate: u64,
    pub refused_full: u64,
    /// Accepted connections whose handshake completed.
    pub established: u64,
    /// The most connections held at once.
    pub peak: usize,
}

pub struct Server {
    model: ServerModel,
    pub up: bool,
    pub epoch: u32,
    /// Connections held: handshaking and established.
    pub held: usize,
    tokens: f64,
    refilled_at: Nanos,
    pub counters: Counters,
}

impl Server {
    pub fn new(model: ServerModel) -> Server {
        Server {
            tokens: model.accept_burst,
            model,
            up: true,
            epoch: 0,
            held: 0,
            refilled_at: 0,
            counters: Counters::default(),
        }
    }

    fn refill(&mut self, now: Nanos) {
        let elapsed = now.saturating_sub(self.refilled_at) as f64 / SEC as f64;
        self.tokens = (self.tokens + elapsed * self.model.accept_rate).min(self.model.accept_burst);
        self.refilled_at = now;
    }

    /// A connect arrives at `now`.
    pub fn connect(&mut self, now: Nanos, rng: &mut Rng) -> Answer {
        self.counters.attempts += 1;
        let refuse_at = now + self.model.refuse;
        let refused = |r| Answer::Refused(refuse_at, r);
        if !self.up {
            self.counters.refused_down += 1;
            return refused(Refusal::Down);
        }
        self.refill(now);
        if self.tokens < 1.0 {
            self.counters.refused_rate += 1;
            return refused(Refusal::RateLimited);
        }
        if self.held >= self.model.max_connections {
            self.counters.refused_full += 1;
            return refused(Refusal::Full);
        }
        self.tokens -= 1.0;
        self.held += 1;
        self.counters.accepted += 1;
        self.counters.peak = self.counters.peak.max(self.held);
        let latency = rng.spread(self.model.connect as f64, self.model.connect_jitter);
        Answer::Accepted(now + latency as Nanos, Conn { epoch: self.epoch })
    }

    /// An accepted connection's handshake completes: whether it is still
    /// alive (no failover since it was accepted).
    pub fn handshake_done(&mut self, conn: Conn) -> bool {
        let alive = conn.epoch == self.epoch;
        if alive {
            self.counters.established += 1;
        }
        alive
    }

    /// The client closes a connection (a dead one is already gone).
    pub fn close(&mut self, conn: Conn) {
        if conn.epoch == self.epoch {
            self.held -= 1;
        }
    }

    /// Whether a connection still works.
    pub fn alive(&self, conn: Conn) -> bool {
        conn.epoch == self.epoch
    }

    /// Failover: every connection dropped, connects refused.
    pub fn go_down(&mut self) {
        self.up = false;
        self.epoch += 1;
        self.held = 0;
    }

    /// Accepting again, with a full token bucket (a restarted limiter).
    pub fn come_up(&mut self, now: Nanos) {
        self.up = true;
        self.tokens = self.model.accept_burst;
        self.refilled_at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::scenario::default_config;

    #[test]
    fn refuses_past_the_limits_and_after_a_failover() {
        let mut model = default_config().server;
        model.max_connections = 3;
        model.accept_rate = 10.0;
        model.accept_burst = 2.0;
        let mut s = Server::new(model);
        let mut rng = Rng::new(1);
        let accepted = |a: &Answer| matches!(a, Answer::Accepted(..));
        assert!(accepted(&s.connect(0, &mut rng)));
        assert!(accepted(&s.connect(0, &mut rng)));
        assert!(matches!(
            s.connect(0, &mut rng),
            Answer::Refused(_, Refusal::RateLimited)
        ));
        // 1 s later the bucket is full again, but the server is.
        assert!(accepted(&s.connect(SEC, &mut rng)));
        assert!(matches!(
            s.connect(SEC, &mut rng),
            Answer::Refused(_, Refusal::Full)
        ));
        s.close(Conn { epoch: 0 });
        assert_eq!(s.held, 2);
        s.go_down();
        assert!(matches!(
            s.connect(2 * SEC, &mut rng),
            Answer::Refused(_, Refusal::Down)
        ));
        assert!(!s.handshake_done(Conn { epoch: 0 }));
        s.close(Conn { epoch: 0 });
        assert_eq!(s.held, 0);
        s.come_up(3 * SEC);
        assert!(accepted(&s.connect(3 * SEC, &mut rng)));
    }
}
