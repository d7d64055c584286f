//! What a run measures: per-second series at the server and at the
//! processes, wait-time histograms per bucket, and the totals.

use hdrhistogram::Histogram;

use super::sched::{Nanos, SEC};

/// Why a request got no connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Its deadline (the wait timeout) passed.
    Timeout,
    /// Its process stopped (a deploy) before it was served.
    Stopped,
}

/// Per-second series over the whole run, and histograms of the wait.
pub struct Metrics {
    /// Connects the server accepted, per second.
    pub opened: Vec<u64>,
    /// Connects it refused, per second.
    pub refused: Vec<u64>,
    /// The most connections it held within each second.
    pub peak: Vec<usize>,
    /// Requests that got a connection, per second.
    pub served: Vec<u64>,
    /// Requests that got none, per second.
    pub failed: Vec<u64>,
    /// Operations cut by a dropped connection (the failover), per second.
    pub cut: Vec<u64>,
    /// The most connects in flight (started by the pools, not yet
    /// answered by the server) within each second.
    pub in_flight: Vec<usize>,
    /// Connects in flight now, and the second of the last change.
    connecting: (usize, usize),
    /// Wait (arrival to connection) of the served requests, per bucket, µs.
    pub wait: Vec<Histogram<u64>>,
    bucket: Nanos,
    pub arrivals: u64,
    pub failed_timeout: u64,
    pub failed_stopped: u64,
    /// The second of the last change of the server's count, and the count.
    last: (usize, usize),
}

/// The longest wait a histogram records, µs (longer ones are clamped).
const MAX_WAIT_US: u64 = 3_600_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_WAIT_US, 3).expect("valid histogram bounds")
}

impl Metrics {
    pub fn new(duration: Nanos, bucket: Nanos) -> Metrics {
        let secs = duration.div_ceil(SEC) as usize + 1;
        let buckets = duration.div_ceil(bucket) as usize + 1;
        Metrics {
            opened: vec![0; secs],
            refused: vec![0; secs],
            peak: vec![0; secs],
            served: vec![0; secs],
            failed: vec![0; secs],
            cut: vec![0; secs],
            in_flight: vec![0; secs],
            connecting: (0, 0),
            wait: (0..buckets).map(|_| histogram()).collect(),
            bucket,
            arrivals: 0,
            failed_timeout: 0,
            failed_stopped: 0,
            last: (0, 0),
        }
    }

    fn sec(&self, t: Nanos) -> usize {
        ((t / SEC) as usize).min(self.opened.len() - 1)
    }

    pub fn opened(&mut self, t: Nanos, held: usize) {
        let s = self.sec(t);
        self.opened[s] += 1;
        self.held(t, held);
    }

    pub fn refused(&mut self, t: Nanos) {
        let s = self.sec(t);
        self.refused[s] += 1;
    }

    pub fn served(&mut self, t: Nanos, waited: Nanos) {
        let s = self.sec(t);
        self.served[s] += 1;
        let b = ((t / self.bucket) as usize).min(self.wait.len() - 1);
        self.wait[b].saturating_record((waited / 1000).clamp(1, MAX_WAIT_US));
    }

    pub fn failed(&mut self, t: Nanos, why: Failure) {
        let s = self.sec(t);
        self.failed[s] += 1;
        match why {
            Failure::Timeout => self.failed_timeout += 1,
            Failure::Stopped => self.failed_stopped += 1,
        }
    }

    pub fn cut(&mut self, t: Nanos) {
        let s = self.sec(t);
        self.cut[s] += 1;
    }

    /// A pool started a connect at `t`.
    pub fn connect_started(&mut self, t: Nanos) {
        self.move_connecting(t, 1);
    }

    /// The server answered a connect at `t`.
    pub fn connect_answered(&mut self, t: Nanos) {
        self.move_connecting(t, -1);
    }

    fn move_connecting(&mut self, t: Nanos, by: isize) {
        let s = self.sec(t);
        let (from, count) = self.connecting;
        for p in &mut self.in_flight[from + 1..=s.max(from)] {
            *p = (*p).max(count);
        }
        let now = count.saturating_add_signed(by);
        self.in_flight[s] = self.in_flight[s].max(now);
        self.connecting = (s.max(from), now);
    }

    /// The server's connection count changed to `held` at `t`. Each
    /// second's peak is the most it held in that second, the count it
    /// began the second with included.
    pub fn held(&mut self, t: Nanos, held: usize) {
        let s = self.sec(t);
        self.carry_to(s);
        self.peak[s] = self.peak[s].max(held);
        self.last = (s, held);
    }

    /// Seconds after the last change begin with the count it left.
    fn carry_to(&mut self, s: usize) {
        let (from, count) = self.last;
        for p in &mut self.peak[from + 1..=s.max(from)] {
            *p = (*p).max(count);
        }
    }

    /// Ends the run at `t`: the seconds since the last change get its count.
    pub fn finish(&mut self, t: Nanos) {
        let s = self.sec(t);
        self.carry_to(s);
        self.last.0 = self.last.0.max(s);
        self.move_connecting(t, 0);
    }

    pub fn bucket(&self) -> Nanos {
        self.bucket
    }
}
