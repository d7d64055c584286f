//! What the simulated driver does, as generated: one `Step` at a time,
//! each an input of the pool (`Drawn`: its kind from `InputKind::ALL`,
//! its arguments from the model's books when it is applied), or one of
//! the driver's own behaviours that is not an input (its clock moving, a
//! connection handed to another pool, a late result...). The inputs are
//! `cmap_core::Input`, applied through `Pool::handle` (`commands/`): this
//! file does not spell them again, it only says how often each kind comes
//! and what its numbers mean.

use std::fmt;

use cmap_core::InputKind;
use proptest::prelude::*;

/// One step of the simulated driver. `pick`s choose among what exists at
/// that point (modulo its count); a pick with nothing to choose from does
/// nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    /// One input of the pool, at the driver's clock.
    Input(Drawn),
    /// One input at a `now` `ms` behind the driver's clock: a caller that
    /// read the clock before taking the lock (a checkout), a spurious
    /// timer call with an old `now` (a timeout).
    Stale { ms: u64, input: Drawn },
    /// The clock moves on by `ms`, and the timer fires (`Input::Timeout`).
    Advance { ms: u64 },
    /// The clock moves on by `ns`, and the timer fires: a tiny step, to
    /// land right at or beside deadlines.
    Nudge { ns: u64 },
    /// The clock moves to `poll_timeout` (or 1 ns before it), and the
    /// timer fires.
    FireTimer { early: bool },
    /// The clock moves to `offset_ns` from the instant the connection made
    /// available last reaches `maxIdleTimeMS`, and a checkout with the
    /// options' timeout follows: the idle rule's boundary, which whole
    /// milliseconds seldom hit.
    AtIdleEdge { offset_ns: i64 },
    /// The clock moves without the timer firing; the next input is late.
    Jump { ms: u64 },
    /// A held connection checked in to (or detached from) another pool,
    /// which refuses it and hands it back.
    WrongPool { pick: usize, detach: bool },
    /// An establishment result (success or failure) for a connection that
    /// is no longer pending (aborted, or already reported).
    LateResult { pick: usize, ok: bool },
    /// An establishment result for an id never issued: misuse.
    UnknownResult { ahead: u64, ok: bool },
}

// The switches of a drawn input (`Drawn::flags`).
/// `CheckOut`: a deadline of its own, `value` ms from now (may be in the
/// past), instead of the options' `waitQueueTimeoutMS`.
pub(crate) const UNTIL: u8 = 1;
/// `CheckOut` with `UNTIL`: no deadline at all (wait for ever).
pub(crate) const FOREVER: u8 = 2;
/// `CheckOut`: `Input::CheckOut { direct: true }`, served at once with
/// its connection returned; `CheckIn`: through `handle_check_in_direct`,
/// whose hand-over to a waiter is judged as the `Deliver` it stands for.
pub(crate) const DIRECT: u8 = 4;
/// `CheckIn`: the connection is marked errored first.
pub(crate) const ERRORED: u8 = 8;
/// `Clear`: interrupting the connections in use.
pub(crate) const INTERRUPT: u8 = 16;
/// `Clear`: in the other mode's form (a service id without load
/// balancing, or none with it): refused.
pub(crate) const WRONG_MODE: u8 = 32;

/// An input of the pool as drawn: its kind, and the numbers the model's
/// books turn into its arguments when it is applied (`Sim::input`), so
/// that the connection or id it names is one that exists then.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Drawn {
    pub(crate) kind: InputKind,
    /// Which of what the books hold it names: a held connection
    /// (`CheckIn`, `Detach`), a pending one (`Established`,
    /// `EstablishFailed`), a checkout (`Cancel`).
    pub(crate) pick: usize,
    /// A number the kind reads: `CheckOut` with `UNTIL`, its deadline in
    /// ms from now; `Established` and `Clear`, the service `[value; 12]`
    /// (load-balanced); `EstablishFailed`, the error's kind
    /// (`Drawn::fail_kind`); `Cancel`, what it names
    /// (`Drawn::cancel_target`); `Resize`, the sizes (`Drawn::sizes`).
    pub(crate) value: i64,
    /// Switches the kind reads (`UNTIL`, `FOREVER`, `DIRECT`, `ERRORED`,
    /// `INTERRUPT`, `WRONG_MODE`).
    pub(crate) flags: u8,
}

/// Which checkout a cancel names.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CancelTarget {
    /// One still queued.
    Waiting,
    /// One already served, failed or cancelled.
    Resolved,
    /// An id never issued.
    Unknown,
}

/// The kind of an establishment failure (spec: "Establishing a
/// Connection").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailKind {
    /// A network error or timeout: labelled `SystemOverloadedError` and
    /// `RetryableError`; never clears the pool.
    Network,
    /// The authentication step failed: unlabelled.
    Authentication,
    /// DNS, TLS validation, an error reply to `hello`: unlabelled.
    Other,
}

impl FailKind {
    pub(crate) fn kind(self) -> cmap_core::EstablishErrorKind {
        match self {
            FailKind::Network => cmap_core::EstablishErrorKind::Network,
            FailKind::Authentication => cmap_core::EstablishErrorKind::Authentication,
            FailKind::Other => cmap_core::EstablishErrorKind::Other,
        }
    }

    pub(crate) fn labelled(self) -> bool {
        self == FailKind::Network
    }
}

impl Drawn {
    /// An input of `kind` with no arguments drawn.
    pub(crate) fn of(kind: InputKind) -> Drawn {
        Drawn {
            kind,
            pick: 0,
            value: 0,
            flags: 0,
        }
    }

    /// The checkout a plain `handle_check_out` makes: the options' timeout.
    pub(crate) fn check_out() -> Drawn {
        Drawn::of(InputKind::CheckOut)
    }

    /// Whether switch `flag` is on.
    pub(crate) fn has(self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub(crate) fn fail_kind(self) -> FailKind {
        match self.value {
            0 => FailKind::Network,
            1 => FailKind::Authentication,
            _ => FailKind::Other,
        }
    }

    pub(crate) fn cancel_target(self) -> CancelTarget {
        match self.value {
            0 => CancelTarget::Waiting,
            1 => CancelTarget::Resolved,
            _ => CancelTarget::Unknown,
        }
    }

    /// `Resize`: (minPoolSize, maxPoolSize).
    pub(crate) fn sizes(self) -> (u32, u32) {
        ((self.value / 8) as u32, (self.value % 8) as u32)
    }

    /// The service byte of `Established` and `Clear`.
    pub(crate) fn service(self) -> u8 {
        self.value as u8
    }
}

/// What the model reads of a drawn input, so that a saved failure reads as
/// the input it was.
impl fmt::Debug for Drawn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = |flag: u8, name: &str| {
            if self.has(flag) {
                format!(" {name}")
            } else {
                String::new()
            }
        };
        match self.kind {
            InputKind::CheckOut if !self.has(UNTIL) => write!(f, "CheckOut(options' timeout)"),
            InputKind::CheckOut if self.has(FOREVER) => {
                write!(f, "CheckOut(no deadline{})", on(DIRECT, "direct"))
            }
            InputKind::CheckOut => write!(f, "CheckOut({:+} ms{})", self.value, on(DIRECT, "direct")),
            InputKind::CheckIn => write!(
                f,
                "CheckIn(pick {}{}{})",
                self.pick,
                on(ERRORED, "errored"),
                on(DIRECT, "direct")
            ),
            InputKind::Detach => write!(f, "Detach(pick {})", self.pick),
            InputKind::Established => write!(f, "Established(pick {}, service {})", self.pick, self.value),
            InputKind::EstablishFailed => {
                write!(f, "EstablishFailed(pick {}, {:?})", self.pick, self.fail_kind())
            }
            InputKind::Cancel => write!(f, "Cancel(pick {}, {:?})", self.pick, self.cancel_target()),
            InputKind::Clear => write!(
                f,
                "Clear(service {}{}{})",
                self.value,
                on(INTERRUPT, "interrupt"),
                on(WRONG_MODE, "wrong mode")
            ),
            InputKind::Resize => write!(f, "Resize{:?}", self.sizes()),
            kind => write!(f, "{kind:?}"),
        }
    }
}

/// The kinds of input the model does not draw, and why; every other kind
/// of `InputKind::ALL` is drawn (`drawn`), a new one too, and the model
/// fails on a kind it does not follow (`Sim::input`), so that none is
/// forgotten.
pub(crate) const SET_ASIDE: [(InputKind, &str); 3] = [
    (
        InputKind::ResetAfterFork,
        "a fork clears the pool as a whole even in load-balanced mode, where the model keeps generations per service; tests/rules/pool.rs and the kit's cases cover it",
    ),
    (
        InputKind::EventsEnabled,
        "the runs compare the same steps with events merged, off and apart (`same_commands_same_outputs`): a switch mid-run would make them different runs",
    ),
    (InputKind::EventsApart, "as EventsEnabled"),
];

/// The steps that feed the pool an input of `kind`, each with how often it
/// comes (out of 277 for all steps); none for a kind `SET_ASIDE`.
pub(crate) fn drawn(kind: InputKind) -> Vec<(u32, BoxedStrategy<Step>)> {
    let pick = any::<usize>();
    // An input of this kind, at the driver's clock.
    let input = move |pick: usize, value: i64, flags: u8| {
        Step::Input(Drawn {
            kind,
            pick,
            value,
            flags,
        })
    };
    let flag = |on: bool, flag: u8| if on { flag } else { 0 };
    match kind {
        InputKind::CheckOut => vec![
            // The options' timeout, now and then from a stale `now`.
            (
                40,
                prop_oneof![9 => Just(0u64), 1 => 0..=5u64]
                    .prop_map(|ms| match ms {
                        0 => Step::Input(Drawn::check_out()),
                        ms => Step::Stale {
                            ms,
                            input: Drawn::check_out(),
                        },
                    })
                    .boxed(),
            ),
            // A deadline of its own, or none; queued or direct.
            (
                15,
                (prop::option::weighted(0.85, -100..=600i64), any::<bool>())
                    .prop_map(move |(offset, direct)| {
                        let flags = UNTIL | flag(offset.is_none(), FOREVER) | flag(direct, DIRECT);
                        input(0, offset.unwrap_or(0), flags)
                    })
                    .boxed(),
            ),
        ],
        InputKind::CheckIn => vec![(
            36,
            (pick, prop::bool::weighted(0.2), any::<bool>())
                .prop_map(move |(pick, errored, direct)| {
                    input(pick, 0, flag(errored, ERRORED) | flag(direct, DIRECT))
                })
                .boxed(),
        )],
        InputKind::Detach => vec![(5, pick.prop_map(move |pick| input(pick, 0, 0)).boxed())],
        InputKind::Established => vec![(
            36,
            (pick, 0..3i64)
                .prop_map(move |(pick, service)| input(pick, service, 0))
                .boxed(),
        )],
        InputKind::EstablishFailed => vec![(
            8,
            // Network (labelled) three times in five.
            (pick, prop_oneof![3 => Just(0i64), 1 => Just(1), 1 => Just(2)])
                .prop_map(move |(pick, kind)| input(pick, kind, 0))
                .boxed(),
        )],
        InputKind::Cancel => vec![(
            15,
            // A queued checkout, one resolved, an id never issued: 3, 2, 1.
            (pick, prop_oneof![3 => Just(0i64), 2 => Just(1), 1 => Just(2)])
                .prop_map(move |(pick, target)| input(pick, target, 0))
                .boxed(),
        )],
        InputKind::Clear => vec![(
            6,
            (any::<bool>(), 0..3i64, prop::bool::weighted(0.05))
                .prop_map(move |(interrupt, service, wrong)| {
                    input(0, service, flag(interrupt, INTERRUPT) | flag(wrong, WRONG_MODE))
                })
                .boxed(),
        )],
        InputKind::Ready => vec![(20, Just(input(0, 0, 0)).boxed())],
        InputKind::Close => vec![(1, Just(input(0, 0, 0)).boxed())],
        // Refused until the pool is closed; then it interrupts.
        InputKind::ForceClose => vec![(2, Just(input(0, 0, 0)).boxed())],
        InputKind::Resize => vec![(
            8,
            (0..=4i64, 0..=6i64)
                .prop_map(move |(min, max)| input(0, min * 8 + max, 0))
                .boxed(),
        )],
        // The timer's other steps move the clock first (`behaviours`).
        InputKind::Timeout => vec![(
            3,
            (0..50u64)
                .prop_map(move |ms| Step::Stale {
                    ms,
                    input: Drawn::of(kind),
                })
                .boxed(),
        )],
        kind if SET_ASIDE.iter().any(|(k, _)| *k == kind) => Vec::new(),
        // A kind added to the core after this model: drawn, and refused by
        // `Sim::input` until the model follows it.
        kind => vec![(1, Just(Step::Input(Drawn::of(kind))).boxed())],
    }
}

/// The driver's own steps, that are not an input of their own: its clock
/// moving (before the timer fires, a checkout, or nothing), a connection
/// of this pool handed to another, results for connections no longer
/// pending or never issued.
fn behaviours() -> Vec<(u32, BoxedStrategy<Step>)> {
    let pick = any::<usize>();
    vec![
        (25, (0..2000u64).prop_map(|ms| Step::Advance { ms }).boxed()),
        (8, (0..1_000_000u64).prop_map(|ns| Step::Nudge { ns }).boxed()),
        (
            25,
            any::<bool>().prop_map(|early| Step::FireTimer { early }).boxed(),
        ),
        (
            4,
            (-1..=1i64)
                .prop_map(|offset_ns| Step::AtIdleEdge { offset_ns })
                .boxed(),
        ),
        (8, (0..600u64).prop_map(|ms| Step::Jump { ms }).boxed()),
        (
            2,
            (pick, any::<bool>())
                .prop_map(|(pick, detach)| Step::WrongPool { pick, detach })
                .boxed(),
        ),
        (
            8,
            (pick, any::<bool>())
                .prop_map(|(pick, ok)| Step::LateResult { pick, ok })
                .boxed(),
        ),
        (
            2,
            (0..3u64, any::<bool>())
                .prop_map(|(ahead, ok)| Step::UnknownResult { ahead, ok })
                .boxed(),
        ),
    ]
}

/// One step: an input of any kind of `InputKind::ALL` but those set
/// aside, or one of the driver's behaviours.
pub(crate) fn step() -> impl Strategy<Value = Step> {
    let inputs = InputKind::ALL.into_iter().flat_map(drawn);
    proptest::strategy::Union::new_weighted(inputs.chain(behaviours()).collect())
}

/// Every kind of input is drawn or set aside with a reason, never both:
/// a kind added to the core is drawn (and the model refuses it until it
/// follows it), a kind set aside is not drawn by mistake.
#[test]
fn every_kind_of_input_is_drawn_or_set_aside() {
    for kind in InputKind::ALL {
        let aside = SET_ASIDE.iter().any(|(k, _)| *k == kind);
        let weight: u32 = drawn(kind).iter().map(|(w, _)| w).sum();
        assert!(
            aside != (weight > 0),
            "{kind:?}: set aside {aside}, drawn {weight}"
        );
    }
    for (kind, why) in SET_ASIDE {
        assert!(InputKind::ALL.contains(&kind) && !why.is_empty(), "{kind:?}");
    }
}
