//! A fake connection manager: connections are numbers, connecting takes a
//! configurable time and can be made to fail, and every connection alive
//! is counted so a leak shows.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cmap_async::{EstablishErrorKind, Event, ManageConnection, Runtime, ServiceId};

/// A fake connection; counted alive until dropped.
#[derive(Debug)]
pub struct Conn {
    /// Its number: 1 for the first one connected, and so on.
    pub n: u64,
    /// What [`ManageConnection::is_broken`] says about it.
    pub broken: bool,
    alive: Arc<AtomicI64>,
    /// The gate its drop waits at, if one was set when it was made.
    close_gate: Option<Arc<CloseGate>>,
    /// Its drop panics (once it has counted itself dropped) while set.
    drop_panics: Arc<AtomicBool>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(gate) = &self.close_gate {
            gate.pass();
        }
        self.alive.fetch_sub(1, Ordering::SeqCst);
        if self.drop_panics.load(Ordering::SeqCst) && !std::thread::panicking() {
            panic!("drop panicked on purpose");
        }
    }
}

/// Holds the connections' drops (their close, which may be I/O) until it
/// opens: a close made on the thread that checks a connection in, or
/// under the pool's lock, would block there. The waiting is bounded (5 s),
/// and a close that waited that long is counted in `blocked`.
#[derive(Debug, Default)]
pub struct CloseGate {
    open: Mutex<bool>,
    opened: Condvar,
    /// Closes that waited the whole bound: none unless a close ran where
    /// it must not.
    pub blocked: AtomicU64,
}

impl CloseGate {
    /// Lets every close waiting, and every close to come, through.
    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    fn pass(&self) {
        let open = self.open.lock().unwrap();
        let (_open, waited) = self
            .opened
            .wait_timeout_while(open, Duration::from_secs(5), |open| !*open)
            .unwrap();
        if waited.timed_out() {
            self.blocked.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The knobs and counters of a fake manager, shared by its clones. A
/// synchronous manager (`cmap-blocking`'s tests) uses them too, through
/// [`connect_delay`](State::connect_delay) and [`open`](State::open).
#[derive(Default)]
pub struct State {
    /// Connections made.
    pub connects: AtomicU64,
    /// Connections alive (made and not dropped).
    pub alive: Arc<AtomicI64>,
    /// How long connecting takes, in microseconds.
    pub connect_us: AtomicU64,
    /// Connecting fails (connection refused: a network error, labelled
    /// `SystemOverloadedError`) while set.
    pub refuse: AtomicBool,
    /// Connecting fails (authentication failed: no labels, the pool is
    /// cleared) while set.
    pub deny: AtomicBool,
    /// Connecting never finishes while set.
    pub hang: AtomicBool,
    /// Random connect time up to `connect_us` instead of exactly it.
    pub jitter: AtomicBool,
    /// How long `reset` takes, in microseconds (0: done at once).
    pub reset_us: AtomicU64,
    /// Resets done.
    pub resets: AtomicU64,
    /// `check` fails while set.
    pub check_fails: AtomicBool,
    /// How long `check` takes, in microseconds (0: done at once).
    pub check_us: AtomicU64,
    /// `connect` panics (after its delay) while set.
    pub connect_panics: AtomicBool,
    /// `check` panics while set.
    pub check_panics: AtomicBool,
    /// `reset` panics (after its delay) while set.
    pub reset_panics: AtomicBool,
    /// `is_broken` panics while set.
    pub is_broken_panics: AtomicBool,
    /// A connection's drop panics while set.
    pub drop_panics: Arc<AtomicBool>,
    /// In load-balanced mode, how many services connections reach:
    /// connection `n` reaches service `n % services` (see
    /// [`service_of`](State::service_of)); 0: no service id.
    pub services: AtomicU64,
    /// Connects dropped before they finished (given up by the pool).
    pub connects_dropped: Arc<AtomicU64>,
    /// Connections made while set wait at this gate when dropped.
    pub close_gate: Mutex<Option<Arc<CloseGate>>>,
}

impl State {
    /// Connections alive.
    pub fn alive(&self) -> i64 {
        self.alive.load(Ordering::SeqCst)
    }

    /// How long the next connect takes.
    pub fn connect_delay(&self) -> Duration {
        let mut us = self.connect_us.load(Ordering::SeqCst);
        if self.jitter.load(Ordering::SeqCst) && us > 0 {
            us = fastrand::u64(0..=us);
        }
        Duration::from_micros(us)
    }

    /// Ends a connect: refused while [`refuse`](State::refuse) is set,
    /// otherwise the next connection.
    pub fn open(&self) -> Result<Conn, FakeError> {
        if self.connect_panics.load(Ordering::SeqCst) {
            panic!("connect panicked on purpose");
        }
        if self.refuse.load(Ordering::SeqCst) {
            return Err(FakeError(REFUSED));
        }
        if self.deny.load(Ordering::SeqCst) {
            return Err(FakeError(DENIED));
        }
        let n = self.connects.fetch_add(1, Ordering::SeqCst) + 1;
        self.alive.fetch_add(1, Ordering::SeqCst);
        Ok(Conn {
            n,
            broken: false,
            alive: self.alive.clone(),
            close_gate: self.close_gate.lock().unwrap().clone(),
            drop_panics: self.drop_panics.clone(),
        })
    }

    /// What `check` answers now.
    pub fn check(&self) -> Result<(), FakeError> {
        if self.check_panics.load(Ordering::SeqCst) {
            panic!("check panicked on purpose");
        }
        if self.check_fails.load(Ordering::SeqCst) {
            Err(FakeError("check failed"))
        } else {
            Ok(())
        }
    }
}

impl State {
    /// The service connection `n` reached, as
    /// [`ManageConnection::service_id`] reports it.
    pub fn service_of(&self, n: u64) -> Option<ServiceId> {
        let services = self.services.load(Ordering::SeqCst);
        (services > 0).then(|| {
            let mut id = [0; 12];
            id[11] = (n % services) as u8;
            ServiceId(id)
        })
    }

    /// Ends a reset: counted, or a panic while
    /// [`reset_panics`](State::reset_panics) is set.
    pub fn reset_done(&self) {
        if self.reset_panics.load(Ordering::SeqCst) {
            panic!("reset panicked on purpose");
        }
        self.resets.fetch_add(1, Ordering::SeqCst);
    }

    /// What `is_broken` says of `conn`: its `broken` flag, or a panic
    /// while [`is_broken_panics`](State::is_broken_panics) is set.
    pub fn is_broken(&self, conn: &Conn) -> bool {
        if self.is_broken_panics.load(Ordering::SeqCst) {
            panic!("is_broken panicked on purpose");
        }
        conn.broken
    }
}

/// The fake's error.
#[derive(Debug)]
pub struct FakeError(pub &'static str);

const REFUSED: &str = "connection refused";
const DENIED: &str = "authentication failed";

impl FakeError {
    /// A refused connection is a network error; denied credentials are an
    /// authentication error; anything else (a failed check) is other.
    pub fn kind(&self) -> EstablishErrorKind {
        match self.0 {
            REFUSED => EstablishErrorKind::Network,
            DENIED => EstablishErrorKind::Authentication,
            _ => EstablishErrorKind::Other,
        }
    }
}

impl std::fmt::Display for FakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for FakeError {}

/// The fake manager on runtime `R` (it sleeps with `R`'s timer); clones
/// share their [`State`], which it derefs to.
pub struct Fake<R> {
    state: Arc<State>,
    rt: R,
}

impl<R: Clone> Clone for Fake<R> {
    fn clone(&self) -> Self {
        Fake {
            state: self.state.clone(),
            rt: self.rt.clone(),
        }
    }
}

impl<R: Default> Default for Fake<R> {
    fn default() -> Self {
        Fake {
            state: Arc::default(),
            rt: R::default(),
        }
    }
}

impl<R> std::ops::Deref for Fake<R> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl<R> Fake<R> {
    /// A fake whose delays sleep on `rt` (a runtime whose clock the test
    /// moves, as [`ManualRuntime`](crate::manual_clock::ManualRuntime)).
    pub fn on(rt: R) -> Fake<R> {
        Fake {
            state: Arc::default(),
            rt,
        }
    }

    /// The shared state, for a manager of another kind to use.
    pub fn state(&self) -> Arc<State> {
        self.state.clone()
    }
}

impl<R: Runtime> ManageConnection for Fake<R> {
    type Connection = Conn;
    type Error = FakeError;

    fn connect(&self) -> impl Future<Output = Result<Conn, FakeError>> + Send {
        let (state, rt) = (self.state.clone(), self.rt.clone());
        async move {
            let unfinished = CountOnDrop(Some(state.connects_dropped.clone()));
            let delay = state.connect_delay();
            if !delay.is_zero() {
                rt.sleep_until(rt.now() + delay).await;
            }
            if state.hang.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            unfinished.finished();
            state.open()
        }
    }

    fn classify(&self, error: &FakeError) -> EstablishErrorKind {
        error.kind()
    }

    fn check(&self, _conn: &mut Conn) -> impl Future<Output = Result<(), FakeError>> + Send {
        let us = self.check_us.load(Ordering::SeqCst);
        let (state, rt) = (self.state.clone(), self.rt.clone());
        async move {
            if us > 0 {
                rt.sleep_until(rt.now() + Duration::from_micros(us)).await;
            }
            state.check()
        }
    }

    fn reset(&self, _conn: &mut Conn) -> impl Future<Output = Result<(), FakeError>> + Send {
        let us = self.reset_us.load(Ordering::SeqCst);
        let (state, rt) = (self.state.clone(), self.rt.clone());
        async move {
            if us > 0 {
                rt.sleep_until(rt.now() + Duration::from_micros(us)).await;
            }
            state.reset_done();
            Ok(())
        }
    }

    fn is_broken(&self, conn: &mut Conn) -> bool {
        self.state.is_broken(conn)
    }

    fn service_id(&self, conn: &Conn) -> Option<ServiceId> {
        self.state.service_of(conn.n)
    }
}

/// Counts one in its counter when dropped, unless `finished` first.
struct CountOnDrop(Option<Arc<AtomicU64>>);

impl CountOnDrop {
    fn finished(mut self) {
        self.0 = None;
    }
}

impl Drop for CountOnDrop {
    fn drop(&mut self) {
        if let Some(count) = &self.0 {
            count.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// [`Fake`], saying it does not check (`CHECKS = false`) while its
/// `check` still follows the fake's knobs: a checkout that called it
/// anyway would see a failing check.
pub struct Unchecked<R>(pub Fake<R>);

impl<R: Runtime> ManageConnection for Unchecked<R> {
    type Connection = Conn;
    type Error = FakeError;
    const CHECKS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Conn, FakeError>> + Send {
        self.0.connect()
    }

    fn classify(&self, error: &FakeError) -> EstablishErrorKind {
        self.0.classify(error)
    }

    fn check(&self, conn: &mut Conn) -> impl Future<Output = Result<(), FakeError>> + Send {
        self.0.check(conn)
    }
}

/// Collects event names, in delivery order.
#[derive(Clone, Default)]
pub struct Names(pub Arc<Mutex<Vec<&'static str>>>);

impl Names {
    /// A callback that records the names.
    pub fn callback(&self) -> impl Fn(&Event) + Send + Sync + 'static {
        let names = self.0.clone();
        move |e: &Event| names.lock().unwrap().push(e.name())
    }

    /// The names recorded since the last call.
    pub fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}
