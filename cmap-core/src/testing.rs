//! What a driver author needs to property-test a driver on the core
//! (feature `testing`; its proptest strategies with feature `proptest`):
//! random pool options and random steps on virtual time ([`Case`]), the
//! books of a minimal driver that turn a step into an [`Input`] with valid
//! arguments and check every output against them ([`Books`]), and
//! [`run`], which applies a case through [`virtual_time`] and checks after
//! every input:
//!
//! - the core's own invariants ([`Pool::check_invariants`]);
//! - the books against the core's counts: the checkouts still waiting, the
//!   connections being established, the connections in use;
//! - that every action names something the books hold (a waiter that
//!   waits, a connection being established), and that an input valid by
//!   the books is never refused;
//! - that time is honoured: after `Input::Timeout` at `t`,
//!   `poll_timeout()` is later than `t`;
//!
//! then runs the case again on a fresh pool with the flight recorder on,
//! requires the same outputs (their `Debug` text), and replays the
//! recording exactly. The fuzz target and the core's property tests run
//! this module; a driver's own property test embeds [`Books`] in its
//! [`VirtualDriver`] ([`KeepsBooks`]), applies each step with [`step`] and
//! checks its own state beside them.
//!
//! Connections are numbers (`Pool<u64>`): a driver generic over its
//! connection type is tested with `u64`.
//!
//! ```
//! # #[cfg(feature = "proptest")] {
//! use cmap_core::testing::{self, strategy};
//! use proptest::prelude::*;
//!
//! let base = std::time::Instant::now();
//! proptest!(ProptestConfig::with_cases(16), |(case in strategy::case(64))| {
//!     testing::run(&case, base);
//! });
//! # }
//! ```

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::time::{Duration, Instant};

use crate::virtual_time::{self, VirtualDriver};
use crate::{
    Action, Address, CheckOut, Clear, ConnectionId, EstablishError, EstablishErrorKind, EstablishFailure,
    Event, HandOver, HandleError, Handled, Input, InputKind, Output, Pool, PoolOptions, Pooled, Reconnect,
    Recording, WaiterId,
};

/// One case: pool options and the steps applied to the pool.
#[derive(Debug, Clone)]
pub struct Case {
    /// The pool's options.
    pub options: CaseOptions,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// The pool options a case draws, kept small so that limits are met.
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)] // each is the option of the same name, drawn
pub struct CaseOptions {
    pub max_pool_size: u8,
    pub min_pool_size: u8,
    pub max_connecting: u8,
    pub wait_queue_timeout_ms: Option<u16>,
    pub max_idle_ms: Option<u16>,
    pub lifetime_ms: Option<u16>,
    pub maintenance_ms: Option<u16>,
    pub keep_ready: bool,
    pub keep_waiting: bool,
    pub reconnect: bool,
    pub seed: u64,
}

/// One step of a driver: time passes, or one input of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Time passes, in milliseconds; the timer fires at every deadline on
    /// the way.
    Advance(u16),
    /// One input of the kind `InputKind::ALL[kind % len]`, its arguments
    /// drawn from the books by `pick` and shaped by `value` and `flags`
    /// ([`Books::input`]).
    Input {
        /// Which kind of input.
        kind: u8,
        /// Which connection or waiter, among those the books hold.
        pick: u8,
        /// A number: a timeout in ms, an error kind, sizes.
        value: u16,
        /// Switches: bit 1 a deadline of its own, an errored check-in, an
        /// interrupting clear; bit 2 a direct checkout; bit 4 a check-in
        /// through `handle_check_in_direct`.
        flags: u8,
    },
}

impl Step {
    /// The step of an input of `kind`.
    pub fn input(kind: InputKind, pick: u8, value: u16, flags: u8) -> Step {
        let kind = InputKind::ALL
            .iter()
            .position(|k| *k == kind)
            .expect("a kind of ALL");
        Step::Input {
            kind: kind as u8,
            pick,
            value,
            flags,
        }
    }
}

impl CaseOptions {
    /// The options, or `None` for a draw the core refuses (min above max).
    pub fn build(&self) -> Option<PoolOptions> {
        let ms = |v: u16| Duration::from_millis(u64::from(v));
        let mut b = PoolOptions::builder()
            .max_pool_size(u32::from(self.max_pool_size % 8))
            .min_pool_size(u32::from(self.min_pool_size % 4))
            .max_connecting(1 + u32::from(self.max_connecting % 3))
            .wait_queue_timeout(self.wait_queue_timeout_ms.map(ms))
            .max_idle_time(self.max_idle_ms.map(ms))
            .maintenance_interval(self.maintenance_ms.map(|v| ms(1 + v % 2000)))
            .establish_failure(if self.keep_ready {
                EstablishFailure::KeepReady
            } else {
                EstablishFailure::ClearPool
            })
            .keep_waiting_on_overload(self.keep_waiting)
            .seed(self.seed);
        if let Some(lifetime) = self.lifetime_ms {
            b = b.max_lifetime(Duration::from_millis(1 + u64::from(lifetime)), 0.2);
        }
        if self.reconnect {
            b = b.reconnect(Some(Reconnect {
                initial_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(200),
                give_up_after: Some(Duration::from_secs(2)),
                max_delay_while_waiting: Duration::from_millis(5),
            }));
        }
        // Options the core refuses (min above max, say) make no case.
        b.build().ok()
    }
}

/// The flight recorder's ring in the second run: small, so that its
/// segments roll and a replay starts from a snapshot taken mid-run.
const RING: usize = 64;

/// Runs `case` twice on fresh pools from `base`, the second time with the
/// flight recorder on, and checks everything the module says, and that the
/// recording replays exactly; panics on the first thing wrong. A case
/// whose options the core refuses is skipped.
pub fn run(case: &Case, base: Instant) {
    let Some(options) = case.options.build() else {
        return;
    };
    let first = transcript(&options, &case.steps, base, None).0;
    let (again, recording) = transcript(&options, &case.steps, base, Some(RING));
    assert!(
        first == again,
        "the same inputs at the same instants gave other outputs"
    );
    let recording = recording.expect("the recorder began at once");
    assert_eq!(recording.incident(), None);
    if let Err(e) = recording.replay(base) {
        panic!("the recording did not replay: {e}");
    }
}

/// Applies `steps` to a fresh pool with `options` from `base`, checking
/// after every input as [`run`] does, and hands back what happened: each
/// step, the pool's answer to it, and every output (the `Debug` text of
/// each), with the recording when `record` gives the recorder's ring.
pub fn transcript(
    options: &PoolOptions,
    steps: &[Step],
    base: Instant,
    record: Option<usize>,
) -> (Vec<String>, Option<Recording>) {
    let mut harness = Harness {
        pool: Pool::new(base, Address::new("testing", 27017), options.clone()),
        now: base,
        books: Books::default(),
        transcript: Vec::new(),
        events: Vec::new(),
    };
    settle(virtual_time::drain(&mut harness));
    if let Some(ring) = record {
        harness.pool.start_recording(base, ring);
    }
    for next in steps {
        harness.transcript.push(format!("> {next:?}"));
        settle(step(&mut harness, *next));
    }
    let recording = harness.pool.recording();
    (harness.transcript, recording)
}

/// A minimal driver's books: the connections it holds and the checkouts
/// it waits for, kept from the pool's answers and actions. They turn a
/// [`Step`] into an [`Input`] with valid arguments, and check every action
/// and, after every input, the pool's counts against themselves. A
/// driver's own property test keeps them beside its own state and calls
/// them from its [`VirtualDriver`] methods.
#[derive(Debug, Default)]
pub struct Books {
    in_use: Vec<Pooled<u64>>,
    /// In use, but interrupted: closed in the core's books already.
    interrupted: BTreeSet<ConnectionId>,
    pending: Vec<ConnectionId>,
    /// Abandoned by the core; a late result is still accepted.
    aborted: Vec<ConnectionId>,
    waiting: Vec<WaiterId>,
    connections_made: u64,
    /// The kind of the input being applied, for `answered`.
    asking: Option<InputKind>,
}

impl Books {
    /// The input a [`Step::Input`] of `kind` stands for on `pool` at `now`,
    /// its arguments from the books (taken out of them where the input
    /// consumes them), or `None` when the books hold nothing to pick from.
    /// A check-in through `handle_check_in_direct` (flag 4) is an
    /// `Input::CheckIn` whose hand-over comes back to the caller, and
    /// `Pool::handle` cannot return it: see
    /// [`Books::take_for_direct_check_in`].
    pub fn input(
        &mut self,
        pool: &Pool<u64>,
        now: Instant,
        kind: InputKind,
        pick: u8,
        value: u16,
        flags: u8,
    ) -> Option<Input<u64>> {
        self.input_after(pool.options().wait_queue_timeout(), now, kind, pick, value, flags)
    }

    /// [`input`](Books::input), given the pool's `waitQueueTimeoutMS`.
    fn input_after(
        &mut self,
        wait_queue_timeout: Option<Duration>,
        now: Instant,
        kind: InputKind,
        pick: u8,
        value: u16,
        flags: u8,
    ) -> Option<Input<u64>> {
        let flag = |bit: u8| flags & bit != 0;
        self.asking = Some(kind);
        Some(match kind {
            InputKind::CheckOut => {
                let timeout = flag(1).then(|| Duration::from_millis(u64::from(value)));
                let deadline = timeout.or(wait_queue_timeout).map(|t| now + t);
                Input::CheckOut {
                    deadline,
                    direct: flag(2),
                }
            }
            InputKind::CheckIn => Input::CheckIn(self.take_in_use(pick, flag(1))?),
            InputKind::Detach => Input::Detach(self.take_in_use(pick, false)?),
            InputKind::Established => {
                let id = self.take_establishing(pick)?;
                self.connections_made += 1;
                Input::Established {
                    id,
                    connection: self.connections_made,
                    service_id: None,
                }
            }
            InputKind::EstablishFailed => {
                let id = self.take_establishing(pick)?;
                let kind = match value % 3 {
                    0 => EstablishErrorKind::Network,
                    1 => EstablishErrorKind::Authentication,
                    _ => EstablishErrorKind::Other,
                };
                let error = EstablishError::new(kind, std::io::Error::other("drawn failure"));
                Input::EstablishFailed { id, error }
            }
            InputKind::Cancel => Input::Cancel(take(&mut self.waiting, pick)?),
            InputKind::Clear => Input::Clear(Clear {
                interrupt_in_use: flag(1),
                ..Clear::default()
            }),
            InputKind::ResetAfterFork => Input::ResetAfterFork,
            InputKind::Ready => Input::Ready,
            InputKind::Close => Input::Close,
            InputKind::ForceClose => Input::ForceClose,
            InputKind::Resize => Input::Resize {
                min: u32::from(value & 0xff) % 5,
                max: u32::from(value >> 8) % 9,
            },
            InputKind::Timeout => Input::Timeout,
            InputKind::EventsEnabled => Input::EventsEnabled(!flag(1)),
            InputKind::EventsApart => Input::EventsApart(flag(1)),
        })
    }

    /// A connection in use, by `pick`, out of the books, for a check-in
    /// through `handle_check_in_direct` (`errored` marks it).
    pub fn take_for_direct_check_in(&mut self, pick: u8, errored: bool) -> Option<Pooled<u64>> {
        self.take_in_use(pick, errored)
    }

    /// Books a direct check-in's hand-over, as the `Deliver` it stands for.
    pub fn handed_over(&mut self, handed: HandOver<u64>) {
        self.served(handed.waiter);
        self.in_use.push(handed.connection);
    }

    /// Books the pool's answer to the input last drawn by
    /// [`input`](Books::input) (a checkout's connection or id).
    ///
    /// # Panics
    ///
    /// An input valid by the books, refused.
    pub fn answered(&mut self, answer: Result<Handled<u64>, HandleError<u64>>) {
        let kind = self.asking.take();
        match answer {
            Ok(Handled::CheckOut(CheckOut::Ready(conn))) => self.in_use.push(conn),
            Ok(Handled::CheckOut(CheckOut::Later(id))) => self.waiting.push(id),
            Ok(_) => {}
            Err(e) => match kind {
                Some(InputKind::Ready | InputKind::Resize | InputKind::ForceClose) => {}
                _ => panic!("{kind:?}, valid by the books, refused: {e:?}"),
            },
        }
    }

    /// Checks an action against the books, and books it.
    ///
    /// # Panics
    ///
    /// An action naming what the books do not hold.
    pub fn perform(&mut self, action: Action<u64>) {
        match action {
            Action::Establish { id } => {
                assert!(!self.pending.contains(&id), "{id} established twice");
                self.pending.push(id);
            }
            Action::AbortEstablish { id } => {
                let at = self.pending.iter().position(|p| *p == id);
                let at = at.unwrap_or_else(|| panic!("abort of {id}, which is not being established"));
                self.aborted.push(self.pending.swap_remove(at));
            }
            Action::Deliver { waiter, connection } => {
                self.served(waiter);
                self.in_use.push(connection);
            }
            Action::Fail { waiter, .. } => self.served(waiter),
            Action::Interrupt { id } => {
                assert!(
                    self.in_use.iter().any(|c| c.id() == id),
                    "interrupt of {id}, which is not in use"
                );
                self.interrupted.insert(id);
            }
            Action::Close { .. } => {}
        }
    }

    /// The core's invariants, and its counts against the books.
    ///
    /// # Panics
    ///
    /// On the first that does not hold.
    pub fn check(&self, pool: &Pool<u64>) {
        if let Err(broken) = pool.check_invariants() {
            panic!("invariant broken: {broken}");
        }
        let status = pool.status();
        assert_eq!(status.waiting, self.waiting.len(), "checkouts waiting");
        assert_eq!(
            status.pending,
            self.pending.len(),
            "connections being established"
        );
        let in_use = self
            .in_use
            .iter()
            .filter(|c| !self.interrupted.contains(&c.id()))
            .count();
        assert_eq!(status.in_use, in_use, "connections in use");
    }

    /// A connection in use, by `pick`, out of the books (and `errored`).
    fn take_in_use(&mut self, pick: u8, errored: bool) -> Option<Pooled<u64>> {
        let mut conn = take(&mut self.in_use, pick)?;
        self.interrupted.remove(&conn.id());
        if errored {
            conn.mark_errored();
        }
        Some(conn)
    }

    /// A connection being established, or one abandoned, by `pick`.
    fn take_establishing(&mut self, pick: u8) -> Option<ConnectionId> {
        let n = self.pending.len() + self.aborted.len();
        if n == 0 {
            return None;
        }
        let i = usize::from(pick) % n;
        Some(if i < self.pending.len() {
            self.pending.swap_remove(i)
        } else {
            self.aborted.swap_remove(i - self.pending.len())
        })
    }

    fn served(&mut self, waiter: WaiterId) {
        let at = self.waiting.iter().position(|w| *w == waiter);
        let at = at.unwrap_or_else(|| panic!("{waiter} served or failed, but it does not wait"));
        self.waiting.swap_remove(at);
    }
}

/// The driver [`transcript`] runs: the books, and what happened.
struct Harness {
    pool: Pool<u64>,
    now: Instant,
    books: Books,
    transcript: Vec<String>,
    /// Events kept apart, taken after every input.
    events: Vec<Event>,
}

/// A driver on virtual time that keeps [`Books`] beside its own state:
/// what [`step`] needs of it.
pub trait KeepsBooks: VirtualDriver<u64> {
    /// Its books.
    fn books(&mut self) -> &mut Books;
}

/// Applies one step to `driver`, as [`run`] does: time passes to the
/// driver's clock plus the step's milliseconds, the timer firing at every
/// deadline on the way ([`virtual_time::advance`]); or the input of the
/// step's kind, its arguments from the books ([`Books::input`]), applied
/// and drained, and nothing but a drain when the books hold nothing to
/// pick. A check-in through `handle_check_in_direct` (flag 4) books its
/// hand-over as the `Deliver` it stands for.
///
/// # Errors
///
/// The driver's error, from its [`VirtualDriver`] methods.
///
/// # Panics
///
/// A connection of this pool refused at check-in, a timeout that leaves
/// a deadline due, or what the books find wrong.
pub fn step<D: KeepsBooks + ?Sized>(driver: &mut D, step: Step) -> Result<(), D::Error> {
    let (kind, pick, value, flags) = match step {
        Step::Advance(ms) => {
            let until = *driver.clock() + Duration::from_millis(u64::from(ms));
            return virtual_time::advance(driver, until).map(drop);
        }
        Step::Input {
            kind,
            pick,
            value,
            flags,
        } => (kind, pick, value, flags),
    };
    let kind = InputKind::ALL[usize::from(kind) % InputKind::ALL.len()];
    let now = *driver.clock();
    if kind == InputKind::CheckIn && flags & 4 != 0 {
        // `Input::CheckIn` with its hand-over returned, which
        // `Pool::handle` does not give: see `Input::CheckIn`.
        if let Some(conn) = driver.books().take_for_direct_check_in(pick, flags & 1 != 0) {
            match driver.pool().handle_check_in_direct(now, conn) {
                Ok(Some(handed)) => driver.books().handed_over(handed),
                Ok(None) => {}
                Err(_) => panic!("a connection of this pool was refused at check-in"),
            }
        }
        return virtual_time::drain(driver);
    }
    let wait_queue_timeout = driver.pool().options().wait_queue_timeout();
    match driver
        .books()
        .input_after(wait_queue_timeout, now, kind, pick, value, flags)
    {
        Some(input) => virtual_time::apply(driver, input)?,
        None => virtual_time::drain(driver)?,
    }
    if kind == InputKind::Timeout {
        if let Some(next) = driver.pool().poll_timeout() {
            assert!(next > now, "handle_timeout({now:?}) left a deadline that is due");
        }
    }
    Ok(())
}

impl KeepsBooks for Harness {
    fn books(&mut self) -> &mut Books {
        &mut self.books
    }
}

/// The harness on cmap-core's virtual-time loop: every output checked
/// against the books as it comes, the books against the pool's counts
/// after every input.
impl VirtualDriver<u64> for Harness {
    type Error = Infallible;

    fn pool(&mut self) -> &mut Pool<u64> {
        &mut self.pool
    }

    fn clock(&mut self) -> &mut Instant {
        &mut self.now
    }

    fn answered(&mut self, answer: Result<Handled<u64>, HandleError<u64>>) -> Result<(), Infallible> {
        self.transcript.push(format!("{answer:?}"));
        self.books.answered(answer);
        Ok(())
    }

    fn perform(&mut self, output: Output<u64>) -> Result<(), Infallible> {
        self.transcript.push(format!("{output:?}"));
        if let Output::Action(action) = output {
            self.books.perform(action);
        }
        Ok(())
    }

    fn settled(&mut self) -> Result<(), Infallible> {
        self.pool.take_events(&mut self.events);
        for event in self.events.drain(..) {
            self.transcript.push(format!("apart: {event:?}"));
        }
        self.books.check(&self.pool);
        Ok(())
    }
}

/// The harness's loop never fails but by a panic.
fn settle(result: Result<(), Infallible>) {
    match result {
        Ok(()) => {}
        Err(never) => match never {},
    }
}

/// Takes one element of `v` by `pick`, if there is one.
fn take<T>(v: &mut Vec<T>, pick: u8) -> Option<T> {
    (!v.is_empty()).then(|| v.swap_remove(usize::from(pick) % v.len()))
}

/// proptest strategies for cases (feature `proptest`).
#[cfg(feature = "proptest")]
pub mod strategy {
    use proptest::prelude::*;

    use super::{Case, CaseOptions, Step};

    /// Pool options, small enough that limits are met.
    pub fn options() -> impl Strategy<Value = CaseOptions> {
        (
            (any::<u8>(), any::<u8>(), any::<u8>()),
            (
                proptest::option::of(any::<u16>()),
                proptest::option::of(any::<u16>()),
                proptest::option::of(any::<u16>()),
                proptest::option::of(any::<u16>()),
            ),
            (any::<bool>(), any::<bool>(), any::<bool>(), any::<u64>()),
        )
            .prop_map(
                |(
                    (max, min, connecting),
                    (wait, idle, lifetime, maintenance),
                    (ready, waiting, reconnect, seed),
                )| {
                    CaseOptions {
                        max_pool_size: max,
                        min_pool_size: min,
                        max_connecting: connecting,
                        wait_queue_timeout_ms: wait,
                        max_idle_ms: idle,
                        lifetime_ms: lifetime,
                        maintenance_ms: maintenance,
                        keep_ready: ready,
                        keep_waiting: waiting,
                        reconnect,
                        seed,
                    }
                },
            )
    }

    /// One step: time passing (a quarter of the draws, up to 2 s), or an
    /// input of any kind.
    pub fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            1 => (0u16..2000).prop_map(Step::Advance),
            3 => (any::<u8>(), any::<u8>(), any::<u16>(), any::<u8>()).prop_map(|(kind, pick, value, flags)| {
                Step::Input { kind, pick, value, flags }
            }),
        ]
    }

    /// A case of up to `max_steps` steps.
    pub fn case(max_steps: usize) -> impl Strategy<Value = Case> {
        (options(), proptest::collection::vec(step(), 0..=max_steps))
            .prop_map(|(options, steps)| Case { options, steps })
    }
}
