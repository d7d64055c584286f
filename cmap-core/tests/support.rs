//! A tiny driver for tests: virtual time, outputs drained into lists.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use cmap_core::virtual_time::{self, VirtualDriver};
use cmap_core::{
    Action, ConnectionId, Event, Input, Output, Pool, PoolOptions, Pooled, UsageError, WaiterId,
};

/// A fake connection: just its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn(pub u64);

pub struct Harness {
    pub pool: Pool<Conn>,
    pub t0: Instant,
    pub now: Instant,
    pub events: Vec<Event>,
    pub delivered: Vec<(WaiterId, Pooled<Conn>)>,
    pub failed: Vec<(WaiterId, cmap_core::CheckOutError)>,
    pub establishing: Vec<ConnectionId>,
    pub aborted: Vec<ConnectionId>,
    pub closed: Vec<(ConnectionId, cmap_core::ClosedReason)>,
    pub interrupted: Vec<ConnectionId>,
}

/// Reports that establishing connection `id` failed (connection refused).
///
/// Every test that fails an establishment calls this, never
/// `handle_establish_failed` itself: the error type that input takes is
/// changing, and this is the one place to adapt.
pub fn fail_establish<C>(pool: &mut Pool<C>, now: Instant, id: ConnectionId) -> Result<(), UsageError> {
    // Unlabelled (as an authentication failure): the kind of failure that
    // clears the pool, so that a test can see whether it does.
    fail_establish_with(pool, now, id, cmap_core::EstablishErrorKind::Other)
}

/// Reports that establishing connection `id` failed with an error of
/// `kind` (a network error carries the backpressure labels).
pub fn fail_establish_with<C>(
    pool: &mut Pool<C>,
    now: Instant,
    id: ConnectionId,
    kind: cmap_core::EstablishErrorKind,
) -> Result<(), UsageError> {
    pool.handle_establish_failed(now, id, establish_error(id, kind))
}

/// The error of a failed establishment of connection `id`, of `kind`.
pub fn establish_error(id: ConnectionId, kind: cmap_core::EstablishErrorKind) -> cmap_core::EstablishError {
    let io = std::io::Error::other(format!("establishing connection {id} failed"));
    cmap_core::EstablishError::new(kind, io)
}

/// The unknown options of `cs` in the order they came, each by its name
/// with the known option it suggests, if any.
pub fn suggestions(cs: &cmap_core::ConnectionString) -> Vec<(&str, Option<&'static str>)> {
    cs.unknown_options()
        .iter()
        .map(|u| (u.name(), u.suggestion()))
        .collect()
}

#[allow(clippy::disallowed_methods)]
pub fn origin() -> Instant {
    Instant::now()
}

/// The harness on cmap-core's virtual-time loop: outputs filed in lists.
impl VirtualDriver<Conn> for Harness {
    type Error = String;

    fn pool(&mut self) -> &mut Pool<Conn> {
        &mut self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    fn perform(&mut self, out: Output<Conn>) -> Result<(), String> {
        match out {
            Output::Event(e) => self.events.push(e),
            Output::Action(Action::Establish { id }) => self.establishing.push(id),
            Output::Action(Action::AbortEstablish { id }) => self.aborted.push(id),
            Output::Action(Action::Deliver { waiter, connection }) => {
                self.delivered.push((waiter, connection))
            }
            Output::Action(Action::Fail { waiter, error }) => self.failed.push((waiter, error)),
            Output::Action(Action::Close { id, reason, .. }) => self.closed.push((id, reason)),
            Output::Action(Action::Interrupt { id }) => self.interrupted.push(id),
        }
        Ok(())
    }

    fn settled(&mut self) -> Result<(), String> {
        self.pool.check_invariants()
    }
}

impl Harness {
    pub fn new(options: PoolOptions) -> Harness {
        let t0 = origin();
        let pool = Pool::new(t0, "test:27017".parse().unwrap(), options);
        let mut h = Harness {
            pool,
            t0,
            now: t0,
            events: vec![],
            delivered: vec![],
            failed: vec![],
            establishing: vec![],
            aborted: vec![],
            closed: vec![],
            interrupted: vec![],
        };
        h.drain();
        h
    }

    pub fn ready(options: PoolOptions) -> Harness {
        let mut h = Harness::new(options);
        h.pool.handle_ready(h.now).unwrap();
        h.drain();
        h
    }

    /// Performs every output (cmap-core's virtual-time loop, which checks
    /// that `has_output` announced each), then checks the invariants.
    pub fn drain(&mut self) {
        virtual_time::drain(self).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Moves the clock `ms` and fires the timer then, once: a timer that
    /// wakes late, or a jump past several deadlines at once.
    pub fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        virtual_time::apply(self, Input::Timeout).unwrap_or_else(|e| panic!("{e}"));
    }

    pub fn check_out(&mut self) -> WaiterId {
        let w = self.pool.handle_check_out(self.now);
        self.drain();
        w
    }

    /// Completes every pending establishment, in order.
    pub fn establish_all(&mut self) {
        for id in std::mem::take(&mut self.establishing) {
            self.pool
                .handle_established(self.now, id, Conn(id.0), None)
                .unwrap();
            self.drain();
        }
    }

    /// Checks out and establishes as needed; returns the connection.
    pub fn take(&mut self) -> Pooled<Conn> {
        let w = self.check_out();
        self.establish_all();
        let pos = self
            .delivered
            .iter()
            .position(|(id, _)| *id == w)
            .expect("delivered");
        self.delivered.remove(pos).1
    }

    pub fn check_in(&mut self, c: Pooled<Conn>) {
        self.pool.handle_check_in(self.now, c).unwrap();
        self.drain();
    }

    /// `ConnectionClosed` events as (id, reason), in order.
    pub fn closed_reasons(&self) -> Vec<(u64, cmap_core::ClosedReason)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::ConnectionClosed {
                    connection_id,
                    reason,
                    ..
                } => Some((connection_id.0, *reason)),
                _ => None,
            })
            .collect()
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.events.iter().map(|e| e.name()).collect()
    }

    pub fn clear_events(&mut self) {
        self.events.clear();
    }
}
