//! The state every handle, guard and task of one pool shares, and every
//! method on it: the input cycle, through which every input drives the
//! core ([`cycle`]), the way out (`get.rs`) and the way back
//! (`give_back.rs`); here, the inputs that end the pool's life or part of
//! it (a detach, a close, an establishment's report, the fork reset).
//!
//! # Lock order
//!
//! Stated here once; other modules point here.
//!
//! 1. **The pool's lock** (`Shared::inner`).
//! 2. **The events delivery turn** (`EventHub::turn`, `events.rs`). Under
//!    the pool's lock it is only tried (`try_lock`), never waited for:
//!    event callbacks run while their thread holds the turn, and one may
//!    call into the pool and take the pool's lock. It is waited for only
//!    with no lock held (step 8 of the input cycle), and not at all by a thread that already
//!    holds it (a callback's own input, whose events the delivery loop
//!    below it sends). The turn's queue (`EventHub::queue`) is taken under
//!    either lock, and nothing is taken while it is held.
//! 3. **A waiter's slot** (`SharedSlot`, `slot.rs`). Taken only
//!    with the pool's lock released (step 9, and the checkout future's
//!    polls and drop), and nothing is taken while it is held: the waker is woken,
//!    and an unwanted connection checked back in, after it is released.
//!
//! The other locks (the interrupted ids, the subscribers, a stream's
//! buffer, the leak book) are held only around their own data, with
//! nothing taken under them.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use cmap_core::{Address, ConnectionId, EstablishError, PoolOptions, PoolState, Pooled, Status};
use crossbeam_utils::CachePadded;
use event_listener::Event;

mod cycle;
mod get;
mod give_back;
#[cfg(feature = "metrics")]
mod measured;

pub(crate) use cycle::Ended;

use crate::clock::CoarseNow;
use crate::events::EventHub;
use crate::interrupt::Interrupts;
use crate::leak::Leaks;
use crate::manager::ManageConnection;
use crate::runtime::Runtime;
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::sync::{Mutex, MutexGuard};
use crate::under_lock::Inner;
use crate::util::{race, Either};
use crate::{leak, timer};

/// The limits the driver puts on the manager's hooks (`None`: no limit).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// On `connect`.
    pub(crate) connect: Option<Duration>,
    /// On `reset`.
    pub(crate) reset: Option<Duration>,
}

/// One pool's shared state. `Pool` handles, guards and pending `get()`
/// futures hold it strongly; spawned tasks hold it weakly.
pub(crate) struct Shared<M: ManageConnection, R: Runtime> {
    /// Itself, weakly, for the tasks it spawns.
    pub(crate) me: Weak<Self>,
    pub(crate) manager: Arc<M>,
    pub(crate) rt: R,
    pub(crate) address: Address,
    /// The options as built: read without the lock for what a resize does
    /// not change (the wait-queue timeout); the core has the current ones.
    pub(crate) options: PoolOptions,
    pub(crate) timeouts: Timeouts,
    /// A plain mutex: it is held only for one input and its drain, never
    /// across an await, and never while user code runs. Cache-padded: the
    /// lock word, then the core's hot fields (see `Inner`), start a fresh
    /// pair of lines that nothing else shares.
    inner: CachePadded<Mutex<Inner<M::Connection>>>,
    /// Whether checkouts wait, as the last input left it: read without
    /// the lock to choose the clock of the next input (`read_clock`).
    /// Written only when it changes, so it stays in every core's cache
    /// while the pool serves without queueing.
    waiting: AtomicBool,
    pub(crate) events: Arc<EventHub>,
    pub(crate) interrupts: Arc<Interrupts>,
    /// Wakes the timer task: its deadline moved earlier, or the pool closed.
    pub(crate) timer: Event,
    /// Notified when a connection comes back to a closed pool, for
    /// `close_gracefully` waiting for the ones in use.
    returned_after_close: Event,
    /// Notified when an establishment finished, for `wait_ready`.
    pub(crate) established: Event,
    /// Live `Pool` handles; the last one dropped closes the pool.
    pub(crate) handles: AtomicUsize,
    /// Which timer task is the pool's: a reset after fork starts a new
    /// one, and an older one that still runs ends.
    pub(crate) timer_epoch: AtomicU64,
    /// Leak detection, when the builder set a threshold (`None`: off, and
    /// nothing of it runs).
    pub(crate) leaks: Option<Box<Leaks>>,
    /// The flight recorder, when the builder turned it on.
    #[cfg(feature = "recorder")]
    pub(crate) flight: Option<Box<crate::flight::Flight>>,
    /// The metrics export, when the builder turned it on: fed the core's
    /// measures by every input (`Cycle::settle`, `Shared::perform`).
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<crate::driver::Metrics>,
}

impl<M: ManageConnection, R: Runtime> Shared<M, R> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        manager: M,
        rt: R,
        address: Address,
        options: PoolOptions,
        timeouts: Timeouts,
        core: cmap_core::Pool<M::Connection>,
        events: Arc<EventHub>,
        leaks: Option<Box<Leaks>>,
        #[cfg(feature = "recorder")] flight: Option<Box<crate::flight::Flight>>,
        #[cfg(feature = "metrics")] metrics: Option<crate::driver::Metrics>,
    ) -> Arc<Self> {
        #[cfg(feature = "metrics")]
        let core = {
            let mut core = core;
            core.set_measures_enabled(metrics.is_some());
            core
        };
        Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            manager: Arc::new(manager),
            rt,
            address,
            options,
            timeouts,
            inner: CachePadded::new(Mutex::new(Inner::new(core))),
            waiting: AtomicBool::new(false),
            events,
            interrupts: Arc::default(),
            timer: Event::new(),
            returned_after_close: Event::new(),
            established: Event::new(),
            handles: AtomicUsize::new(1),
            timer_epoch: AtomicU64::new(0),
            leaks,
            #[cfg(feature = "recorder")]
            flight,
            #[cfg(feature = "metrics")]
            metrics,
        })
    }

    /// The pool's lock: for an input's [`Cycle`](cycle::Cycle), or to
    /// look at the core.
    #[inline(always)]
    pub(crate) fn lock(&self) -> Locked<'_, M::Connection> {
        // Not poisoned by a panic (`sync.rs`): the core does not panic, and
        // the state it protects is consistent between inputs.
        self.inner.lock()
    }

    /// The clock an input starts with, read before the lock (steps 0 and 2
    /// of the input cycle): the cheap reading (`Runtime::now_coarse`)
    /// unless checkouts waited at the last unlock (`waiting`, a hint): one
    /// that arrives then is queued behind them, and reads the precise clock.
    #[inline(always)]
    pub(crate) fn read_clock(&self) -> CoarseNow {
        if self.waiting.load(Ordering::Relaxed) {
            CoarseNow::exact(self.rt.now())
        } else {
            self.rt.now_coarse()
        }
    }

    /// Wakes the timer task: its deadline moved earlier.
    pub(crate) fn wake_timer(&self) {
        // `additional`: a listener notified but never to be polled (the
        // parent's timer task, in a forked child) must not use up the
        // notification meant for the live timer task.
        self.timer.notify_additional(1);
    }

    /// Reports the outcome of establishing `id` to the core.
    pub(crate) fn finish_establish(&self, id: ConnectionId, result: Result<M::Connection, EstablishError>) {
        let result =
            crate::driver::with_service(result, &*self.events.panics, |conn| self.manager.service_id(conn));
        self.input(|inner, now| inner.finish_establish(now, id, result));
        self.established.notify(usize::MAX);
    }

    /// The spec's fork rule ("Forking"): a pool used in a forked child
    /// clears itself and closes every connection it had, since their
    /// sockets are the parent's too. Noticing the fork is the adapter's job
    /// (`cmap-blocking` counts forks with `pthread_atfork`).
    pub(crate) fn reset_after_fork(&self) {
        // Only the forking thread lives on in the child: the pool's timer
        // task is gone. A new one takes over; an old one still running (a
        // call without a fork) sees the epoch move and ends.
        let epoch = self.timer_epoch.fetch_add(1, Ordering::AcqRel) + 1;
        self.input(|inner, now| inner.reset_after_fork(now));
        self.timer.notify(usize::MAX);
        self.rt.spawn(timer::run(self.me.clone(), epoch));
        // The leak watcher is gone too (or, without a fork, ends on the
        // new epoch once woken).
        if let Some(leaks) = &self.leaks {
            leaks.wake_all();
            self.rt.spawn(leak::watch(self.me.clone(), epoch));
        }
    }

    /// Takes a checked-out connection out of the pool for good.
    pub(crate) fn detach(&self, connection: Pooled<M::Connection>) -> M::Connection {
        let (conn, closed) = self.input(|inner, now| {
            self.interrupts.forget(connection.id());
            match inner.core.handle_detach(now, connection) {
                Ok(conn) => (conn, inner.core.state() == PoolState::Closed),
                Err(_) => unreachable!("a guard's connection comes from its own pool"),
            }
        });
        if closed {
            self.returned_after_close.notify(usize::MAX);
        }
        conn
    }

    /// Closes the pool (the last `Pool` handle is gone, or `close()`).
    pub(crate) fn close(&self) {
        self.input(|inner, now| inner.core.handle_close(now));
        // The timer task ends once it sees the pool closed.
        self.wake_timer();
        // The leak watcher, once every guard is back.
        if let Some(leaks) = &self.leaks {
            leaks.close();
        }
    }

    /// Closes the pool, waits until no connection is in use or `timeout`
    /// has passed, and forces the rest closed; returns how many.
    pub(crate) async fn close_gracefully(&self, timeout: Duration) -> usize {
        self.close();
        let deadline = self.rt.now().checked_add(timeout);
        if self
            .wait_for(&self.returned_after_close, deadline, |s| s.in_use == 0)
            .await
        {
            return 0;
        }
        // The pool is closed: forcing cannot be refused.
        self.input(|inner, now| inner.core.handle_force_close(now).unwrap_or(0))
    }

    /// Waits until the pool's counts satisfy `done`, looking again each
    /// time `event` is notified, until `deadline` (`None`: no limit);
    /// returns whether they did (looked at once more at the deadline).
    pub(crate) async fn wait_for(
        &self,
        event: &Event,
        deadline: Option<Instant>,
        done: impl Fn(&Status) -> bool,
    ) -> bool {
        loop {
            // Listening first, then looking: no notification is missed.
            let notified = event.listen();
            if done(&self.lock().core.status()) {
                return true;
            }
            let Some(deadline) = deadline else {
                notified.await;
                continue;
            };
            if let Either::Right(()) = race(notified, self.rt.sleep_until(deadline)).await {
                return done(&self.lock().core.status());
            }
        }
    }
}

/// The pool's lock, held. An input's cycle releases it through
/// `Shared::unlock`, which publishes whether checkouts wait.
pub(crate) type Locked<'a, C> = MutexGuard<'a, Inner<C>>;
