//! Simulated threads: a queue of operations and what the thread is blocked
//! on. Plain data; the engine in `sim.rs` decides when they run.

use std::collections::VecDeque;
use std::time::Instant;

use cmap_core::WaiterId;

use crate::format::Operation;
use crate::observe::RaisedError;

/// Index of the main thread in the engine's thread list.
pub const MAIN: usize = 0;

/// One simulated thread.
#[derive(Debug)]
pub struct SimThread {
    /// `main`, or the name given to `start`.
    pub name: String,
    /// Operations not yet begun, in order.
    pub queue: VecDeque<Operation>,
    /// What it waits for, if anything.
    pub blocked: Option<Blocked>,
    /// Its first error. A thread stops at its first error, as a thread of
    /// a real runner does when an operation throws; the rest of its queue
    /// never runs.
    pub error: Option<RaisedError>,
}

/// What a blocked thread waits for, and the operation that blocked it (for
/// messages).
#[derive(Debug)]
pub struct Blocked {
    /// The condition.
    pub on: Block,
    /// The operation, as written.
    pub op: String,
}

/// The conditions a thread can wait on.
#[derive(Debug)]
pub enum Block {
    /// The outcome of checkout `waiter`, to be stored under `label`.
    CheckOut { waiter: WaiterId, label: Option<String> },
    /// `wait`: until this instant.
    Sleep { until: Instant },
    /// `waitForEvent`: `count` events of type `event` seen, or fail at
    /// `deadline`.
    Event {
        event: String,
        count: usize,
        deadline: Option<Instant>,
    },
    /// `waitForThread`: thread `target` finished.
    Join { target: usize },
}

impl SimThread {
    /// A thread with nothing to do yet.
    pub fn new(name: &str) -> SimThread {
        SimThread {
            name: name.to_owned(),
            queue: VecDeque::new(),
            blocked: None,
            error: None,
        }
    }

    /// Whether it has an operation to begin now.
    pub fn runnable(&self) -> bool {
        self.blocked.is_none() && self.error.is_none() && !self.queue.is_empty()
    }

    /// Whether it is done: idle with an empty queue, or stopped by an error.
    pub fn finished(&self) -> bool {
        self.blocked.is_none() && (self.queue.is_empty() || self.error.is_some())
    }

    /// The instant its wait ends by itself (a `wait`, a `waitForEvent`
    /// timeout), if it has one.
    pub fn wakes_at(&self) -> Option<Instant> {
        match self.blocked.as_ref()?.on {
            Block::Sleep { until } => Some(until),
            Block::Event { deadline, .. } => deadline,
            _ => None,
        }
    }

    /// Ends its wait with `error` (the first one counts) or without.
    pub fn resume(&mut self, error: Option<RaisedError>) {
        self.blocked = None;
        if self.error.is_none() {
            self.error = error;
        }
    }

    /// What it is doing, for messages about a stalled run.
    pub fn describe(&self) -> String {
        match (&self.blocked, &self.error) {
            (Some(b), _) => format!("{} blocked on `{}`", self.name, b.op),
            (None, Some(e)) => format!("{} stopped by {}", self.name, e.kind),
            (None, None) => format!("{} idle with {} operations queued", self.name, self.queue.len()),
        }
    }
}
