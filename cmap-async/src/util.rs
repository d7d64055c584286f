//! Tiny runtime-neutral futures: race two futures (the second one made
//! only when needed), and yield once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project_lite::pin_project! {
    /// Completes with whichever of `a` and `b` completes first (`a` is
    /// polled first).
    pub(crate) struct Race<A, B> {
        #[pin]
        a: A,
        #[pin]
        b: B,
    }
}

/// Which side of a [`Race`] won.
pub(crate) enum Either<L, R> {
    Left(L),
    Right(R),
}

pub(crate) fn race<A: Future, B: Future>(a: A, b: B) -> Race<A, B> {
    Race { a, b }
}

impl<A: Future, B: Future> Future for Race<A, B> {
    type Output = Either<A::Output, B::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(a) = this.a.poll(cx) {
            return Poll::Ready(Either::Left(a));
        }
        this.b.poll(cx).map(Either::Right)
    }
}

pin_project_lite::pin_project! {
    /// [`Race`], with `b` made only if `a` is not ready at its first poll:
    /// for a deadline (a runtime's timer, which registers itself and costs
    /// an allocation on some runtimes) raced against work that is usually
    /// done at once, such as a manager's check.
    pub(crate) struct RaceLazy<A, B, F> {
        #[pin]
        a: A,
        #[pin]
        b: Option<B>,
        make_b: Option<F>,
    }
}

pub(crate) fn race_lazy<A: Future, B: Future, F: FnOnce() -> B>(a: A, make_b: F) -> RaceLazy<A, B, F> {
    RaceLazy {
        a,
        b: None,
        make_b: Some(make_b),
    }
}

impl<A: Future, B: Future, F: FnOnce() -> B> Future for RaceLazy<A, B, F> {
    type Output = Either<A::Output, B::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(a) = this.a.poll(cx) {
            return Poll::Ready(Either::Left(a));
        }
        if let Some(make_b) = this.make_b.take() {
            this.b.set(Some(make_b()));
        }
        match this.b.as_pin_mut() {
            Some(b) => b.poll(cx).map(Either::Right),
            None => Poll::Pending,
        }
    }
}

/// Returns `Pending` once (waking itself), so a loop lets other tasks run.
pub(crate) fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}
