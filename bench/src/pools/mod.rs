//! The pools under test. Each one is a small module implementing
//! [`AsyncPool`] or [`BlockingPool`]; [`registry`] lists them all, and the
//! harness drives every one through the same loop.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::rt::AsyncRt;

pub mod bb8;
pub mod cmap_async;
pub mod cmap_async_std;
pub mod cmap_blocking;
pub mod cmap_local;
pub mod cmap_tokio;
pub mod deadpool;
pub mod floor_async;
pub mod floor_blocking;
pub mod mobc;
pub mod r2d2;

/// How long any pool may make a checkout wait: long, so that a figure is
/// never a timeout in disguise (a timeout is counted, not hidden).
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The pooled object: a trivial value, no I/O, nothing to drop. Only the
/// pool's own cost is measured.
#[derive(Debug)]
pub struct Conn(#[allow(dead_code)] pub u64);

/// The error every manager reports (none of them ever fails).
#[derive(Debug)]
pub struct Never;

impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}

impl std::error::Error for Never {}

/// Makes connections for every pool's manager: counts the connects
/// started and finished, and takes `delay` to connect (zero in the sweep;
/// 150 ms in the spike scenario).
#[derive(Clone, Debug, Default)]
pub struct Connector {
    started: Arc<AtomicU64>,
    finished: Arc<AtomicU64>,
    pub delay: Duration,
}

impl Connector {
    pub fn new(delay: Duration) -> Connector {
        Connector {
            started: Arc::default(),
            finished: Arc::default(),
            delay,
        }
    }

    /// Connects started so far.
    pub fn created(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// Connects finished so far.
    pub fn established(&self) -> u64 {
        self.finished.load(Ordering::Relaxed)
    }

    fn start(&self) -> Conn {
        Conn(self.started.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// An async connect (on any runtime: the delay is async-io's timer).
    pub fn connect(&self) -> impl Future<Output = Conn> + Send + 'static {
        let conn = self.start();
        let delay = self.delay;
        let finished = self.finished.clone();
        async move {
            if !delay.is_zero() {
                crate::rt::precise_sleep(delay).await;
            }
            finished.fetch_add(1, Ordering::Relaxed);
            conn
        }
    }

    /// A blocking connect.
    pub fn connect_blocking(&self) -> Conn {
        let conn = self.start();
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        self.finished.fetch_add(1, Ordering::Relaxed);
        conn
    }
}

/// What a pool is built with.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// The most connections (`maxPoolSize`, deadpool's `max_size`, ...).
    pub max: u32,
    /// Connections kept open, for the pools that can (spike scenario).
    pub min: u32,
    pub connector: Connector,
    /// Counts the events of a pool built with a subscriber.
    pub events: Arc<AtomicU64>,
}

/// An async pool on the runtime `Rt`.
pub trait AsyncPool: Send + Sync + Sized + 'static {
    /// Its name in tables and plots.
    const NAME: &'static str;
    /// Whether it keeps `Setup::min` connections open by itself.
    const NATIVE_MIN: bool;
    type Rt: AsyncRt;
    /// The checked-out connection; dropping it checks it in.
    type Guard<'a>: Send
    where
        Self: 'a;

    /// Builds the pool, inside its runtime.
    fn build(setup: &Setup) -> impl Future<Output = Self> + Send;

    /// Checks out a connection (`Err`: a timeout or another failure).
    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send;
}

/// A blocking pool, used from OS threads.
pub trait BlockingPool: Send + Sync + Sized + 'static {
    const NAME: &'static str;
    const NATIVE_MIN: bool;
    type Guard<'a>
    where
        Self: 'a;

    fn build(setup: &Setup) -> Self;

    fn get(&self) -> Result<Self::Guard<'_>, String>;
}

/// Which loop drives a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Async,
    Blocking,
}

/// One pool, with its entry points monomorphized.
pub struct Entry {
    pub name: &'static str,
    pub family: Family,
    pub sweep: fn(&crate::harness::Params) -> crate::harness::Sample,
    pub spike: fn(&crate::spike::SpikeParams) -> crate::spike::SpikeRound,
    /// Nanoseconds per uncontended cycle (see `cycle.rs`).
    pub cycle: fn(u64) -> f64,
    /// Nanoseconds per cycle, two pinned threads at once (see `cycle.rs`).
    pub pair: fn(u64) -> f64,
}

fn async_entry<P: AsyncPool>() -> Entry {
    Entry {
        name: P::NAME,
        family: Family::Async,
        sweep: crate::harness::sweep_async::<P>,
        spike: crate::spike::spike_async::<P>,
        cycle: crate::cycle::cycle_async::<P>,
        pair: crate::cycle::pair_async::<P>,
    }
}

fn blocking_entry<P: BlockingPool>() -> Entry {
    Entry {
        name: P::NAME,
        family: Family::Blocking,
        sweep: crate::harness::sweep_blocking::<P>,
        spike: crate::spike::spike_blocking::<P>,
        cycle: crate::cycle::cycle_blocking::<P>,
        pair: crate::cycle::pair_blocking::<P>,
    }
}

/// The name of cmap-tokio with an event subscriber (event-path cost).
pub const CMAP_TOKIO_EVENTS: &str = cmap_tokio::CmapTokioEvents::NAME;

/// Every pool, in the order of the tables.
pub fn registry() -> Vec<Entry> {
    vec![
        async_entry::<cmap_tokio::CmapTokio>(),
        async_entry::<cmap_tokio::CmapTokioEvents>(),
        async_entry::<cmap_async_std::CmapSmol>(),
        async_entry::<cmap_async_std::CmapAsyncStd>(),
        async_entry::<deadpool::Deadpool>(),
        async_entry::<bb8::Bb8>(),
        async_entry::<mobc::Mobc>(),
        async_entry::<floor_async::AsyncFloor>(),
        blocking_entry::<cmap_blocking::CmapBlocking>(),
        blocking_entry::<r2d2::R2d2>(),
        blocking_entry::<floor_blocking::BlockingFloor>(),
    ]
}
