//! What the real-time engine needs of a runtime adapter, the adapters
//! themselves, and the connection manager that stands the simulated
//! endpoint in front of the async pool.
//!
//! An adapter is a [`cmap_async::Runtime`] plus a way to run a future to
//! completion on a plain OS thread ([`Adapter::block_on`]). The real-time
//! engine (`realtime.rs`) and the logging tests (`logging_suite/`) are
//! generic over it, so another runtime plugs in with a dependency and a
//! dozen lines here, and two lines in [`AdapterKind`].

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cmap_async::{EstablishErrorKind, ManageConnection, Runtime};

use crate::endpoint::{Endpoint, EndpointError};

/// A runtime adapter, as the real-time engine drives it.
pub trait Adapter: Send + Sync + 'static {
    /// The runtime the pools of a test are built on.
    type Runtime: Runtime;

    /// The name `--adapter` takes.
    fn name(&self) -> &'static str;

    /// The runtime for one pool.
    fn runtime(&self) -> Self::Runtime;

    /// Runs `future` to completion on the calling thread, a plain OS thread
    /// (the main thread or a simulated thread of a test). Several threads
    /// call it at once.
    fn block_on<F: Future>(&self, future: F) -> F::Output;
}

/// The adapters `--adapter` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdapterKind {
    /// `cmap-tokio` on a multi-threaded tokio runtime.
    Tokio,
    /// `cmap-async-std` under `async_std::task::block_on`.
    AsyncStd,
    /// `cmap-async-std` under `smol::block_on`.
    Smol,
    /// `cmap-blocking`'s synchronous pool on OS threads (not a cmap-async
    /// adapter: a [`Driver`](crate::Driver) of its own).
    Blocking,
    /// `cmap-local` on tokio's current-thread runtime with a `LocalSet`
    /// (not a cmap-async adapter: a [`Driver`](crate::Driver) of its own).
    Local,
}

impl AdapterKind {
    /// Every adapter, by name.
    pub const ALL: &'static [(&'static str, AdapterKind)] = &[
        ("tokio", AdapterKind::Tokio),
        ("async-std", AdapterKind::AsyncStd),
        ("smol", AdapterKind::Smol),
        ("blocking", AdapterKind::Blocking),
        ("local", AdapterKind::Local),
    ];

    /// The adapter called `name`.
    pub fn from_name(name: &str) -> Option<AdapterKind> {
        AdapterKind::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, kind)| *kind)
    }

    /// The names, for usage messages.
    pub fn names() -> String {
        let names: Vec<&str> = AdapterKind::ALL.iter().map(|(n, _)| *n).collect();
        names.join(", ")
    }

    /// Runs `f` with a fresh adapter of this kind.
    pub fn with<T>(self, f: impl WithAdapter<T>) -> Result<T, String> {
        match self {
            AdapterKind::Tokio => Ok(f.call(&TokioAdapter::new()?)),
            AdapterKind::AsyncStd => Ok(f.call(&AsyncStdAdapter)),
            AdapterKind::Smol => Ok(f.call(&SmolAdapter)),
            AdapterKind::Blocking => Ok(f.call(&crate::blocking_driver::BlockingDriver)),
            AdapterKind::Local => Ok(f.call(&crate::local_driver::LocalDriver)),
        }
    }
}

/// A function generic over the driver (closures cannot be).
pub trait WithAdapter<T> {
    /// Calls it.
    fn call<D: crate::Driver>(self, driver: &D) -> T;
}

/// `cmap-tokio`: a multi-threaded tokio runtime; tests' threads block on
/// its handle.
#[derive(Debug)]
pub struct TokioAdapter {
    runtime: tokio::runtime::Runtime,
}

impl TokioAdapter {
    /// A runtime with four workers and the timer.
    pub fn new() -> Result<TokioAdapter, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .thread_name("spec-runner-tokio")
            .enable_time()
            .build()
            .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
        Ok(TokioAdapter { runtime })
    }
}

impl Adapter for TokioAdapter {
    type Runtime = cmap_tokio::TokioRuntime;

    fn name(&self) -> &'static str {
        "tokio"
    }

    fn runtime(&self) -> cmap_tokio::TokioRuntime {
        cmap_tokio::TokioRuntime::new(self.runtime.handle().clone())
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.handle().block_on(future)
    }
}

/// `cmap-async-std` on async-std: its runtime (async-global-executor and
/// async-io's timer), each thread of a test in `async_std::task::block_on`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AsyncStdAdapter;

impl Adapter for AsyncStdAdapter {
    type Runtime = cmap_async_std::AsyncStdRuntime;

    fn name(&self) -> &'static str {
        "async-std"
    }

    fn runtime(&self) -> cmap_async_std::AsyncStdRuntime {
        cmap_async_std::AsyncStdRuntime
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        async_std::task::block_on(future)
    }
}

/// `cmap-async-std` on smol: the same runtime, each thread of a test in
/// `smol::block_on`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SmolAdapter;

impl Adapter for SmolAdapter {
    type Runtime = cmap_async_std::AsyncStdRuntime;

    fn name(&self) -> &'static str {
        "smol"
    }

    fn runtime(&self) -> cmap_async_std::AsyncStdRuntime {
        cmap_async_std::AsyncStdRuntime
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        smol::block_on(future)
    }
}

/// A connection of the simulated endpoint: a handshake that succeeded.
#[derive(Debug)]
pub struct SimConnection;

/// The endpoint of one test, shared by its pools (a unified test's
/// `failPoint` operation changes it while pools use it).
pub type SharedEndpoint = Arc<Mutex<Endpoint>>;

/// The connection manager of the real-time runs: `connect()` runs one
/// handshake against the test's failPoint (`endpoint.rs` decides), sleeps
/// for its `blockTimeMS` on the pool's runtime, then succeeds or fails with
/// the endpoint's error (`Network`, `CommandError`, `AuthenticationError`,
/// the type names of the virtual engine). When the pool aborts the
/// establishment (a clear that interrupts, a close), it drops this future:
/// the sleep ends with it.
pub struct SimManager<R> {
    endpoint: SharedEndpoint,
    rt: R,
}

impl<R: Runtime> SimManager<R> {
    /// A manager for `endpoint`, sleeping on `rt`.
    pub fn new(endpoint: SharedEndpoint, rt: R) -> SimManager<R> {
        SimManager { endpoint, rt }
    }
}

impl<R: Runtime> ManageConnection for SimManager<R> {
    type Connection = SimConnection;
    type Error = EndpointError;

    fn connect(&self) -> impl Future<Output = Result<SimConnection, EndpointError>> + Send {
        // Decided when the pool starts the attempt, in the order attempts
        // start, as the virtual engine does at `Action::Establish`.
        let handshake = self
            .endpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .handshake();
        let rt = self.rt.clone();
        async move {
            if handshake.delay > Duration::ZERO {
                if let Some(deadline) = rt.now().checked_add(handshake.delay) {
                    rt.sleep_until(deadline).await;
                }
            }
            handshake.outcome.map(|()| SimConnection)
        }
    }

    fn classify(&self, error: &EndpointError) -> EstablishErrorKind {
        error.kind()
    }
}
