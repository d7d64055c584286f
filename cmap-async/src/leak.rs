//! Leak detection (HikariCP's `leakDetectionThreshold`): a guard held
//! longer than the builder's threshold is reported once, at WARN, with the
//! place its `get()` was called; when it comes back, an INFO note says
//! after how long.
//!
//! Off by default, and then it costs nothing: no task, no registry, no
//! clock read, no lock and no atomic per checkout (the guard carries a
//! `tracked` flag that stays `false`, and the checkout future the caller's
//! `&'static Location`, one pointer).
//!
//! On, each checkout writes one entry (its instant and the caller's
//! location) in a registry under its own mutex, and each return removes
//! it. One watcher task per pool sleeps until the earliest deadline of an
//! entry not yet reported, reports the ones due and sleeps again: its
//! cadence is at most one wake per threshold for a steady stream of short
//! uses, and it sleeps without a deadline while nothing is out.
//!
//! The registry and the reports ([`LeakBook`], [`LeakReport`]) hold no
//! lock: cmap-local keeps the same book in a `RefCell` and its watcher on
//! its own thread.

use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use cmap_core::{Address, ConnectionId};
use event_listener::Event;

use crate::logging::LOG_TARGET;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::shared::Shared;
use crate::util::race;

/// Where a `get()` was called: `#[track_caller]` on the checkout methods.
pub type Caller = &'static Location<'static>;

/// One pool's leak detection, present only when a threshold is set: a
/// [`LeakBook`] under its own mutex, the watcher's wake-up and the count
/// of reports. Part of the [driver layer](crate::driver).
pub struct Leaks {
    book: Mutex<LeakBook>,
    /// Wakes the watcher: an entry to watch when none was, the pool
    /// closed, or a reset after fork.
    wake: Event,
    /// Guards reported so far (`Stats::leaks_detected`).
    detected: AtomicU64,
}

/// The registry of the guards being watched: what a checkout and a return
/// write, and what the watcher scans. No lock of its own (cmap-async
/// keeps it under a mutex, cmap-local in a `RefCell`). Part of the
/// [driver layer](crate::driver).
#[derive(Debug)]
pub struct LeakBook {
    threshold: Duration,
    out: HashMap<ConnectionId, Out>,
    /// Entries not reported yet: while there are none the watcher sleeps
    /// without a deadline, so the next checkout wakes it.
    unreported: usize,
    /// The pool is closed: the watcher ends once nothing is out.
    closed: bool,
}

/// A checked-out connection being watched.
#[derive(Debug)]
struct Out {
    since: Instant,
    caller: Caller,
    reported: bool,
}

/// What the watcher does next.
#[derive(Debug, PartialEq, Eq)]
pub enum LeakNext {
    /// Until this instant (`None`: until woken).
    Sleep(Option<Instant>),
    /// The pool is closed and every guard is back.
    Exit,
}

/// How a watched guard came back.
#[derive(Clone, Copy, Debug)]
pub enum Back {
    /// Checked in.
    CheckedIn,
    /// Detached.
    Detached,
}

/// A report to log once the registry is released: a guard held past the
/// threshold ([`warn`](Self::warn)), or one reported earlier that came
/// back ([`note_back`](Self::note_back)).
#[derive(Debug)]
pub struct LeakReport {
    id: ConnectionId,
    held: Duration,
    threshold: Duration,
    caller: Caller,
}

fn millis(d: Duration) -> u128 {
    d.as_millis()
}

impl LeakBook {
    /// A book for `threshold`; `None` for no threshold or zero (off, as
    /// HikariCP's `0`).
    pub fn new(threshold: Option<Duration>) -> Option<LeakBook> {
        let threshold = threshold.filter(|t| !t.is_zero())?;
        Some(LeakBook {
            threshold,
            out: HashMap::new(),
            unreported: 0,
            closed: false,
        })
    }

    /// Connection `id` was checked out at `since`, by `caller`; returns
    /// whether the watcher must be woken (it had nothing to wait for:
    /// deadlines come in the order of checkouts, so only a watcher that
    /// slept without one sleeps past this one's).
    pub fn checked_out(
        &mut self,
        id: ConnectionId,
        since: Instant,
        caller: &'static Location<'static>,
    ) -> bool {
        self.out.insert(
            id,
            Out {
                since,
                caller,
                reported: false,
            },
        );
        self.unreported += 1;
        self.unreported == 1
    }

    /// Connection `id` came back at `now`: the note to log if it had been
    /// reported.
    pub fn returned(&mut self, id: ConnectionId, now: Instant) -> Option<LeakReport> {
        let out = self.out.remove(&id)?;
        if !out.reported {
            self.unreported -= 1;
            return None;
        }
        Some(LeakReport {
            id,
            held: now.saturating_duration_since(out.since),
            threshold: self.threshold,
            caller: out.caller,
        })
    }

    /// The pool closed: the watcher ends once every guard is back.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Closed, and every guard back: the watcher ends.
    pub fn is_over(&self) -> bool {
        self.closed && self.out.is_empty()
    }

    /// Marks the guards held past the threshold at `now` reported and
    /// returns them, in connection order, with when to look again.
    pub fn scan(&mut self, now: Instant) -> (Vec<LeakReport>, LeakNext) {
        if self.is_over() {
            return (Vec::new(), LeakNext::Exit);
        }
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        for (id, out) in self.out.iter_mut().filter(|(_, o)| !o.reported) {
            match out.since.checked_add(self.threshold) {
                Some(deadline) if deadline > now => {
                    next = Some(next.map_or(deadline, |n| n.min(deadline)));
                }
                // Due (or so far off that it cannot be told apart).
                Some(_) => {
                    out.reported = true;
                    due.push(LeakReport {
                        id: *id,
                        held: now.saturating_duration_since(out.since),
                        threshold: self.threshold,
                        caller: out.caller,
                    });
                }
                None => {}
            }
        }
        self.unreported -= due.len();
        due.sort_by_key(|r| r.id);
        (due, LeakNext::Sleep(next))
    }
}

impl LeakReport {
    /// The WARN message of a guard held past the threshold.
    pub fn warn(&self, address: &Address) {
        let LeakReport {
            id,
            held,
            threshold,
            caller,
        } = self;
        tracing::warn!(
            target: LOG_TARGET,
            serverHost = address.host(),
            serverPort = address.port(),
            driverConnectionId = id.0,
            durationMS = held.as_secs_f64() * 1000.0,
            thresholdMS = threshold.as_secs_f64() * 1000.0,
            location = %caller,
            "Connection {id} held for {} ms, longer than the leak detection threshold of {} ms; \
             checked out at {caller}",
            millis(*held),
            millis(*threshold),
        );
    }

    /// The INFO note of a reported guard that came back.
    pub fn note_back(&self, address: &Address, back: Back) {
        let how = match back {
            Back::CheckedIn => "returned",
            Back::Detached => "detached",
        };
        let LeakReport { id, held, caller, .. } = self;
        tracing::info!(
            target: LOG_TARGET,
            serverHost = address.host(),
            serverPort = address.port(),
            driverConnectionId = id.0,
            durationMS = held.as_secs_f64() * 1000.0,
            location = %caller,
            "Connection {id} reported as a possible leak was {how} after {} ms",
            millis(*held),
        );
    }
}

impl Leaks {
    /// Leak detection with `threshold`; `None` for no threshold or zero.
    pub fn new(threshold: Option<Duration>) -> Option<Box<Leaks>> {
        Some(Box::new(Leaks {
            book: Mutex::new(LeakBook::new(threshold)?),
            wake: Event::new(),
            detected: AtomicU64::new(0),
        }))
    }

    fn book(&self) -> MutexGuard<'_, LeakBook> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Guards reported so far.
    pub fn detected(&self) -> u64 {
        self.detected.load(Ordering::Acquire)
    }

    /// Connection `id` was checked out at `since`, by `caller`.
    pub fn checked_out(&self, id: ConnectionId, since: Instant, caller: Caller) {
        if self.book().checked_out(id, since, caller) {
            self.wake.notify_additional(1);
        }
    }

    /// Connection `id` came back at `now`: one INFO note if it had been
    /// reported.
    pub fn returned(&self, id: ConnectionId, now: Instant, address: &Address, back: Back) {
        let (report, exit) = {
            let mut book = self.book();
            let report = book.returned(id, now);
            (report, book.is_over())
        };
        if exit {
            self.wake.notify_additional(1);
        }
        if let Some(report) = report {
            report.note_back(address, back);
        }
    }

    /// The pool closed: the watcher ends once every guard is back.
    pub fn close(&self) {
        self.book().close();
        self.wake.notify_additional(1);
    }

    /// Wakes every watcher (a reset after fork replaces it).
    pub fn wake_all(&self) {
        self.wake.notify(usize::MAX);
    }

    /// Reports the guards held past the threshold at `now`; returns when
    /// to look again.
    fn scan(&self, now: Instant, address: &Address) -> LeakNext {
        let (due, next) = self.book().scan(now);
        for report in due {
            report.warn(address);
            // Counted once logged: whoever sees the count sees the
            // warning out (and a return noted after it).
            self.detected.fetch_add(1, Ordering::Release);
        }
        next
    }
}

impl Leaks {
    /// A blocking watcher's turn: reports the guards held past the
    /// threshold at `now`, then blocks the calling thread until the next
    /// deadline or a wake-up; `false` when the watcher ends (the pool
    /// closed with every guard back). The caller holds the pool weakly,
    /// and not across this call.
    pub fn watch_turn(&self, now: Instant, address: &Address) -> bool {
        use event_listener::Listener;
        // Listen before looking, so a wake-up in between is not lost.
        let listener = self.wake.listen();
        match self.scan(now, address) {
            LeakNext::Exit => false,
            LeakNext::Sleep(None) => {
                listener.wait();
                true
            }
            LeakNext::Sleep(Some(deadline)) => {
                let _ = listener.wait_deadline(deadline);
                true
            }
        }
    }
}

/// The watcher task of a pool with leak detection; `epoch` is the pool's
/// `timer_epoch` it was started for (a reset after fork starts another).
pub(crate) async fn watch<M: ManageConnection, R: Runtime>(pool: Weak<Shared<M, R>>, epoch: u64) {
    loop {
        let Some(shared) = pool.upgrade() else { return };
        if shared.timer_epoch.load(Ordering::Acquire) != epoch {
            return;
        }
        let Some(leaks) = shared.leaks.as_deref() else {
            return;
        };
        // Listen before looking, so a wake-up in between is not lost.
        let listener = leaks.wake.listen();
        let next = leaks.scan(shared.rt.now(), &shared.address);
        let rt = shared.rt.clone();
        drop(shared);
        match next {
            LeakNext::Exit => return,
            LeakNext::Sleep(None) => listener.await,
            LeakNext::Sleep(Some(deadline)) => {
                race(rt.sleep_until(deadline), listener).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address() -> Address {
        Address::new("h", 1)
    }

    #[test]
    fn zero_or_none_is_off() {
        assert!(Leaks::new(None).is_none());
        assert!(Leaks::new(Some(Duration::ZERO)).is_none());
        assert!(Leaks::new(Some(Duration::from_millis(1))).is_some());
    }

    #[test]
    fn a_guard_is_reported_once_past_the_threshold_and_forgotten_when_back() {
        let leaks = Leaks::new(Some(Duration::from_millis(50))).unwrap();
        let t0 = Instant::now();
        let caller = Location::caller();
        leaks.checked_out(ConnectionId(1), t0, caller);
        leaks.checked_out(ConnectionId(2), t0 + Duration::from_millis(10), caller);
        let LeakNext::Sleep(next) = leaks.scan(t0 + Duration::from_millis(20), &address()) else {
            panic!("open")
        };
        assert_eq!(
            next,
            Some(t0 + Duration::from_millis(50)),
            "the earliest deadline"
        );
        assert_eq!(leaks.detected(), 0);
        // Connection 2 comes back in time; 1 does not.
        leaks.returned(
            ConnectionId(2),
            t0 + Duration::from_millis(30),
            &address(),
            Back::CheckedIn,
        );
        let LeakNext::Sleep(next) = leaks.scan(t0 + Duration::from_millis(50), &address()) else {
            panic!("open")
        };
        assert_eq!((next, leaks.detected()), (None, 1));
        // Reported once, however often it is looked at.
        let _ = leaks.scan(t0 + Duration::from_millis(500), &address());
        assert_eq!(leaks.detected(), 1);
        assert_eq!(leaks.book().unreported, 0);
        leaks.returned(
            ConnectionId(1),
            t0 + Duration::from_millis(600),
            &address(),
            Back::CheckedIn,
        );
        assert!(leaks.book().out.is_empty());
        leaks.close();
        assert!(matches!(leaks.scan(t0, &address()), LeakNext::Exit));
    }

    #[test]
    fn a_closed_pool_is_watched_until_its_guards_are_back() {
        let leaks = Leaks::new(Some(Duration::from_millis(50))).unwrap();
        let t0 = Instant::now();
        leaks.checked_out(ConnectionId(1), t0, Location::caller());
        leaks.close();
        assert!(matches!(leaks.scan(t0, &address()), LeakNext::Sleep(Some(_))));
        leaks.returned(ConnectionId(1), t0, &address(), Back::Detached);
        assert!(matches!(leaks.scan(t0, &address()), LeakNext::Exit));
    }
}
