//! Event delivery: callbacks and streams, in the core's order, outside the
//! pool's lock.
//!
//! Delivering is one thread's turn at a time (a second lock, the delivery
//! turn), so concurrent inputs never reorder deliveries. An input drains
//! its events while it holds the pool's lock, into an [`Outbox`]:
//!
//! - if the turn is free, the input takes it there and then (a `try_lock`,
//!   which never waits under the pool's lock), puts any events still
//!   queued before its own, and delivers them all once the pool's lock is
//!   released: one lock taken per input, the turn;
//! - otherwise another thread is delivering: the input appends its events
//!   to the queue and, after releasing the pool's lock, waits for the turn.
//!   The deliverer empties the queue before it lets the turn go, so when the
//!   waiting input gets it, its events are out.
//!
//! Either way an input returns only once its own events are delivered, so
//! after `close()` returns the `ConnectionPoolClosed` callback has run. A
//! callback may call into the pool: its events are queued and delivered by
//! the loop already running on that thread, after the current one, never
//! recursively.
//!
//! With no subscriber and DEBUG logging off for [`LOG_TARGET`](crate::LOG_TARGET),
//! the pool tells the core not to build events at all.
//!
//! Where delivery sits in an input, and the order of the pool's lock, the
//! turn and a waiter's slot: `shared/mod.rs`'s module doc.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use cmap_core::Event;

use crate::logging;
use crate::panics::{Hook, Panics};
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::sync::{Mutex, MutexGuard};

/// A subscriber, called once per batch of events, oldest first; it catches
/// a panic of user code itself (see [`subscriber`]).
pub type Subscriber = Arc<dyn Fn(&[Event], &Panics) + Send + Sync>;

#[cfg(not(loom))]
thread_local! {
    /// Its address tells this thread from the others (see
    /// [`EventHub::deliverer`]).
    static THREAD_MARK: u8 = const { 0 };
}

/// A number unique to this thread among the live ones, never 0.
#[cfg(not(loom))]
fn this_thread() -> usize {
    THREAD_MARK.with(|mark| mark as *const u8 as usize)
}

/// Under loom, a number no other modelled thread had. Not an address: loom
/// runs its threads on one OS thread and frees a thread's locals when it
/// ends, so the next thread's could take the same address with nothing
/// loom knows of ordering them, and read the old deliverer as itself (a
/// new std thread reuses a dead one's storage only after it ended, which
/// orders that thread's last store before the new one's loads).
#[cfg(loom)]
fn this_thread() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
    loom::thread_local! {
        static MARK: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    MARK.with(|mark| *mark)
}

/// The subscribers (callbacks and streams) by id, replaced as a whole when
/// one comes or goes, so a delivery works on a snapshot without a lock.
type Subscribers = Vec<(u64, Subscriber)>;

/// A callback of the user's as a subscriber: a panic in it misses the one
/// event it was called with.
pub fn subscriber(callback: impl Fn(&Event) + Send + Sync + 'static) -> Subscriber {
    Arc::new(move |events: &[Event], panics: &Panics| {
        for event in events {
            let _ = panics.call(Hook::EventCallback, || callback(event));
        }
    })
}

/// What the thread delivering keeps from one delivery to the next, so a
/// delivery neither allocates nor locks the subscribers when nothing
/// changed.
#[derive(Default)]
struct Turn {
    /// The events being delivered, oldest first.
    batch: Vec<Event>,
    /// The subscribers as of `version`.
    subscribers: Arc<Subscribers>,
    version: u64,
}

/// The event queue and subscribers of one pool: what [`Inner::drain`](crate::driver::Inner::drain)
/// takes an input's events into, and delivers them from in the core's
/// order, one thread at a time. Part of the [driver layer](crate::driver).
#[derive(Default)]
pub struct EventHub {
    /// Events of inputs that found the turn taken; appended under the
    /// pool's lock (the lock order is stated in `shared/mod.rs`).
    queue: Mutex<Vec<Event>>,
    /// Held while delivering: one thread at a time, in the core's order.
    turn: Mutex<Turn>,
    /// The thread holding the turn ([`this_thread`]; 0: none), so that an
    /// input made by one of its callbacks does not wait for the turn its
    /// own thread holds.
    deliverer: AtomicUsize,
    subscribers: Mutex<Arc<Subscribers>>,
    /// Bumped, under the `subscribers` lock, whenever they change.
    version: AtomicU64,
    /// Whether the core should build events: someone subscribes, or the
    /// log messages are on.
    wanted: AtomicBool,
    next_id: AtomicU64,
    /// Set (under the queue's lock) when events are appended, cleared when
    /// the deliverer takes the queue: it looks at the queue only if set.
    queued: AtomicBool,
    /// The pool's count of caught panics: a callback or a `tracing`
    /// subscriber that panics misses that event, and delivery goes on.
    pub(crate) panics: Arc<Panics>,
}

impl EventHub {
    /// The pool's count of caught panics, shared with every hook's guard.
    pub fn panics(&self) -> &Arc<Panics> {
        &self.panics
    }
}

/// The events one input drains, on their way to the subscribers.
#[derive(Default)]
pub(crate) enum Outbox<'a> {
    /// None yet.
    #[default]
    Empty,
    /// The input holds the turn: its events wait in the turn's batch.
    Held(HeldTurn<'a>),
    /// Another thread holds the turn (or a delivery loop lower on this
    /// thread's stack): the events go to the queue, locked meanwhile.
    Appending(&'a EventHub, MutexGuard<'a, Vec<Event>>),
    /// Appended, the queue unlocked.
    Queued(&'a EventHub),
}

impl<'a> Outbox<'a> {
    /// Adds one event; the caller holds the pool's lock.
    pub(crate) fn push(&mut self, hub: &'a EventHub, event: Event) {
        self.sink(hub).push(event);
    }

    /// Takes the events the core kept apart (in one swap when the sink is
    /// empty, as it is for an input that took the turn); the caller holds
    /// the pool's lock.
    pub(crate) fn take<C>(&mut self, hub: &'a EventHub, core: &mut cmap_core::Pool<C>) {
        if core.pending_events() > 0 {
            core.take_events(self.sink(hub));
        }
    }

    /// Where the input's events go: the turn's batch, or the queue.
    fn sink(&mut self, hub: &'a EventHub) -> &mut Vec<Event> {
        if matches!(self, Outbox::Empty | Outbox::Queued(_)) {
            // Neither holds a lock: forgotten, the old value needs no drop
            // code on this path, which every input with events takes.
            std::mem::forget(std::mem::replace(self, hub.open()));
        }
        match self {
            Outbox::Held(held) => &mut held.turn.batch,
            Outbox::Appending(_, queue) => queue,
            Outbox::Empty | Outbox::Queued(_) => unreachable!("opened above"),
        }
    }

    /// Unlocks the queue, if this input appended to it; called before the
    /// pool's lock is released.
    #[inline]
    pub(crate) fn seal(&mut self) {
        if let Outbox::Appending(hub, _) = self {
            *self = Outbox::Queued(hub);
        }
    }

    /// Delivers the input's events (and any queued before them): returns
    /// once they are out. Called after the pool's lock is released.
    #[inline]
    pub(crate) fn deliver(self) {
        match self {
            Outbox::Empty => {}
            Outbox::Held(held) => held.deliver(),
            Outbox::Appending(hub, queue) => {
                drop(queue);
                hub.wait_turn_and_deliver();
            }
            Outbox::Queued(hub) => hub.wait_turn_and_deliver(),
        }
    }
}

/// The delivery turn, held by this thread.
pub(crate) struct HeldTurn<'a> {
    hub: &'a EventHub,
    turn: MutexGuard<'a, Turn>,
}

impl Drop for HeldTurn<'_> {
    fn drop(&mut self) {
        // Before the turn's lock is released (fields drop after this).
        self.hub.deliverer.store(0, Ordering::Relaxed);
    }
}

impl HeldTurn<'_> {
    /// Moves the queued events to the end of the batch; returns whether
    /// there were any. Inlined: most inputs find nothing queued, one load.
    #[inline]
    fn take_queue(&mut self) -> bool {
        self.hub.queued.load(Ordering::Acquire) && self.append_queue()
    }

    /// The rest of [`take_queue`](Self::take_queue), when something was
    /// queued.
    #[inline(never)]
    fn append_queue(&mut self) -> bool {
        let mut queue = self.hub.queue.lock();
        self.hub.queued.store(false, Ordering::Relaxed);
        if self.turn.batch.is_empty() {
            // The emptied buffer of the last batch becomes the queue.
            std::mem::swap(&mut *queue, &mut self.turn.batch);
        } else {
            self.turn.batch.append(&mut queue);
        }
        !self.turn.batch.is_empty()
    }

    /// Delivers the batch, then whatever was queued meanwhile (a callback's
    /// own events, or those of inputs waiting for the turn), until none is
    /// left.
    fn deliver(mut self) {
        loop {
            self.deliver_batch();
            if !self.take_queue() {
                return;
            }
        }
    }

    fn deliver_batch(&mut self) {
        let hub = self.hub;
        let turn = &mut *self.turn;
        if turn.batch.is_empty() {
            return;
        }
        let version = hub.version.load(Ordering::SeqCst);
        if version != turn.version {
            turn.subscribers = hub.subscribers.lock().clone();
            turn.version = version;
        }
        let subs = &*turn.subscribers;
        let panics = &*hub.panics;
        // Delivered in place, a batch at a time to each subscriber. A panic
        // in user code is caught around each call: the others still get the
        // event, and the input goes on to wake its waiters and check in.
        let batch = Emptied(&mut turn.batch);
        if logging::log_enabled() {
            for event in batch.0.iter() {
                let _ = panics.call(Hook::Logging, || logging::log_event(event));
            }
        }
        for (_, subscriber) in subs {
            subscriber(batch.0, panics);
        }
    }
}

/// Empties the batch when dropped, also if delivering panicked after all:
/// no event is delivered twice.
struct Emptied<'a>(&'a mut Vec<Event>);

impl Drop for Emptied<'_> {
    fn drop(&mut self) {
        self.0.clear();
    }
}

impl EventHub {
    /// Whether the core should build events (someone subscribes, or the
    /// log messages are on): for `cmap_core::Pool::set_events_enabled`.
    #[inline]
    pub fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// Looks again at the subscribers and at the log level.
    pub fn refresh(&self) {
        let subscribed = !self.subscribers.lock().is_empty();
        self.wanted
            .store(subscribed || logging::log_enabled(), Ordering::Relaxed);
    }

    /// Where an input's first event goes; the caller holds the pool's lock,
    /// so no other input appends meanwhile.
    fn open(&self) -> Outbox<'_> {
        let Some(turn) = self.turn.try_lock() else {
            let queue = self.queue.lock();
            self.queued.store(true, Ordering::Release);
            return Outbox::Appending(self, queue);
        };
        let mut held = self.hold(turn);
        // Events of inputs that found the turn taken, and wait for it now,
        // go first.
        held.take_queue();
        Outbox::Held(held)
    }

    fn hold<'a>(&'a self, turn: MutexGuard<'a, Turn>) -> HeldTurn<'a> {
        self.deliverer.store(this_thread(), Ordering::Relaxed);
        HeldTurn { hub: self, turn }
    }

    /// Waits for the turn and delivers what is queued: once it has it, the
    /// events queued before the call are out. Inside a callback of this
    /// pool it returns at once: the loop running below it delivers them.
    fn wait_turn_and_deliver(&self) {
        if self.deliverer.load(Ordering::Relaxed) == this_thread() {
            return;
        }
        self.hold(self.turn.lock()).deliver();
    }

    /// Subscribes `subscriber` (see [`subscriber`]) to every event from now on.
    pub fn on_batch(self: &Arc<Self>, subscriber: Subscriber) -> Subscription {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut subs = self.subscribers.lock();
            Arc::make_mut(&mut subs).push((id, subscriber));
            self.version.fetch_add(1, Ordering::SeqCst);
        }
        self.refresh();
        Subscription {
            hub: Arc::downgrade(self),
            id,
        }
    }

    /// Every event from now on, as a stream.
    pub fn stream(self: &Arc<Self>) -> EventStream {
        let channel = Arc::new(Channel::default());
        let sender = Sender(channel.clone());
        let Subscription { hub, id } = self.on_batch(Arc::new(move |events: &[Event], _: &Panics| {
            sender.0.push(events)
        }));
        EventStream { channel, hub, id }
    }

    fn unsubscribe(&self, id: u64) {
        {
            Arc::make_mut(&mut self.subscribers.lock()).retain(|(i, _)| *i != id);
            self.version.fetch_add(1, Ordering::SeqCst);
        }
        self.refresh();
    }
}

/// A stream's channel as its subscriber holds it: dropped with the pool's
/// subscribers (the pool is gone), it ends the stream.
struct Sender(Arc<Channel>);

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.close();
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
    fn push(&self, events: &[Event]) {
        let waker = {
            let mut state = self.state.lock();
            state.events.extend(events.iter().cloned());
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn close(&self) {
        let waker = {
            let mut state = self.state.lock();
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
        let mut state = self.channel.state.lock();
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
        self.channel.state.lock().events.pop_front()
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

#[cfg(test)]
mod tests {
    use cmap_core::{Address, ConnectionId};

    use super::*;

    fn checked_in(n: u64) -> Event {
        Event::ConnectionCheckedIn {
            address: Address::new("h", 1),
            connection_id: ConnectionId(n),
            held: std::time::Duration::ZERO,
        }
    }

    /// A hub whose one callback records the connection ids it sees, and
    /// panics on `panic_on`.
    fn recording(panic_on: Option<u64>) -> (Arc<EventHub>, Arc<Mutex<Vec<u64>>>) {
        let hub = Arc::new(EventHub::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let _ = hub.on_batch(subscriber(move |e: &Event| {
            let id = e.connection_id().unwrap().0;
            log.lock().push(id);
            assert_ne!(Some(id), panic_on, "a callback that panics");
        }));
        (hub, seen)
    }

    #[test]
    fn an_input_that_takes_the_turn_delivers_what_was_queued_before_its_own_events() {
        let (hub, seen) = recording(None);
        // Input 1 takes the turn; input 2 finds it taken and queues.
        let mut first = Outbox::default();
        first.push(&hub, checked_in(1));
        let mut second = Outbox::default();
        second.push(&hub, checked_in(2));
        second.seal();
        assert!(matches!(second, Outbox::Queued(_)));
        // The turn is let go before anything was delivered (as if its
        // holder looked at the queue just before input 2 appended).
        drop(first);
        // Input 3 takes the free turn: 1 and 2 go out before it.
        let mut third = Outbox::default();
        third.push(&hub, checked_in(3));
        third.deliver();
        assert_eq!(*seen.lock(), [1, 2, 3]);
        // Input 2 gets the turn with nothing left to deliver.
        second.deliver();
        assert_eq!(*seen.lock(), [1, 2, 3]);
    }

    #[test]
    fn a_panicking_callback_misses_one_event_and_delivery_goes_on() {
        let (hub, seen) = recording(Some(2));
        let others = Arc::new(Mutex::new(Vec::new()));
        let log = others.clone();
        let _ = hub.on_batch(subscriber(move |e: &Event| {
            log.lock().push(e.connection_id().unwrap().0)
        }));
        let mut outbox = Outbox::default();
        for id in 1..=3 {
            outbox.push(&hub, checked_in(id));
        }
        outbox.deliver(); // does not panic
        let mut next = Outbox::default();
        next.push(&hub, checked_in(4));
        next.deliver();
        assert_eq!(*seen.lock(), [1, 2, 3, 4], "it panicked on 2 only");
        assert_eq!(*others.lock(), [1, 2, 3, 4], "the other callback got every event");
        assert_eq!(hub.panics.count(), 1);
    }
}
