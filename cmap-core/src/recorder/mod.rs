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

use std::time::Instant;

use crate::connection::{ConnectionId, Meta, Pooled, WaiterId};
use crate::error::CheckOutError;
use crate::event::{ClosedReason, Event};
use crate::input::Input;
use crate::output::{Action, Output};
use crate::pool::Pool;

pub use file::{Recording, RecordingError};
pub use replay::{Replay, ReplayError, Seconds, Step};

/// The fewest entries a ring keeps: a smaller capacity is raised to it.
const MIN_CAPACITY: usize = 16;

/// Inputs are recorded as [`Input`]s of a pool of `()`: a connection is
/// kept as its metadata (see `codec::pooled`), never as itself.
pub(crate) type RecordedInput = Input<()>;

/// One output, with the connection left out. Its `Debug` text is what a
/// recording keeps and a replay compares.
#[derive(Debug, Clone)]
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

/// One entry of a segment: plain data, so that recording one copies a few
/// words and dropping a segment frees its buffers without visiting each
/// entry. The inputs and outputs of every check out and check in are
/// inline; the rest live in the segment's side tables, by index.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry {
    /// A checkout; `served`: the waiter and connection
    /// `handle_check_out_direct` handed out at once.
    CheckOut {
        at: Instant,
        deadline: Option<Instant>,
        direct: bool,
        served: Option<(WaiterId, ConnectionId)>,
    },
    /// A check-in, its metadata at `Segment::metas[meta]`.
    CheckIn { at: Instant, meta: u32 },
    /// An `Action::Deliver`.
    Deliver {
        waiter: WaiterId,
        connection: ConnectionId,
    },
    /// Any other input, at `Segment::inputs[index]`.
    Input { at: Instant, index: u32 },
    /// Any other output, at `Segment::outputs[index]`.
    Output { index: u32 },
}

/// The entries since one snapshot of the pool.
#[derive(Debug)]
pub(crate) struct Segment {
    /// The pool as the first entry found it (`Null` for a replay's own
    /// record, which starts from the recording's snapshot).
    snapshot: serde_json::Value,
    pub(crate) entries: Vec<Entry>,
    pub(crate) metas: Vec<Meta>,
    pub(crate) inputs: Vec<RecordedInput>,
    pub(crate) outputs: Vec<Recorded>,
}

/// By hand: a recorded input is a copy of metadata, which `Input` itself
/// (its `Pooled` unique) does not offer to copy.
impl Clone for Segment {
    fn clone(&self) -> Segment {
        Segment {
            snapshot: self.snapshot.clone(),
            entries: self.entries.clone(),
            metas: self.metas.clone(),
            inputs: self.inputs.iter().map(copy_input).collect(),
            outputs: self.outputs.clone(),
        }
    }
}

/// A copy of a recorded input.
fn copy_input(input: &RecordedInput) -> RecordedInput {
    let copy = |connection: &Pooled<()>| Pooled {
        meta: connection.meta.clone(),
        conn: (),
    };
    match input {
        Input::CheckOut { deadline, direct } => Input::CheckOut {
            deadline: *deadline,
            direct: *direct,
        },
        Input::CheckIn(connection) => Input::CheckIn(copy(connection)),
        Input::Detach(connection) => Input::Detach(copy(connection)),
        Input::Established { id, service_id, .. } => Input::Established {
            id: *id,
            connection: (),
            service_id: *service_id,
        },
        Input::EstablishFailed { id, error } => Input::EstablishFailed {
            id: *id,
            error: error.clone(),
        },
        Input::Cancel(waiter) => Input::Cancel(*waiter),
        Input::Clear(clear) => Input::Clear(clear.clone()),
        Input::ResetAfterFork => Input::ResetAfterFork,
        Input::Ready => Input::Ready,
        Input::Close => Input::Close,
        Input::ForceClose => Input::ForceClose,
        Input::Resize { min, max } => Input::Resize { min: *min, max: *max },
        Input::Timeout => Input::Timeout,
        Input::EventsEnabled(on) => Input::EventsEnabled(*on),
        Input::EventsApart(on) => Input::EventsApart(*on),
    }
}

impl Segment {
    fn new(snapshot: serde_json::Value, capacity: usize) -> Segment {
        Segment {
            snapshot,
            entries: Vec::with_capacity(capacity),
            metas: Vec::with_capacity(capacity / 4),
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Index of the next element of a side table.
    fn index<T>(table: &[T]) -> u32 {
        u32::try_from(table.len()).unwrap_or(u32::MAX)
    }

    fn push_input(&mut self, at: Instant, input: RecordedInput) {
        let index = Segment::index(&self.inputs);
        self.inputs.push(input);
        self.entries.push(Entry::Input { at, index });
    }

    fn push_output(&mut self, output: Recorded) {
        let index = Segment::index(&self.outputs);
        self.outputs.push(output);
        self.entries.push(Entry::Output { index });
    }

    /// Each entry as a recording keeps it: an input (its instant and its
    /// JSON form, instants relative to the codec's base) or an output's
    /// text. Both the recording and a replay's check read entries so.
    pub(crate) fn lines(&self) -> impl Iterator<Item = file::Line> + '_ {
        let input = |at: &Instant, input: &RecordedInput| file::Line::Input {
            at: codec::relative(*at),
            input: serde_json::to_value(input).expect("an input has a JSON form"),
        };
        let output = |output: &Recorded| file::Line::Output {
            output: format!("{output:?}"),
        };
        self.entries.iter().flat_map(move |entry| {
            let (first, second) = match entry {
                Entry::CheckOut {
                    at,
                    deadline,
                    direct,
                    served,
                } => (
                    input(
                        at,
                        &Input::CheckOut {
                            deadline: *deadline,
                            direct: *direct,
                        },
                    ),
                    served.map(|(waiter, connection)| output(&Recorded::Served { waiter, connection })),
                ),
                Entry::CheckIn { at, meta } => {
                    let connection = Pooled {
                        meta: Box::new(self.metas[*meta as usize]),
                        conn: (),
                    };
                    (input(at, &Input::CheckIn(connection)), None)
                }
                Entry::Deliver { waiter, connection } => (
                    output(&Recorded::Deliver {
                        waiter: *waiter,
                        connection: *connection,
                    }),
                    None,
                ),
                Entry::Input { at, index } => (input(at, &self.inputs[*index as usize]), None),
                Entry::Output { index } => (output(&self.outputs[*index as usize]), None),
            };
            std::iter::once(first).chain(second)
        })
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.metas.clear();
        self.inputs.clear();
        self.outputs.clear();
    }
}

/// A running recording (see the module doc).
#[derive(Debug)]
pub(crate) struct Recorder {
    /// Instants are written as nanoseconds from this one.
    pub(crate) base: Instant,
    /// Entries a segment holds before the next one starts (`usize::MAX`:
    /// one segment for ever, as a replay keeps).
    half: usize,
    /// The segment before `current`, once there has been one.
    previous: Option<Segment>,
    /// Where entries go; `None` until the first snapshot. Two fields
    /// rather than a ring: an input reaches its segment without index
    /// arithmetic.
    current: Option<Segment>,
    /// Why the recording stopped: the pool failed its invariant check.
    pub(crate) incident: Option<String>,
}

impl Recorder {
    /// Whether a new segment is due before the next input.
    #[inline]
    fn roll_due(&self) -> bool {
        self.incident.is_none() && self.current.as_ref().is_none_or(|s| s.entries.len() >= self.half)
    }

    /// Where entries go now, if anywhere.
    #[inline]
    fn current(&mut self) -> Option<&mut Segment> {
        match self.incident {
            Some(_) => None,
            None => self.current.as_mut(),
        }
    }

    /// A recorder for a replay: everything, in one segment.
    fn unbounded(base: Instant) -> Recorder {
        Recorder {
            base,
            half: usize::MAX,
            previous: None,
            current: Some(Segment::new(serde_json::Value::Null, 0)),
            incident: None,
        }
    }

    /// The segments held, oldest first.
    pub(crate) fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.previous.iter().chain(&self.current)
    }

    /// The replay's own entries since the last call, as lines; forgets them.
    pub(crate) fn take_lines(&mut self) -> Vec<file::Line> {
        let base = self.base;
        let segment = self
            .current
            .as_mut()
            .expect("a replay's recorder has its segment");
        let lines = codec::with_base(base, || segment.lines().collect());
        segment.clear();
        lines
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
            previous: None,
            current: None,
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

    /// The segment an input goes to, after starting a new one if one is
    /// due (and the outputs are drained); `None` while not recording.
    #[inline]
    fn input_segment(&mut self) -> Option<&mut Segment> {
        if self.recorder.as_deref()?.roll_due() && !self.has_pending_outputs() {
            self.roll();
        }
        self.recorder.as_deref_mut()?.current()
    }

    /// Notes an input other than a check out or in, before it is handled.
    #[inline(never)]
    pub(crate) fn record_input(&mut self, now: Instant, input: impl FnOnce() -> RecordedInput) {
        if let Some(segment) = self.input_segment() {
            segment.push_input(now, input());
        }
    }

    /// Notes a checkout, before it is handled.
    #[inline]
    pub(crate) fn record_check_out(&mut self, now: Instant, deadline: Option<Instant>, direct: bool) {
        if let Some(segment) = self.input_segment() {
            segment.entries.push(Entry::CheckOut {
                at: now,
                deadline,
                direct,
                served: None,
            });
        }
    }

    /// Notes that the checkout being handled was served at once, with
    /// `connection`: on its entry, the last checkout noted (only its
    /// events follow it).
    #[inline]
    pub(crate) fn record_served(&mut self, waiter: WaiterId, connection: ConnectionId) {
        let Some(segment) = self.recorder.as_deref_mut().and_then(Recorder::current) else {
            return;
        };
        let entry = segment.entries.iter_mut().rev().find_map(|entry| match entry {
            Entry::CheckOut { served, .. } => Some(served),
            _ => None,
        });
        if let Some(served) = entry {
            *served = Some((waiter, connection));
        }
    }

    /// Notes a check-in, before it is handled.
    #[inline]
    pub(crate) fn record_check_in(&mut self, now: Instant, meta: &Meta) {
        if let Some(segment) = self.input_segment() {
            let index = Segment::index(&segment.metas);
            segment.metas.push(*meta);
            segment.entries.push(Entry::CheckIn { at: now, meta: index });
        }
    }

    /// Notes an output as it is queued.
    #[inline(never)]
    pub(crate) fn record_output(&mut self, output: impl FnOnce() -> Recorded) {
        if let Some(segment) = self.recorder.as_deref_mut().and_then(Recorder::current) {
            segment.push_output(output());
        }
    }

    /// Notes the event just queued (`push_event`).
    #[inline(never)]
    pub(crate) fn record_queued_event(&mut self) {
        let queued = if self.events_apart {
            self.apart.last()
        } else {
            match self.out.back() {
                Some(Output::Event(event)) => Some(event),
                _ => None,
            }
        };
        if let Some(event) = queued.cloned() {
            self.record_output(|| Recorded::Event(event));
        }
    }

    /// Notes an action as it is queued.
    #[inline(never)]
    pub(crate) fn record_action(&mut self, action: &Action<C>) {
        if let Action::Deliver { waiter, connection } = action {
            return self.record_delivered(*waiter, connection.id());
        }
        if let Some(segment) = self.recorder.as_deref_mut().and_then(Recorder::current) {
            segment.push_output(Recorded::of_action(action));
        }
    }

    /// Notes a delivery: an `Action::Deliver`, or a connection handed
    /// straight to a waiter (`handle_check_in_direct`), recorded as the
    /// `Deliver` it stands for (a replay, which checks in by action,
    /// records the same).
    #[inline(never)]
    pub(crate) fn record_delivered(&mut self, waiter: WaiterId, connection: ConnectionId) {
        if let Some(segment) = self.recorder.as_deref_mut().and_then(Recorder::current) {
            segment.entries.push(Entry::Deliver { waiter, connection });
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
                let next = Segment::new(snapshot, recorder.half.min(1 << 16));
                recorder.previous = recorder.current.replace(next);
            }
            Err(why) => recorder.incident = Some(why),
        }
        self.recorder = Some(recorder);
    }
}
