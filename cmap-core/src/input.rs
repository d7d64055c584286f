//! The one input type: every thing that can happen to a pool, with its
//! arguments, as a value ([`Input`]) that [`Pool::handle`] applies (as
//! quinn-proto's `handle_event`). The flight recorder records these values,
//! a replay applies them, and the fuzz harness, the property model and the
//! state table build them, so that a new kind of input is one variant here
//! and one arm in `handle`, and every tool that matches on it fails to
//! compile until it knows the new one.
//!
//! The typed `handle_*` methods are the same transitions under their own
//! names, and the fast entry points return what a plain input cannot:
//! `handle_check_out_direct` is `Input::CheckOut { direct: true }`, and
//! `handle_check_in_direct` is `Input::CheckIn` with its hand-over
//! returned instead of queued (see [`Input::CheckIn`]).

use std::time::Instant;

use crate::connection::{ConnectionId, Pooled, ServiceId, WaiterId};
use crate::error::{CheckInError, EstablishError, UsageError};
use crate::pool::{CheckOut, Clear, Pool, Serve, Wait};

/// One input of the pool, for [`Pool::handle`]. Each variant is one of the
/// typed `handle_*` methods, which say more about what it does; `now`, the
/// clock's time, goes beside it. With the `recorder` feature it has the
/// serde form a recording keeps: a connection is written as its metadata
/// only, and read back as `C::default()`.
#[derive(Debug)]
#[non_exhaustive]
#[cfg_attr(
    feature = "recorder",
    derive(serde::Serialize, serde::Deserialize),
    serde(bound(serialize = "", deserialize = "C: Default"))
)]
pub enum Input<C> {
    /// A checkout ([`Pool::handle_check_out_until`]) with its own deadline
    /// (`None`: wait for ever); `direct`, as
    /// [`Pool::handle_check_out_direct`]: served at once, its connection
    /// comes back in [`Handled::CheckOut`] instead of a `Deliver`.
    CheckOut {
        /// When the checkout fails with a timeout.
        #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::rel_opt"))]
        deadline: Option<Instant>,
        /// Whether a checkout served at once returns its connection.
        direct: bool,
    },
    /// A checked-out connection comes back ([`Pool::handle_check_in`]).
    ///
    /// [`Pool::handle_check_in_direct`] takes the same input: the same
    /// transition, the same events, and a connection that goes to the
    /// oldest queued checkout is handed back to the caller as a
    /// [`HandOver`](crate::HandOver) instead of queued as an
    /// `Action::Deliver`. Only the output's shape differs, so it has no
    /// variant of its own: a recording keeps the hand-over as the
    /// `Deliver` it stands for, and a replay, which applies this input,
    /// reproduces it exactly.
    CheckIn(#[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::pooled"))] Pooled<C>),
    /// A checked-out connection leaves the pool for good
    /// ([`Pool::handle_detach`]).
    Detach(#[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::pooled"))] Pooled<C>),
    /// Connection `id` is established ([`Pool::handle_established`]).
    Established {
        /// The id of its `Establish` action.
        id: ConnectionId,
        /// The connection (a recording keeps none).
        #[cfg_attr(feature = "recorder", serde(skip))]
        connection: C,
        /// The service its handshake named, in load-balanced mode.
        service_id: Option<ServiceId>,
    },
    /// Establishing connection `id` failed
    /// ([`Pool::handle_establish_failed`]).
    EstablishFailed {
        /// The id of its `Establish` action.
        id: ConnectionId,
        /// Why (a recording keeps its text).
        #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::error_text"))]
        error: EstablishError,
    },
    /// A queued checkout's caller went away ([`Pool::handle_cancel`]).
    Cancel(WaiterId),
    /// Clear the pool ([`Pool::handle_clear`]).
    Clear(Clear),
    /// The process forked ([`Pool::handle_reset_after_fork`]).
    ResetAfterFork,
    /// Mark the pool ready ([`Pool::handle_ready`]).
    Ready,
    /// Close the pool ([`Pool::handle_close`]).
    Close,
    /// Interrupt a closed pool's connections in use
    /// ([`Pool::handle_force_close`]).
    ForceClose,
    /// New minPoolSize and maxPoolSize ([`Pool::handle_resize`]).
    Resize {
        /// minPoolSize.
        min: u32,
        /// maxPoolSize (0: no limit).
        max: u32,
    },
    /// Time passed, the timer fired ([`Pool::handle_timeout`]).
    Timeout,
    /// Events on or off ([`Pool::set_events_enabled`]): a switch, but it
    /// changes the outputs, so a replay must see it where it happened.
    EventsEnabled(bool),
    /// Events kept apart or merged ([`Pool::set_events_apart`]), for the
    /// same reason.
    EventsApart(bool),
}

/// The kinds of [`Input`], without their arguments: what a generator of
/// inputs (a fuzzer, a property test, the state table) draws from before
/// it fills in the arguments from its books, so that none of them keeps a
/// list of its own. [`Input::kind`] names an input's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum InputKind {
    /// [`Input::CheckOut`].
    CheckOut,
    /// [`Input::CheckIn`].
    CheckIn,
    /// [`Input::Detach`].
    Detach,
    /// [`Input::Established`].
    Established,
    /// [`Input::EstablishFailed`].
    EstablishFailed,
    /// [`Input::Cancel`].
    Cancel,
    /// [`Input::Clear`].
    Clear,
    /// [`Input::ResetAfterFork`].
    ResetAfterFork,
    /// [`Input::Ready`].
    Ready,
    /// [`Input::Close`].
    Close,
    /// [`Input::ForceClose`].
    ForceClose,
    /// [`Input::Resize`].
    Resize,
    /// [`Input::Timeout`].
    Timeout,
    /// [`Input::EventsEnabled`].
    EventsEnabled,
    /// [`Input::EventsApart`].
    EventsApart,
}

impl InputKind {
    /// Every kind, in the order of [`Input`]'s variants.
    pub const ALL: [InputKind; 15] = [
        InputKind::CheckOut,
        InputKind::CheckIn,
        InputKind::Detach,
        InputKind::Established,
        InputKind::EstablishFailed,
        InputKind::Cancel,
        InputKind::Clear,
        InputKind::ResetAfterFork,
        InputKind::Ready,
        InputKind::Close,
        InputKind::ForceClose,
        InputKind::Resize,
        InputKind::Timeout,
        InputKind::EventsEnabled,
        InputKind::EventsApart,
    ];
}

impl<C> Input<C> {
    /// This input's kind.
    pub fn kind(&self) -> InputKind {
        match self {
            Input::CheckOut { .. } => InputKind::CheckOut,
            Input::CheckIn(_) => InputKind::CheckIn,
            Input::Detach(_) => InputKind::Detach,
            Input::Established { .. } => InputKind::Established,
            Input::EstablishFailed { .. } => InputKind::EstablishFailed,
            Input::Cancel(_) => InputKind::Cancel,
            Input::Clear(_) => InputKind::Clear,
            Input::ResetAfterFork => InputKind::ResetAfterFork,
            Input::Ready => InputKind::Ready,
            Input::Close => InputKind::Close,
            Input::ForceClose => InputKind::ForceClose,
            Input::Resize { .. } => InputKind::Resize,
            Input::Timeout => InputKind::Timeout,
            Input::EventsEnabled(_) => InputKind::EventsEnabled,
            Input::EventsApart(_) => InputKind::EventsApart,
        }
    }
}

/// What [`Pool::handle`] returns for an input it took: most inputs answer
/// with outputs only, a few with a value.
#[derive(Debug)]
#[must_use = "a checkout or a detached connection returned here must be used"]
#[non_exhaustive]
pub enum Handled<C> {
    /// Taken; what it caused comes from `poll_output`.
    Done,
    /// A checkout: its id, or (`direct`) its connection when served at once.
    CheckOut(CheckOut<C>),
    /// The detached connection, the pool's no more.
    Detached(C),
    /// How many connections in use a force close interrupted.
    ForceClosed(usize),
}

/// Why [`Pool::handle`] refused an input: misuse, and nothing changed.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum HandleError<C> {
    /// An unknown id, a clear in the wrong mode, a closed pool.
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// A connection of another pool, handed back.
    #[error(transparent)]
    CheckIn(#[from] CheckInError<C>),
}

impl<C> Pool<C> {
    /// Applies one input at `now` (the clock's time): the one way in, of
    /// which the typed `handle_*` methods are the named forms. Drain
    /// [`poll_output`](Self::poll_output) afterwards.
    ///
    /// # Errors
    ///
    /// What the input's typed method returns: [`HandleError::Usage`] for
    /// misuse, [`HandleError::CheckIn`] for a connection of another pool
    /// (handed back). Nothing changes then.
    pub fn handle(&mut self, now: Instant, input: Input<C>) -> Result<Handled<C>, HandleError<C>> {
        fn done<C>((): ()) -> Result<Handled<C>, HandleError<C>> {
            Ok(Handled::Done)
        }
        fn refused<C, E: Into<HandleError<C>>>(error: E) -> Result<Handled<C>, HandleError<C>> {
            Err(error.into())
        }
        match input {
            Input::CheckOut { deadline, direct } => {
                let serve = if direct { Serve::Directly } else { Serve::ByAction };
                Ok(Handled::CheckOut(self.check_out(
                    now,
                    Wait::Until(deadline),
                    serve,
                )))
            }
            Input::CheckIn(connection) => self.handle_check_in(now, connection).map_or_else(refused, done),
            Input::Detach(connection) => self
                .handle_detach(now, connection)
                .map(Handled::Detached)
                .map_err(Into::into),
            Input::Established {
                id,
                connection,
                service_id,
            } => self
                .handle_established(now, id, connection, service_id)
                .map_or_else(refused, done),
            Input::EstablishFailed { id, error } => self
                .handle_establish_failed(now, id, error)
                .map_or_else(refused, done),
            Input::Cancel(waiter) => self.handle_cancel(now, waiter).map_or_else(refused, done),
            Input::Clear(clear) => self.handle_clear(now, clear).map_or_else(refused, done),
            Input::ResetAfterFork => {
                self.handle_reset_after_fork(now);
                Ok(Handled::Done)
            }
            Input::Ready => self.handle_ready(now).map_or_else(refused, done),
            Input::Close => {
                self.handle_close(now);
                Ok(Handled::Done)
            }
            Input::ForceClose => self
                .handle_force_close(now)
                .map(Handled::ForceClosed)
                .map_err(Into::into),
            Input::Resize { min, max } => self.handle_resize(now, min, max).map_or_else(refused, done),
            Input::Timeout => {
                self.handle_timeout(now);
                Ok(Handled::Done)
            }
            // Switches take effect at the pool's own clock: they move
            // nothing in time (a recording notes them at that instant).
            Input::EventsEnabled(enabled) => {
                self.set_events_enabled(enabled);
                Ok(Handled::Done)
            }
            Input::EventsApart(apart) => {
                self.set_events_apart(apart);
                Ok(Handled::Done)
            }
        }
    }
}

impl<C> std::fmt::Debug for HandleError<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandleError::Usage(e) => f.debug_tuple("Usage").field(e).finish(),
            HandleError::CheckIn(e) => f.debug_tuple("CheckIn").field(e).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::InputKind;

    /// `ALL` holds every kind once: a new kind fails to compile in the
    /// match below until it is counted, and then until `ALL` holds it.
    #[test]
    fn all_holds_every_kind_once() {
        let index = |kind: InputKind| match kind {
            InputKind::CheckOut => 0,
            InputKind::CheckIn => 1,
            InputKind::Detach => 2,
            InputKind::Established => 3,
            InputKind::EstablishFailed => 4,
            InputKind::Cancel => 5,
            InputKind::Clear => 6,
            InputKind::ResetAfterFork => 7,
            InputKind::Ready => 8,
            InputKind::Close => 9,
            InputKind::ForceClose => 10,
            InputKind::Resize => 11,
            InputKind::Timeout => 12,
            InputKind::EventsEnabled => 13,
            InputKind::EventsApart => 14,
        };
        for (i, kind) in InputKind::ALL.into_iter().enumerate() {
            assert_eq!(index(kind), i, "{kind:?} in its place");
        }
    }
}
