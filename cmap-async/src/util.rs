//! Two tiny runtime-neutral futures: race two futures, and yield once.

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
