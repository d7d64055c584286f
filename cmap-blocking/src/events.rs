//! The pool's events as a blocking iterator.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use cmap_async::{Event, EventStream};
use futures_core::Stream;

use crate::shared::thread_waker;

/// Every event delivered after it was made, in the core's order, from
/// [`Pool::events`](crate::Pool::events). As an [`Iterator`], `next`
/// blocks until an event comes, and returns `None` once the pool is gone
/// (every handle, guard and waiting `get()` dropped).
///
/// It buffers without bound: keep reading it, or drop it.
///
/// ```
/// # use cmap_blocking::{ManageConnection, Pool};
/// # struct Numbers;
/// # impl ManageConnection for Numbers {
/// #     type Connection = u64;
/// #     type Error = std::io::Error;
/// #     fn classify(&self, e: &std::io::Error) -> cmap_blocking::EstablishErrorKind { cmap_blocking::EstablishErrorKind::of_io(e) }
/// #     fn connect(&self) -> Result<u64, std::io::Error> { Ok(1) }
/// # }
/// let pool = Pool::builder().address("db:27017").build(Numbers).unwrap();
/// let events = pool.events();
/// drop(pool.get().unwrap());
/// drop(pool);
/// let names: Vec<_> = events.map(|e| e.name()).collect();
/// assert_eq!(names.first(), Some(&"ConnectionCheckOutStarted"));
/// assert_eq!(names.last(), Some(&"ConnectionPoolClosed"));
/// ```
#[derive(Debug)]
pub struct Events {
    stream: EventStream,
}

impl Events {
    pub(crate) fn new(stream: EventStream) -> Events {
        Events { stream }
    }

    /// The next event if one is buffered, without waiting.
    pub fn try_next(&mut self) -> Option<Event> {
        self.stream.try_next()
    }

    /// The next event, waiting at most `timeout`: `None` if none came (or
    /// the pool is gone).
    pub fn next_timeout(&mut self, timeout: Duration) -> Option<Event> {
        self.next_until(Instant::now().checked_add(timeout))
    }

    /// The next event, the thread parked until one comes (the stream's
    /// waker unparks it) or `deadline` passes.
    fn next_until(&mut self, deadline: Option<Instant>) -> Option<Event> {
        let waker = thread_waker();
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(event) = Pin::new(&mut self.stream).poll_next(&mut cx) {
                return event;
            }
            match deadline.map(|d| d.saturating_duration_since(Instant::now())) {
                None => thread::park(),
                Some(left) if left.is_zero() => return None,
                Some(left) => thread::park_timeout(left),
            }
        }
    }
}

impl Iterator for Events {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        self.next_until(None)
    }
}
