//! A synchronous fake manager over `cmap-testkit`'s fake state (the same
//! knobs and counters the async scenarios use).
#![allow(dead_code)]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use cmap_blocking::{ManageConnection, Pool, PoolBuilder};
use cmap_testkit::{Conn, FakeError, State};

/// The fake, synchronous: connecting sleeps the connect's thread.
#[derive(Clone, Default)]
pub struct SyncFake {
    pub state: Arc<State>,
    /// The threads `connect` ran on.
    pub connect_threads: Arc<Mutex<Vec<ThreadId>>>,
}

impl std::ops::Deref for SyncFake {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl ManageConnection for SyncFake {
    type Connection = Conn;
    type Error = FakeError;

    fn classify(&self, error: &FakeError) -> cmap_blocking::EstablishErrorKind {
        error.kind()
    }

    fn connect(&self) -> Result<Conn, FakeError> {
        self.connect_threads.lock().unwrap().push(thread::current().id());
        let delay = self.connect_delay();
        if !delay.is_zero() {
            thread::sleep(delay);
        }
        while self.hang.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(5));
        }
        self.open()
    }

    fn check(&self, conn: &mut Conn) -> Result<(), FakeError> {
        self.check_within(conn, None)
    }

    /// Takes `check_us`, cut to what is left of the checkout's deadline
    /// (then it fails, as a bounded round trip would).
    fn check_within(&self, _conn: &mut Conn, remaining: Option<Duration>) -> Result<(), FakeError> {
        let wanted = Duration::from_micros(self.check_us.load(Ordering::SeqCst));
        let slept = remaining.map_or(wanted, |r| r.min(wanted));
        thread::sleep(slept);
        if slept < wanted {
            return Err(FakeError("check timed out"));
        }
        self.state.check()
    }

    fn reset(&self, _conn: &mut Conn) -> Result<(), FakeError> {
        let us = self.reset_us.load(Ordering::SeqCst);
        if us > 0 {
            thread::sleep(Duration::from_micros(us));
        }
        self.reset_done();
        Ok(())
    }

    fn is_broken(&self, conn: &mut Conn) -> bool {
        self.state.is_broken(conn)
    }
}

pub fn builder() -> PoolBuilder<SyncFake> {
    Pool::builder().address("fake:27017")
}

/// Checks `cond` every millisecond for up to two seconds.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
    panic!("timed out waiting for: {what}");
}
