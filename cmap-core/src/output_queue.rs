//! The output queue and the event switches of the pool: the one ordered
//! stream of actions and events a driver drains after every input
//! ([`Pool::poll_output`]), and the two ways a driver tunes it (events
//! off, or kept apart and taken in bulk). The fields live on [`Pool`]
//! itself, where its layout keeps them beside the hot state (see the
//! field docs); the transitions only push to them.

use std::collections::VecDeque;

use crate::event::Event;
use crate::output::{Action, Output};
use crate::pool::Pool;

impl<C> Pool<C> {
    /// The next output, in order. Drain until `None` after every input.
    pub fn poll_output(&mut self) -> Option<Output<C>> {
        self.out.pop_front()
    }

    /// Whether [`poll_output`](Self::poll_output) has anything to give: a
    /// driver can skip its drain after the common input that leaves none
    /// (events kept apart are counted by
    /// [`pending_events`](Self::pending_events) instead).
    #[inline]
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether events are produced. Off, no event is built at all (the
    /// fast paths then emit nothing but their action).
    #[inline]
    pub fn set_events_enabled(&mut self, enabled: bool) {
        // Drivers call this on every input: a store of the same value would
        // still take the line from the core that wrote it last.
        if self.events_enabled != enabled {
            self.switch_events(enabled);
        }
    }

    /// The rare part of `set_events_enabled`, out of line so that the
    /// check every input makes stays small enough to inline.
    #[inline(never)]
    fn switch_events(&mut self, enabled: bool) {
        record!(self.record_input(self.now, || crate::Input::EventsEnabled(enabled)));
        self.events_enabled = enabled;
    }

    /// Keeps events apart from actions: `poll_output` then yields only
    /// actions, and the events wait, in order, for [`Pool::take_events`],
    /// which takes them all at once. For a driver that delivers events on
    /// their own path anyway (after the actions of an input are recorded),
    /// this spares moving each event through the shared stream. Events
    /// already pending move with the switch.
    pub fn set_events_apart(&mut self, apart: bool) {
        if apart == self.events_apart {
            return;
        }
        record!(self.record_input(self.now, || crate::Input::EventsApart(apart)));
        self.events_apart = apart;
        if apart {
            let mut rest = VecDeque::with_capacity(self.out.len());
            for output in self.out.drain(..) {
                match output {
                    Output::Event(event) => self.apart.push(event),
                    action => rest.push_back(action),
                }
            }
            self.out = rest;
        } else {
            self.out.extend(self.apart.drain(..).map(Output::Event));
        }
    }

    /// How many events wait for [`Pool::take_events`].
    pub fn pending_events(&self) -> usize {
        self.apart.len()
    }

    /// Appends the events kept apart (see [`Pool::set_events_apart`]) to
    /// `into`, oldest first. When `into` is empty the two buffers are
    /// swapped: no event is moved, and both keep their capacity for the
    /// next input.
    pub fn take_events(&mut self, into: &mut Vec<Event>) {
        if into.is_empty() {
            std::mem::swap(&mut self.apart, into);
        } else {
            into.append(&mut self.apart);
        }
    }

    pub(crate) fn emit(&mut self, make: impl FnOnce(&Self) -> Event) {
        if self.events_enabled {
            let event = make(self);
            self.push_event(event);
        }
    }

    /// Queues an event whether or not events are enabled. Out of line:
    /// inlined into every handler that emits, it grows the frames of the
    /// check out and check in of pools that listen to nothing.
    #[inline(never)]
    pub(crate) fn push_event(&mut self, event: Event) {
        if self.events_apart {
            self.apart.push(event);
        } else {
            self.out.push_back(Output::Event(event));
        }
        // Recorded from where it was queued: a call before the push (one
        // that may unwind) kept a second copy of the event on the stack.
        record!(self.record_queued_event());
    }

    pub(crate) fn push_action(&mut self, action: Action<C>) {
        record!(self.record_action(&action));
        self.out.push_back(Output::Action(action));
    }
}
