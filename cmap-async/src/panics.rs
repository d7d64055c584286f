//! Panics in user code the pool calls (event callbacks, `tracing` layers,
//! the manager's hooks): caught where they happen, logged once, counted,
//! and turned into a failure of the hook that panicked, so that the pool
//! loses no connection, no capacity and no waiter's deadline.
//!
//! A panic that reached the pool's own code would skip the work after the
//! call: a connection never checked in, an establishment never reported, a
//! waiter never woken. So every call into user code goes through
//! [`Panics::call`] or a [`Guarded`] future.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use crate::logging::LOG_TARGET;

/// The user code that panicked, as [`Panicked`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hook {
    /// [`ManageConnection::connect`](crate::ManageConnection::connect) (or
    /// `classify` or `service_id`, which run with it).
    Connect,
    /// [`ManageConnection::check`](crate::ManageConnection::check).
    Check,
    /// [`ManageConnection::reset`](crate::ManageConnection::reset).
    Reset,
    /// [`ManageConnection::is_broken`](crate::ManageConnection::is_broken).
    IsBroken,
    /// An event callback ([`Pool::on_event`](crate::Pool::on_event)).
    EventCallback,
    /// A `tracing` subscriber recording one of the pool's log messages.
    Logging,
    /// The `metrics` recorder the pool exports to
    /// ([`PoolBuilder::metrics`](crate::PoolBuilder::metrics)).
    Metrics,
    /// A connection's own `Drop`, run when the pool closes it.
    Close,
}

impl Hook {
    fn name(self) -> &'static str {
        match self {
            Hook::Connect => "the manager's connect",
            Hook::Check => "the manager's check",
            Hook::Reset => "the manager's reset",
            Hook::IsBroken => "the manager's is_broken",
            Hook::EventCallback => "an event callback",
            Hook::Logging => "a tracing subscriber",
            Hook::Metrics => "a metrics recorder",
            Hook::Close => "a connection's drop",
        }
    }
}

/// A panic caught in user code the pool called. It is the error of the
/// hook that panicked: the source of a [`GetError`](crate::GetError) when
/// `connect` or `check` panicked for that checkout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} panicked: {message}", .hook.name())]
pub struct Panicked {
    /// Where.
    pub hook: Hook,
    /// The panic's message (`"<not a string>"` when its payload is not
    /// one).
    pub message: String,
}

impl Panicked {
    fn new(hook: Hook, payload: &(dyn Any + Send)) -> Panicked {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "<not a string>".to_string());
        Panicked { hook, message }
    }
}

/// Counts the panics an adapter catches: cmap-async's `Panics` (an
/// atomic, shared by threads), a `Cell` on one thread (cmap-local).
/// Part of the [driver layer](crate::driver).
pub trait CountPanics {
    /// One more panic caught.
    fn count_panic(&self);
}

impl CountPanics for std::cell::Cell<u64> {
    fn count_panic(&self) {
        self.set(self.get() + 1);
    }
}

impl<C: CountPanics + ?Sized> CountPanics for &C {
    fn count_panic(&self) {
        (**self).count_panic();
    }
}

/// Runs `f`, user code; a panic in it is caught, logged, counted in
/// `counter` and returned as [`Panicked`]. Part of the [driver layer](crate::driver).
pub fn catch_panic<T>(counter: &impl CountPanics, hook: Hook, f: impl FnOnce() -> T) -> Result<T, Panicked> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| caught(counter, hook, &*payload))
}

/// `make` creates a future of user code: a panic while making it or
/// polling it is caught as by [`catch_panic`]. Part of the [driver
/// layer](crate::driver).
pub fn catch_panic_in<C: CountPanics, F: Future>(
    counter: C,
    hook: Hook,
    make: impl FnOnce() -> F,
) -> CatchPanic<C, F> {
    let state = match catch_panic(&counter, hook, make) {
        Ok(future) => State::Running { future },
        Err(panicked) => State::Failed {
            panicked: Some(panicked),
        },
    };
    CatchPanic { counter, hook, state }
}

/// Counts and logs one panic (once: the log record is the only one).
fn caught(counter: &impl CountPanics, hook: Hook, payload: &(dyn Any + Send)) -> Panicked {
    counter.count_panic();
    let panicked = Panicked::new(hook, payload);
    // A subscriber that panics on this record too is not asked again.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        tracing::error!(
            target: LOG_TARGET,
            error = %panicked,
            "Connection pool caught a panic"
        )
    }));
    panicked
}

/// One pool's count of caught panics, shared by everything that calls
/// user code.
#[derive(Default)]
pub struct Panics {
    caught: AtomicU64,
}

impl fmt::Debug for Panics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Panics({})", self.count())
    }
}

impl CountPanics for Panics {
    fn count_panic(&self) {
        self.caught.fetch_add(1, Ordering::Relaxed);
    }
}

impl Panics {
    /// Panics caught so far.
    pub fn count(&self) -> u64 {
        self.caught.load(Ordering::Relaxed)
    }

    /// Runs `f`, user code; a panic in it is caught, logged, counted and
    /// returned as [`Panicked`].
    pub fn call<T>(&self, hook: Hook, f: impl FnOnce() -> T) -> Result<T, Panicked> {
        catch_panic(self, hook, f)
    }

    /// `make` creates a future of user code: a panic while making it or
    /// polling it is caught as by [`call`](Self::call).
    pub(crate) fn guard<F: Future>(&self, hook: Hook, make: impl FnOnce() -> F) -> Guarded<'_, F> {
        catch_panic_in(self, hook, make)
    }
}

/// A future of cmap-async's user code, counted in its pool's [`Panics`].
pub(crate) type Guarded<'a, F> = CatchPanic<&'a Panics, F>;

pin_project_lite::pin_project! {
    /// A future of user code whose panic, while it was made or polled,
    /// ends it with [`Panicked`] (see [`catch_panic_in`]). Part of the
    /// [driver layer](crate::driver).
        pub struct CatchPanic<C, F> {
        counter: C,
        hook: Hook,
        #[pin]
        state: State<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        Running { #[pin] future: F },
        Failed { panicked: Option<Panicked> },
    }
}

impl<C: CountPanics, F: Future> Future for CatchPanic<C, F> {
    type Output = Result<F::Output, Panicked>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.state.project() {
            StateProj::Running { future } => {
                match catch_panic(&*this.counter, *this.hook, || future.poll(cx)) {
                    Ok(poll) => poll.map(Ok),
                    Err(panicked) => Poll::Ready(Err(panicked)),
                }
            }
            StateProj::Failed { panicked } => Poll::Ready(Err(panicked
                .take()
                .expect("a failed guarded future is polled once"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_named_and_counted() {
        let panics = Panics::default();
        assert_eq!(panics.call(Hook::Check, || 7), Ok(7));
        let err = panics.call(Hook::Reset, || panic!("boom")).unwrap_err();
        assert_eq!(err.to_string(), "the manager's reset panicked: boom");
        let formatted = panics
            .call(Hook::EventCallback, || panic!("{} apples", 3))
            .unwrap_err();
        assert_eq!(formatted.message, "3 apples");
        let odd = panics
            .call(Hook::Logging, || std::panic::panic_any(5u8))
            .unwrap_err();
        assert_eq!(odd.message, "<not a string>");
        assert_eq!(panics.count(), 3);
        assert_eq!(format!("{panics:?}"), "Panics(3)");
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        match f
            .as_mut()
            .poll(&mut Context::from_waker(std::task::Waker::noop()))
        {
            Poll::Ready(out) => out,
            Poll::Pending => unreachable!("ready futures"),
        }
    }

    #[test]
    fn a_guarded_future_panicking_when_made_or_polled_fails_with_panicked() {
        let panics = Panics::default();
        let made: Guarded<'_, std::future::Ready<u8>> = panics.guard(Hook::Connect, || panic!("made"));
        assert_eq!(block_on(made).unwrap_err().message, "made");
        let polled = panics.guard(Hook::Connect, || async {
            if panics.count() < 100 {
                panic!("polled");
            }
            1u8
        });
        assert_eq!(block_on(polled).unwrap_err().message, "polled");
        let fine = panics.guard(Hook::Connect, || std::future::ready(2u8));
        assert_eq!(block_on(fine), Ok(2));
        assert_eq!(panics.count(), 2);
    }
}
