//! The flight recorder: the inputs a driver fed the pool, each with its
//! instant, and every output they caused, kept in a bounded ring that a
//! replay re-executes exactly.
//!
//! A ring that forgets its oldest inputs cannot be replayed from a new
//! pool, so the ring is two segments, each opening with a snapshot of the
//! pool's whole state (the pool with its connections left out). When the
//! newer segment holds half the capacity, a third one starts with a fresh
//! snapshot and the oldest is dropped: a recording always holds between
//! half the capacity and all of it, from a snapshot on. Snapshots are
//! taken only between inputs whose outputs are all drained, and each is
//! also the moment the pool checks its own invariants: a failure freezes
//! the recording there, as an incident for the driver to dump.
//!
//! Nothing here reads a clock or does I/O: the driver says when to start,
//! and writes the [`Recording`] where it wants.

pub(crate) mod codec;
mod file;
mod replay;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::connection::{ConnectionId, Meta, ServiceId, WaiterId};
use crate::error::CheckOutError;
use crate::event::{ClosedReason, Event};
use crate::output::Action;
use crate::pool::Pool;
use codec::ErrorText;

pub use file::{Recording, RecordingError};
pub use replay::{Replay, ReplayError, Seconds, Step};

/// The fewest entries a ring keeps: a smaller capacity is raised to it.
const MIN_CAPACITY: usize = 16;

/// One input, as much of it as a replay needs: no connection, only the
/// bookkeeping the pool keeps with it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Input {
    CheckOut {
        #[serde(with = "codec::rel_opt")]
        deadline: Option<Instant>,
        /// Through `handle_check_out_direct`.
        direct: bool,
    },
    /// The connection's metadata as it came back (its `errored` mark
    /// included).
    CheckIn(Meta),
    Detach(Meta),
    Established {
        id: ConnectionId,
        service_id: Option<ServiceId>,
    },
    EstablishFailed {
        id: ConnectionId,
        error: ErrorText,
    },
    Cancel(WaiterId),
    Clear {
        interrupt_in_use: bool,
        service_id: Option<ServiceId>,
        cause: Option<Arc<str>>,
    },
    ResetAfterFork,
    Ready,
    Close,
    ForceClose,
    Resize {
        min: u32,
        max: u32,
    },
    Timeout,
    EventsEnabled(bool),
    EventsApart(bool),
}

/// One output, with the connection left out. Its `Debug` text is what a
/// recording keeps and a replay compares.
#[derive(Debug)]
#[allow(dead_code)] // the fields are read through `Debug`
pub(crate) enum Recorded {
    Event(Event),
    Establish(ConnectionId),
    AbortEstablish(ConnectionId),
    Deliver {
        waiter: WaiterId,
        connection: ConnectionId,
    },
    /// A checkout served by `handle_check_out_direct`'s return value.
    Served {
        waiter: WaiterId,
        connection: ConnectionId,
    },
    Fail {
        waiter: WaiterId,
        error: CheckOutError,
    },
    Close {
        id: ConnectionId,
        reason: ClosedReason,
    },
    Interrupt(ConnectionId),
}

impl Recorded {
    pub(crate) fn of_action<C>(action: &Action<C>) -> Recorded {
        match action {
            Action::Establish { id } => Recorded::Establish(*id),
            Action::AbortEstablish { id } => Recorded::AbortEstablish(*id),
            Action::Deliver { waiter, connection } => Recorded::Deliver {
                waiter: *waiter,
                connection: connection.id(),
            },
            Action::Fail { waiter, error } => Recorded::Fail {
                waiter: *waiter,
                error: error.clone(),
            },
            Action::Close { id, reason, .. } => Recorded::Close {
                id: *id,
                reason: *reason,
            },
            Action::Interrupt { id } => Recorded::Interrupt(*id),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Entry {
    Input { at: Instant, input: Input },
    Output(Recorded),
}

/// The entries since one snapshot of the pool.
#[derive(Debug)]
struct Segment {
    /// The pool as the first entry found it (`Null` for a replay's own
    /// record, which starts from the recording's snapshot).
    snapshot: serde_json::Value,
    entries: Vec<Entry>,
}

/// A running recording (see the module doc).
#[derive(Debug)]
pub(crate) struct Recorder {
    /// Instants are written as nanoseconds from this one.
    base: Instant,
    /// Entries a segment holds before the next one starts (`usize::MAX`:
    /// one segment for ever, as a replay keeps).
    half: usize,
    /// At most two; empty until the first snapshot.
    segments: VecDeque<Segment>,
    /// Why the recording stopped: the pool failed its invariant check.
    incident: Option<String>,
}

impl Recorder {
    /// Whether a new segment is due before the next input.
    #[inline]
    fn roll_due(&self) -> bool {
        self.incident.is_none() && self.segments.back().is_none_or(|s| s.entries.len() >= self.half)
    }

    /// Where entries go now, if anywhere.
    #[inline]
    fn current(&mut self) -> Option<&mut Vec<Entry>> {
        match self.incident {
            Some(_) => None,
            None => self.segments.back_mut().map(|s| &mut s.entries),
        }
    }

    /// A recorder for a replay: everything, in one segment.
    fn unbounded(base: Instant) -> Recorder {
        Recorder {
            base,
            half: usize::MAX,
            segments: VecDeque::from([Segment {
                snapshot: serde_json::Value::Null,
                entries: Vec::new(),
            }]),
            incident: None,
        }
    }
}

impl<C> Pool<C> {
    /// Starts the flight recorder (or restarts it, dropping what it held),
    /// keeping the last `capacity` entries or at least half as many (an
    /// entry is one input or one output). `now` is the instant a
    /// recording counts from. Recording begins at the first input that
    /// finds every output drained.
    pub fn start_recording(&mut self, now: Instant, capacity: usize) {
        self.recorder = Some(Box::new(Recorder {
            base: now,
            half: capacity.max(MIN_CAPACITY) / 2,
            segments: VecDeque::new(),
            incident: None,
        }));
        if !self.has_pending_outputs() {
            self.roll();
        }
    }

    /// Stops the flight recorder and returns what it held.
    pub fn stop_recording(&mut self) -> Option<Recording> {
        let recording = self.recording();
        self.recorder = None;
        recording
    }

    /// What the flight recorder holds, if it runs and has begun.
    pub fn recording(&self) -> Option<Recording> {
        self.recorder.as_deref().and_then(Recording::of)
    }

    /// Why the flight recorder stopped on its own: the pool found its
    /// state inconsistent when it checked, which is a bug of the pool;
    /// [`recording`](Self::recording) then ends with the inputs that led
    /// there.
    pub fn recording_incident(&self) -> Option<&str> {
        self.recorder.as_deref()?.incident.as_deref()
    }

    fn has_pending_outputs(&self) -> bool {
        !self.out.is_empty() || !self.apart.is_empty()
    }

    /// Notes an input, before it is handled.
    #[inline]
    pub(crate) fn record_input(&mut self, now: Instant, input: impl FnOnce() -> Input) {
        let Some(recorder) = self.recorder.as_deref() else {
            return;
        };
        if recorder.roll_due() && !self.has_pending_outputs() {
            self.roll();
        }
        if let Some(entries) = self.recorder.as_deref_mut().and_then(Recorder::current) {
            entries.push(Entry::Input {
                at: now,
                input: input(),
            });
        }
    }

    /// Notes an output as it is queued (or returned).
    #[inline]
    pub(crate) fn record_output(&mut self, output: impl FnOnce() -> Recorded) {
        if let Some(entries) = self.recorder.as_deref_mut().and_then(Recorder::current) {
            entries.push(Entry::Output(output()));
        }
    }

    /// Starts a segment with a snapshot of the pool, after checking its
    /// invariants; drops the oldest segment beyond two.
    #[cold]
    fn roll(&mut self) {
        let Some(mut recorder) = self.recorder.take() else {
            return;
        };
        let snapshot = self.check_invariants().and_then(|()| {
            codec::with_base(recorder.base, || serde_json::to_value(&*self)).map_err(|e| e.to_string())
        });
        match snapshot {
            Ok(snapshot) => {
                recorder.segments.push_back(Segment {
                    snapshot,
                    entries: Vec::with_capacity(recorder.half.min(1 << 16)),
                });
                if recorder.segments.len() > 2 {
                    recorder.segments.pop_front();
                }
            }
            Err(why) => recorder.incident = Some(why),
        }
        self.recorder = Some(recorder);
    }
}
