//! Leak detection (the builder's `leak_detection_threshold`): cmap-async's
//! book and reports ([`LeakBook`]), kept here in a `RefCell` with a `Cell`
//! count, and its watcher as a local task on the pool's runtime.
//!
//! Off (the default), nothing of it exists: no task, no registry, no clock
//! read per checkout. On, a checkout writes one entry (its instant and
//! where its `get()` was called) and its return removes it; the watcher
//! sleeps until the earliest deadline of an entry not yet reported, warns
//! about the ones due, and sleeps without a deadline while nothing is out.

use std::cell::{Cell, RefCell};
use std::panic::Location;
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use cmap_async::driver::{Back, LeakBook, LeakNext};
use cmap_core::{Address, ConnectionId};

use crate::manager::ManageConnection;
use crate::runtime::LocalRuntime;
use crate::shared::Shared;
use crate::signal::Signal;

/// One pool's leak detection, present only when a threshold is set.
pub(crate) struct Leaks {
    book: RefCell<LeakBook>,
    /// Wakes the watcher: an entry to watch when none was, or the pool
    /// closed.
    wake: Rc<Signal>,
    /// Guards reported so far (`Stats::leaks_detected`).
    detected: Cell<u64>,
}

impl Leaks {
    /// `None` for no threshold or zero (off).
    pub(crate) fn new(threshold: Option<Duration>) -> Option<Leaks> {
        Some(Leaks {
            book: RefCell::new(LeakBook::new(threshold)?),
            wake: Rc::default(),
            detected: Cell::new(0),
        })
    }

    pub(crate) fn detected(&self) -> u64 {
        self.detected.get()
    }

    /// Connection `id` was checked out at `since` by `caller`.
    pub(crate) fn checked_out(&self, id: ConnectionId, since: Instant, caller: &'static Location<'static>) {
        if self.book.borrow_mut().checked_out(id, since, caller) {
            self.wake.fire();
        }
    }

    /// Connection `id` came back at `now`: one INFO note if it had been
    /// reported.
    pub(crate) fn returned(&self, id: ConnectionId, now: Instant, address: &Address, back: Back) {
        let (report, over) = {
            let mut book = self.book.borrow_mut();
            let report = book.returned(id, now);
            (report, book.is_over())
        };
        if over {
            self.wake.fire();
        }
        if let Some(report) = report {
            report.note_back(address, back);
        }
    }

    /// The pool closed: the watcher ends once every guard is back.
    pub(crate) fn close(&self) {
        self.book.borrow_mut().close();
        self.wake.fire();
    }
}

/// The watcher task; it holds the pool weakly.
pub(crate) async fn watch<M: ManageConnection, R: LocalRuntime>(pool: Weak<Shared<M, R>>) {
    loop {
        let Some(shared) = pool.upgrade() else { return };
        let Some(leaks) = &shared.leaks else { return };
        let (due, next) = leaks.book.borrow_mut().scan(shared.rt.now());
        for report in due {
            report.warn(&shared.address);
            // Counted once logged, as cmap-async does.
            leaks.detected.set(leaks.detected.get() + 1);
        }
        let wake = leaks.wake.clone();
        let sleep = match next {
            LeakNext::Exit => return,
            LeakNext::Sleep(deadline) => deadline.map(|d| shared.rt.sleep_until(d)),
        };
        // Not held while asleep: the last handle dropped ends the pool.
        drop(shared);
        match sleep {
            Some(sleep) => futures_lite::future::or(sleep, wake.wait()).await,
            None => wake.wait().await,
        }
    }
}
