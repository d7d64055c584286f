//! The pool's events as a blocking iterator.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::{Duration, Instant};

use cmap_async::{Event, EventStream};
use futures_core::Stream;

use crate::block_on::{block_on, Sleep};

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
        let mut sleep = pin!(Sleep::until(Instant::now() + timeout));
        let stream = &mut self.stream;
        block_on(poll_fn(|cx| {
            if let Poll::Ready(event) = Pin::new(&mut *stream).poll_next(cx) {
                return Poll::Ready(event);
            }
            sleep.as_mut().poll(cx).map(|()| None)
        }))
    }
}

impl Iterator for Events {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        let stream = &mut self.stream;
        block_on(poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)))
    }
}
