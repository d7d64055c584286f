//! The driver layer: what every driver of [`cmap_core`] needs around the
//! core that is neither a lock nor a runtime, written once. Like the core,
//! nothing here blocks, sleeps, spawns or reads a clock: a driver passes
//! the time in and performs what it is told.
//!
//! cmap-async's own pool, `cmap-local` (one thread: `Rc`, `RefCell`) and
//! `cmap-blocking` are built on it; so can a driver of your own
//! (docs/own-driver.md).
//!
//! | piece | what it decides |
//! | --- | --- |
//! | [`timer`] | the timer's turn: which deadline is due, how many outputs one wake-up drains, when to sleep, go again or end, and the guard against a core that does not clear a deadline it served |
//! | [`catch_panic`], [`catch_panic_in`], [`CountPanics`] | every call into user code (the manager's hooks, event callbacks, a connection's drop) caught, logged and counted, so that the input after it still runs and no slot is lost |
//! | [`LeakBook`], [`LeakNext`], [`Back`], [`LeakReport`] | leak detection's registry of guards out, what its watcher does next, and the reports it logs |
//! | `Metrics`, `Measured` (feature `metrics`) | the metrics export: what an input leaves the metrics, taken under the driver's lock and applied after it |
//! | [`Settings`], [`pool_builder_setters!`](crate::pool_builder_setters) | every builder option under one name, one signature and one doc comment, and how the settings become the pool's address and options |
//! | [`classify`], [`Classify`] | a connect error's kind from a user's closure or the error's `source()` chain, for managers that do not know it |
//! | [`connect`] | one establishment as every async driver runs it: the manager's `connect` under a panic guard, bounded by the connect timeout, labelled by its kind, given up when aborted |
//! | [`Inner`], [`Deferred`], [`Perform`], [`OwnCheckout`] | a threaded driver's state under its lock (core, waiters' slots, abort switches, armed deadline), one input's drain into the work after the lock, and that work carried out in order |
//! | [`Slot`], [`SharedSlot`], [`take_outcome`] | where a queued checkout waits: a [`Waker`](std::task::Waker) woken when the slot is filled (a task's, or one that unparks a thread) |
//! | [`EventHub`], [`Interrupts`], [`Abort`], [`Panics`], [`Leaks`], `Flight` | events in the core's order, interrupted connections, an establishment's abort switch, caught panics, leak detection with a blocking watcher turn, the flight recorder |
//!
//! The driver's side of the contract, whatever its lock or runtime:
//!
//! 1. read the clock; take the lock (a `Mutex`, or a `RefCell` on one
//!    thread);
//! 2. feed the core one input at that instant (never earlier than the
//!    previous one), then drain its outputs;
//! 3. release the lock; deliver the input's events, then perform its
//!    actions (start connects, fire aborts, close connections), and
//!    complete the waiting checkouts last, so that a checkout returns
//!    after its events;
//! 4. wake the timer when the core's next deadline moved earlier than
//!    the one it sleeps until; its turns follow [`timer`].
//!
//! No user code runs under the lock: every call into it goes through
//! [`catch_panic`] after the lock is released.

#[cfg(feature = "metrics")]
pub use crate::export::{Measured, Metrics};
pub use crate::leak::{Back, LeakBook, LeakNext, LeakReport};
pub use crate::panics::{catch_panic, catch_panic_in, CatchPanic, CountPanics};
pub use crate::setters::{Parts, Settings};

pub use crate::abort::Abort;
pub use crate::events::{subscriber, EventHub, Subscriber};
#[cfg(feature = "recorder")]
pub use crate::flight::Flight;
pub use crate::interrupt::Interrupts;
pub use crate::leak::{Caller, Leaks};
pub use crate::panics::Panics;
pub use crate::slot::{take_outcome, Handed, SharedSlot, Slot, SlotFill};
pub use crate::under_lock::{fill_slot, Deferred, Inner, OwnCheckout, Perform};

use std::sync::Arc;

use cmap_core::EstablishErrorKind;

/// A user's classification of a manager's connect errors, for a manager
/// that does not know its errors' kinds (another pool's, through
/// [`compat`](crate::compat) or cmap-blocking's `compat`).
pub type Classify<E> = Arc<dyn Fn(&E) -> EstablishErrorKind + Send + Sync>;

/// `error`'s kind: the user's closure if there is one, else its
/// `source()` chain ([`EstablishErrorKind::of_chain`]: an I/O error of a
/// network kind at any depth is a network error).
pub fn classify<E: std::error::Error + 'static>(with: Option<&Classify<E>>, error: &E) -> EstablishErrorKind {
    match with {
        Some(classify) => classify(error),
        None => EstablishErrorKind::of_chain(error),
    }
}

/// An establishment's `result` with the service its connection reached,
/// for [`Inner::finish_establish`]: `service_id` is the manager's (user
/// code, so called outside the lock, under a panic guard counted in
/// `panics`; a panic fails the establishment).
pub fn with_service<C>(
    result: Result<C, cmap_core::EstablishError>,
    panics: &impl CountPanics,
    service_id: impl FnOnce(&C) -> Option<cmap_core::ServiceId>,
) -> Result<(C, Option<cmap_core::ServiceId>), cmap_core::EstablishError> {
    result.and_then(
        |conn| match catch_panic(panics, crate::Hook::Connect, || service_id(&conn)) {
            Ok(service) => Ok((conn, service)),
            Err(panicked) => Err(cmap_core::EstablishError::other(panicked)),
        },
    )
}

/// One establishment, as every async driver runs it in the task it spawns
/// for an `Action::Establish`: `connect()` made and polled under a panic
/// guard (a panic is a failure like any other, counted in `panics`),
/// bounded by `timeout` (its length and the sleep that ends it: then a
/// network [`ConnectTimeoutError`](crate::ConnectTimeoutError), possibly
/// overload), its error labelled by `classify`; all of it given up when
/// `aborted` completes (the core's `AbortEstablish`: `None`, and the core
/// has already counted the connection closed). The driver reports the
/// result as `handle_established` or `handle_establish_failed`.
pub async fn connect<C, E, F>(
    panics: impl CountPanics,
    connect: impl FnOnce() -> F,
    classify: impl FnOnce(&E) -> EstablishErrorKind,
    timeout: Option<(std::time::Duration, impl std::future::Future<Output = ()>)>,
    aborted: impl std::future::Future<Output = ()>,
) -> Option<Result<C, cmap_core::EstablishError>>
where
    F: std::future::Future<Output = Result<C, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    use cmap_core::EstablishError;

    use crate::util::{race, Either};

    let bounded = async move {
        let labelled = |error: E| EstablishError::new(classify(&error), error);
        match timeout {
            Some((after, sleep)) => match race(connect(), sleep).await {
                Either::Left(result) => result.map_err(labelled),
                Either::Right(()) => Err(EstablishError::network(crate::ConnectTimeoutError { after })),
            },
            None => connect().await.map_err(labelled),
        }
    };
    let guarded = catch_panic_in(panics, crate::Hook::Connect, || bounded);
    match race(guarded, aborted).await {
        Either::Left(outcome) => {
            Some(outcome.unwrap_or_else(|panicked| Err(EstablishError::other(panicked))))
        }
        Either::Right(()) => None,
    }
}

/// The timer's turn, the same for every driver: one task (or thread) per
/// pool sleeps until the core's next deadline, then, under the lock, calls
/// [`fire_due`](timer::fire_due), drains at most
/// [`OUTPUTS_PER_WAKE`](timer::OUTPUTS_PER_WAKE) outputs, and asks
/// [`after_turn`](timer::after_turn) what to do next.
///
/// - It passes the clock's `now` to `handle_timeout`, never the deadline.
/// - It looks at `now >= deadline` before sleeping, so a deadline that
///   passed while it worked is handled at once, never starved by a busy
///   scheduler.
/// - A burst (thousands of checkouts timing out at once) is drained
///   `OUTPUTS_PER_WAKE` outputs a turn, with a yield between turns, so
///   it holds neither the lock nor the thread for long.
/// - A deadline the core still reports after handling it (a core bug)
///   is looked at again after
///   [`STUCK_TIMER_RETRY`](timer::STUCK_TIMER_RETRY), instead of spinning.
pub mod timer {
    use std::time::{Duration, Instant};

    use cmap_core::{Pool, PoolState};

    /// The most outputs the timer drains in one turn.
    pub const OUTPUTS_PER_WAKE: usize = 256;

    /// How long to wait before looking again at a deadline that handling
    /// it did not clear.
    pub const STUCK_TIMER_RETRY: Duration = Duration::from_millis(1);

    /// What the timer does after its turn.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Tick {
        /// Outputs are left, or a deadline has passed: go again after a
        /// yield.
        Again,
        /// Sleep until the deadline (`None`: until woken).
        Sleep(Option<Instant>),
        /// The pool is closed and nothing is due: the timer ends.
        Exit,
    }

    impl Tick {
        /// The deadline the timer is armed for once it does this, as the
        /// driver keeps it to know when an input must wake it (`None`
        /// inside: asleep with no deadline); `None` for
        /// [`Exit`](Tick::Exit), which arms nothing. A timer going
        /// [`Again`](Tick::Again) counts as armed for `now`: no input
        /// needs to wake it.
        pub fn armed(self, now: Instant) -> Option<Option<Instant>> {
            match self {
                Tick::Again => Some(Some(now)),
                Tick::Sleep(deadline) => Some(deadline),
                Tick::Exit => None,
            }
        }
    }

    /// The turn's input: hands the core its timeout if its deadline is due
    /// at `now`, and returns that deadline (`None`: nothing was due, and
    /// the core was not called).
    pub fn fire_due<C>(core: &mut Pool<C>, now: Instant) -> Option<Instant> {
        let due = core.poll_timeout().filter(|deadline| *deadline <= now);
        if due.is_some() {
            core.handle_timeout(now);
        }
        due
    }

    /// What the timer does after a turn that started at `now`, handled the
    /// deadline `due` ([`fire_due`]'s) and left outputs undrained if
    /// `more`; `clock` reads the precise clock, only when a deadline must
    /// be compared with the present.
    pub fn after_turn<C>(
        core: &Pool<C>,
        now: Instant,
        due: Option<Instant>,
        more: bool,
        clock: impl FnOnce() -> Instant,
    ) -> Tick {
        let next = core.poll_timeout();
        if due.is_some() && next == due && !more {
            // The deadline just handled is still reported: a core that does
            // not clear a timer it served would make the timer spin.
            Tick::Sleep(now.checked_add(STUCK_TIMER_RETRY))
        } else if more || next.is_some_and(|deadline| deadline <= clock()) {
            Tick::Again
        } else if core.state() == PoolState::Closed && next.is_none() {
            Tick::Exit
        } else {
            Tick::Sleep(next)
        }
    }

    #[cfg(test)]
    mod tests {
        use std::time::{Duration, Instant};

        use cmap_core::{Address, Pool, PoolOptions};

        use super::*;

        /// A ready pool of one connection, none made, with one checkout
        /// queued until `now` + 1 s; everything it asked drained.
        fn waiting_pool(now: Instant) -> Pool<()> {
            let options = PoolOptions::builder()
                .max_pool_size(1)
                .wait_queue_timeout(Some(Duration::from_secs(1)))
                .maintenance_interval(None)
                .build()
                .unwrap();
            let mut core = Pool::new(now, Address::new("db", 27017), options);
            let _ = core.handle_ready(now);
            let _ = core.handle_check_out(now);
            while core.poll_output().is_some() {}
            core
        }

        #[test]
        fn a_deadline_not_due_is_not_fired_and_is_slept_until() {
            let now = Instant::now();
            let mut core = waiting_pool(now);
            let deadline = core.poll_timeout().expect("the checkout's deadline");
            assert!(deadline > now);
            assert_eq!(fire_due(&mut core, now), None);
            assert_eq!(
                after_turn(&core, now, None, false, || now),
                Tick::Sleep(Some(deadline))
            );
            assert_eq!(Tick::Sleep(Some(deadline)).armed(now), Some(Some(deadline)));
        }

        #[test]
        fn a_due_deadline_is_handed_to_the_core() {
            let now = Instant::now();
            let mut core = waiting_pool(now);
            let deadline = core.poll_timeout().expect("the checkout's deadline");
            let later = deadline + Duration::from_millis(1);
            assert_eq!(fire_due(&mut core, later), Some(deadline));
            assert!(core.has_output(), "the checkout failed at its deadline");
            while core.poll_output().is_some() {}
            let tick = after_turn(&core, later, Some(deadline), false, || later);
            assert_ne!(tick, Tick::Sleep(later.checked_add(STUCK_TIMER_RETRY)));
            assert_ne!(core.poll_timeout(), Some(deadline));
        }

        #[test]
        fn outputs_left_or_a_passed_deadline_go_again() {
            let now = Instant::now();
            let core = waiting_pool(now);
            let deadline = core.poll_timeout().expect("the checkout's deadline");
            assert_eq!(after_turn(&core, now, None, true, || now), Tick::Again);
            // Not due at the turn's start, due by the time it ends.
            assert_eq!(after_turn(&core, now, None, false, || deadline), Tick::Again);
            assert_eq!(Tick::Again.armed(now), Some(Some(now)));
        }

        #[test]
        fn a_deadline_still_reported_after_its_turn_is_retried_soon_not_spun_on() {
            let now = Instant::now();
            let core = waiting_pool(now);
            // As if the deadline reported had just been handled and the
            // core still reported it: the retry, a millisecond on.
            let still = core.poll_timeout();
            let tick = after_turn(&core, now, still, false, || now);
            assert_eq!(tick, Tick::Sleep(now.checked_add(STUCK_TIMER_RETRY)));
        }

        #[test]
        fn a_closed_pool_with_nothing_due_ends_the_timer() {
            let now = Instant::now();
            let mut core = waiting_pool(now);
            core.handle_close(now);
            while core.poll_output().is_some() {}
            assert_eq!(core.poll_timeout(), None);
            assert_eq!(after_turn(&core, now, None, false, || now), Tick::Exit);
            assert_eq!(Tick::Exit.armed(now), None);
        }
    }
}
