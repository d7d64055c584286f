//! Events to subscribers, in the core's order, outside every borrow of the
//! core: an input queues its events, and the outermost delivery on the
//! stack sends them all, so that a callback that calls into the pool has
//! its own input's events sent after the ones before them. A panic in a
//! callback or a `tracing` layer is caught, logged and counted
//! (`Stats::panics_caught`): the others still get the event, and the input
//! goes on to perform its actions.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use cmap_core::Event;

use cmap_async::driver::catch_panic;
use cmap_async::{log_enabled, log_event, Hook};

type Callback = Rc<dyn Fn(&Event)>;

/// A subscription made by [`Pool::on_event`](crate::Pool::on_event), to
/// give to [`Pool::unsubscribe`](crate::Pool::unsubscribe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscription(u64);

#[derive(Default)]
pub(crate) struct Events {
    /// Replaced as a whole when one comes or goes (copy on write): a
    /// delivery keeps the list of the moment with one count taken.
    subscribers: RefCell<Rc<Vec<(u64, Callback)>>>,
    next: Cell<u64>,
    queue: RefCell<VecDeque<Event>>,
    delivering: Cell<bool>,
    /// Whether the core should build events ([`refresh`](Events::refresh)).
    wanted: Cell<bool>,
    /// Panics caught in user code, the manager's hooks included (shared
    /// with the establishing tasks, which hold the pool weakly).
    pub(crate) panics: Rc<Cell<u64>>,
}

/// Clears `delivering` even when a callback panics.
struct Turn<'a>(&'a Cell<bool>);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl Events {
    pub(crate) fn subscribe(&self, callback: Callback) -> Subscription {
        let id = self.next.get();
        self.next.set(id + 1);
        Rc::make_mut(&mut self.subscribers.borrow_mut()).push((id, callback));
        self.refresh();
        Subscription(id)
    }

    pub(crate) fn unsubscribe(&self, subscription: Subscription) {
        Rc::make_mut(&mut self.subscribers.borrow_mut()).retain(|(id, _)| *id != subscription.0);
        self.refresh();
    }

    /// Whether anyone reads events: the core builds none otherwise. As of
    /// the last [`refresh`](Self::refresh): a subscription, the pool's
    /// build, and every turn of its timer look again.
    #[inline]
    pub(crate) fn wanted(&self) -> bool {
        self.wanted.get()
    }

    /// Looks again at the subscribers and at the log level (a `tracing`
    /// callsite check, too dear for every input).
    pub(crate) fn refresh(&self) {
        self.wanted
            .set(!self.subscribers.borrow().is_empty() || log_enabled());
    }

    pub(crate) fn push(&self, event: Event) {
        self.queue.borrow_mut().push_back(event);
    }

    /// Sends the queued events, unless a delivery further up the stack
    /// (a callback's own input) is already sending them.
    pub(crate) fn deliver(&self) {
        if self.delivering.get() || self.queue.borrow().is_empty() {
            return;
        }
        self.delivering.set(true);
        let _turn = Turn(&self.delivering);
        loop {
            let Some(event) = self.queue.borrow_mut().pop_front() else {
                return;
            };
            let _ = catch_panic(&*self.panics, Hook::Logging, || log_event(&event));
            // The list of the moment: a callback may subscribe or
            // unsubscribe.
            let subscribers = self.subscribers.borrow().clone();
            for (_, callback) in subscribers.iter() {
                let _ = catch_panic(&*self.panics, Hook::EventCallback, || callback(&event));
            }
        }
    }
}
