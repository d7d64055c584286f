//! Event delivery: callbacks and streams, in the core's order, outside the
//! pool's lock.
//!
//! Inputs append the core's events to one queue while they still hold the
//! pool's lock, so the queue is in the core's order. Delivering happens
//! after the lock is released, under a second lock (the delivery turn)
//! that only one thread holds at a time: it empties the queue, oldest
//! first. Concurrent inputs therefore never reorder deliveries, and an
//! input returns only once its own events are delivered (by itself or by
//! the thread that held the turn), so after `close()` returns the
//! `ConnectionPoolClosed` callback has run. A callback may call into the
//! pool: its events are delivered by the loop already running on that
//! thread, after the current one, never recursively.
//!
//! With no subscriber and DEBUG logging off for [`LOG_TARGET`](crate::LOG_TARGET),
//! the pool tells the core not to build events at all.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};

use cmap_core::Event;

use crate::logging;

type Callback = Arc<dyn Fn(&Event) + Send + Sync>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// The hubs this thread is delivering for (a callback may call into
    /// its pool, or into another pool).
    static DELIVERING: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Marks this thread as delivering for one hub until dropped (even by a
/// panicking callback).
struct Delivering(usize);

impl Delivering {
    fn enter(key: usize) -> Option<Delivering> {
        DELIVERING.with(|d| {
            let mut d = d.borrow_mut();
            if d.contains(&key) {
                return None;
            }
            d.push(key);
            Some(Delivering(key))
        })
    }
}

impl Drop for Delivering {
    fn drop(&mut self) {
        DELIVERING.with(|d| d.borrow_mut().retain(|k| *k != self.0));
    }
}

/// The subscribers, replaced as a whole when one comes or goes, so a
/// delivery works on a snapshot without holding a lock.
#[derive(Default, Clone)]
struct Subscribers {
    callbacks: Vec<(u64, Callback)>,
    streams: Vec<(u64, Arc<Channel>)>,
}

impl Subscribers {
    fn is_empty(&self) -> bool {
        self.callbacks.is_empty() && self.streams.is_empty()
    }
}

/// What the thread delivering keeps from one delivery to the next, so a
/// delivery neither allocates nor locks the subscribers when nothing
/// changed.
#[derive(Default)]
struct Turn {
    /// The batch being delivered; its buffer swaps with the queue's.
    batch: Vec<Event>,
    /// The subscribers as of `version`.
    subscribers: Arc<Subscribers>,
    version: u64,
}

/// The event queue and subscribers of one pool.
#[derive(Default)]
pub(crate) struct EventHub {
    queue: Mutex<Vec<Event>>,
    /// Held while delivering: one thread at a time, in queue order.
    turn: Mutex<Turn>,
    subscribers: Mutex<Arc<Subscribers>>,
    /// Bumped, under the `subscribers` lock, whenever they change.
    version: AtomicU64,
    /// Whether the core should build events: someone subscribes, or the
    /// log messages are on.
    wanted: AtomicBool,
    next_id: AtomicU64,
    /// Set (under the queue's lock) when events are appended, cleared when
    /// the delivery loop takes the queue: it looks again only if set.
    queued: AtomicBool,
}

/// The queue, locked, for an input to append the events it drains.
pub(crate) struct Appender<'a>(MutexGuard<'a, Vec<Event>>);

impl Appender<'_> {
    pub(crate) fn push(&mut self, event: Event) {
        self.0.push(event);
    }
}

impl EventHub {
    pub(crate) fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// Looks again at the subscribers and at the log level.
    pub(crate) fn refresh(&self) {
        let subscribed = !lock(&self.subscribers).is_empty();
        self.wanted
            .store(subscribed || logging::enabled(), Ordering::Relaxed);
    }

    /// Locks the queue; the caller holds the pool's lock (lock order: pool,
    /// then queue; delivery takes only the queue's).
    pub(crate) fn appender(&self) -> Appender<'_> {
        let queue = lock(&self.queue);
        self.queued.store(true, Ordering::Release);
        Appender(queue)
    }

    fn subscribe(&self, change: impl FnOnce(&mut Subscribers, u64)) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut subs = lock(&self.subscribers);
            change(Arc::make_mut(&mut subs), id);
            self.version.fetch_add(1, Ordering::SeqCst);
        }
        self.refresh();
        id
    }

    pub(crate) fn on_event(self: &Arc<Self>, callback: Callback) -> Subscription {
        let id = self.subscribe(|s, id| s.callbacks.push((id, callback)));
        Subscription {
            hub: Arc::downgrade(self),
            id,
        }
    }

    pub(crate) fn stream(self: &Arc<Self>) -> EventStream {
        let channel = Arc::new(Channel::default());
        let id = self.subscribe(|s, id| s.streams.push((id, channel.clone())));
        EventStream {
            channel,
            hub: Arc::downgrade(self),
            id,
        }
    }

    fn unsubscribe(&self, id: u64) {
        {
            let mut subs = lock(&self.subscribers);
            let subs = Arc::make_mut(&mut subs);
            subs.callbacks.retain(|(i, _)| *i != id);
            subs.streams.retain(|(i, _)| *i != id);
            self.version.fetch_add(1, Ordering::SeqCst);
        }
        self.refresh();
    }

    /// Delivers the queued events, oldest first, and returns once the
    /// events queued before the call are delivered. Inside a callback of
    /// this pool it returns at once: the loop running below it delivers.
    pub(crate) fn dispatch(&self) {
        let Some(_delivering) = Delivering::enter(self as *const EventHub as usize) else {
            return;
        };
        // A panicking callback poisons the turn (and loses the rest of its
        // batch); delivery goes on with the next input.
        let mut turn = lock(&self.turn);
        let turn = &mut *turn;
        loop {
            {
                let mut queue = lock(&self.queue);
                self.queued.store(false, Ordering::Relaxed);
                if queue.is_empty() {
                    return;
                }
                // The emptied buffer of the last batch becomes the queue.
                std::mem::swap(&mut *queue, &mut turn.batch);
            }
            let version = self.version.load(Ordering::SeqCst);
            if version != turn.version {
                turn.subscribers = lock(&self.subscribers).clone();
                turn.version = version;
            }
            let subs = &*turn.subscribers;
            for event in turn.batch.drain(..) {
                logging::log_event(&event);
                for (_, callback) in &subs.callbacks {
                    callback(&event);
                }
                for (_, channel) in &subs.streams {
                    channel.push(event.clone());
                }
            }
            // Events appended since the queue was taken: a callback's own
            // (its input's dispatch returned at once; they are this loop's
            // to deliver) or another input's (which also waits for this
            // turn, so leaving them to it would be correct too).
            if !self.queued.load(Ordering::Acquire) {
                return;
            }
        }
    }
}

impl Drop for EventHub {
    fn drop(&mut self) {
        // The pool is gone: its streams end.
        for (_, channel) in &lock(&self.subscribers).streams {
            channel.close();
        }
    }
}

/// A callback registered with [`Pool::on_event`](crate::Pool::on_event).
/// Dropping it keeps the callback; [`unsubscribe`](Subscription::unsubscribe)
/// removes it.
///
/// ```
/// # use cmap_async::{ManageConnection, Pool, Runtime};
/// # fn run<M: ManageConnection, R: Runtime>(pool: &Pool<M, R>) {
/// let subscription = pool.on_event(|event| eprintln!("{}", event.name()));
/// // ...
/// subscription.unsubscribe();
/// # }
/// ```
#[derive(Debug)]
pub struct Subscription {
    hub: Weak<EventHub>,
    id: u64,
}

impl Subscription {
    /// Removes the callback: it is called for no event delivered after this.
    pub fn unsubscribe(self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.unsubscribe(self.id);
        }
    }
}

#[derive(Default)]
struct ChannelState {
    events: VecDeque<Event>,
    waker: Option<Waker>,
    closed: bool,
}

#[derive(Default)]
struct Channel {
    state: Mutex<ChannelState>,
}

impl Channel {
    fn push(&self, event: Event) {
        let waker = {
            let mut state = lock(&self.state);
            state.events.push_back(event);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn close(&self) {
        let waker = {
            let mut state = lock(&self.state);
            state.closed = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The pool's events as a [`futures_core::Stream`], from
/// [`Pool::events`](crate::Pool::events): every event delivered after it
/// was made, in the core's order. It ends once the pool is dropped (every
/// [`Pool`](crate::Pool) handle, guard and pending `get()` gone).
///
/// The stream buffers without bound: keep reading it, or drop it.
///
/// ```
/// # use cmap_async::{Event, ManageConnection, Pool, Runtime};
/// # use futures_core::Stream;
/// # async fn run<M: ManageConnection, R: Runtime>(pool: Pool<M, R>) {
/// let mut events = pool.events();
/// // With a `StreamExt` (futures, tokio-stream): `while let Some(e) = events.next().await`.
/// let next = std::future::poll_fn(|cx| std::pin::Pin::new(&mut events).poll_next(cx));
/// if let Some(Event::ConnectionCheckedOut { connection_id, .. }) = next.await {
///     println!("checked out {connection_id}");
/// }
/// # }
/// ```
pub struct EventStream {
    channel: Arc<Channel>,
    hub: Weak<EventHub>,
    id: u64,
}

impl futures_core::Stream for EventStream {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let mut state = lock(&self.channel.state);
        if let Some(event) = state.events.pop_front() {
            return Poll::Ready(Some(event));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        match &mut state.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl EventStream {
    /// The next event if one is buffered, without waiting: `None` when none
    /// is (or the stream has ended).
    pub fn try_next(&mut self) -> Option<Event> {
        lock(&self.channel.state).events.pop_front()
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.unsubscribe(self.id);
        }
    }
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
