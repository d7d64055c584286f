//! cmap-local as a driver of the conformance kit (`--adapter local`).
//!
//! Its pool cannot leave the thread that built it, so each pool lives on
//! a thread of its own: a current-thread tokio runtime with a `LocalSet`,
//! the pool, and a loop that takes the engines' requests from a channel.
//! Each checkout of a spec thread becomes a local task there (the spec's
//! "threads" are local tasks, as a thread-per-core server's requests
//! are); the OS thread of the engine that asked blocks on its answers:
//! first "begun" (the task polled `get()` once: queued or served), then
//! the outcome. Checked-out guards stay on the pool's thread, keyed by a
//! number; the engine holds a [`LocalConn`] whose drop checks the guard in
//! and waits until it is done (its events delivered).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::poll_fn;
use std::future::Future;
use std::rc::Rc;
use std::sync::mpsc as std_mpsc;
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

use cmap_async::{ConnectionId, EstablishErrorKind, GetError, Status, UsageError};
use cmap_local::{PooledConnection, TokioLocal};
use tokio::sync::mpsc;

use crate::adapter::{SharedEndpoint, SimConnection};
use crate::driver::{Driver, DriverPool, PoolSpec};
use crate::endpoint::EndpointError;

/// cmap-local on tokio's current-thread runtime with a `LocalSet`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalDriver;

impl Driver for LocalDriver {
    type Pool<'a> = LocalPool;

    fn driver_name(&self) -> &'static str {
        "local"
    }

    fn build(&self, spec: PoolSpec) -> Result<LocalPool, String> {
        let (requests, inbox) = mpsc::unbounded_channel();
        let (built, answer) = std_mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("spec-runner-local".into())
            .spawn(move || pool_thread(spec, inbox, built))
            .map_err(|e| format!("cannot start the pool's thread: {e}"))?;
        match answer.recv() {
            Ok(Ok(())) => Ok(LocalPool {
                requests,
                thread: Mutex::new(Some(thread)),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("the pool's thread ended before building the pool".into()),
        }
    }
}

/// The simulated endpoint behind a cmap-local pool: `SimManager`'s rules
/// (the handshake decided when the attempt starts, its delay slept on the
/// pool's runtime, then its outcome).
struct LocalSimManager {
    endpoint: SharedEndpoint,
}

impl cmap_local::ManageConnection for LocalSimManager {
    type Connection = SimConnection;
    type Error = EndpointError;
    const CHECKS: bool = false;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<SimConnection, EndpointError>> {
        let handshake = self
            .endpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .handshake();
        async move {
            if !handshake.delay.is_zero() {
                tokio::time::sleep(handshake.delay).await;
            }
            handshake.outcome.map(|()| SimConnection)
        }
    }

    fn classify(&self, error: &EndpointError) -> EstablishErrorKind {
        error.kind()
    }
}

type Guard = PooledConnection<LocalSimManager, TokioLocal>;
type Reply<T> = std_mpsc::Sender<T>;

/// What the engines ask of the pool's thread.
enum Request {
    CheckOut {
        begun: Reply<()>,
        outcome: Reply<Result<(ConnectionId, u64), GetError>>,
    },
    CheckIn(u64, Reply<()>),
    Clear(bool, Reply<Result<(), UsageError>>),
    Ready(Reply<Result<(), UsageError>>),
    Close(Reply<()>),
    Status(Reply<Status>),
    /// The engine is done with the pool.
    Shutdown,
}

fn pool_thread(
    spec: PoolSpec,
    mut inbox: mpsc::UnboundedReceiver<Request>,
    built: Reply<Result<(), String>>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = built.send(Err(format!("cannot start a tokio runtime: {e}")));
            return;
        }
    };
    tokio::task::LocalSet::new().block_on(&rt, async move {
        let on_event = spec.on_event;
        let pool = cmap_local::Pool::<LocalSimManager, TokioLocal>::builder()
            .address(spec.address)
            .options(spec.options)
            .start_paused(true)
            .connect_timeout(spec.connect_timeout)
            .on_event(move |event| on_event(event))
            .build(LocalSimManager {
                endpoint: spec.endpoint,
            });
        let pool = match pool {
            Ok(pool) => pool,
            Err(e) => {
                let _ = built.send(Err(format!("cannot build the pool: {e}")));
                return;
            }
        };
        let _ = built.send(Ok(()));
        let guards: Rc<RefCell<BTreeMap<u64, Guard>>> = Rc::default();
        let next = Rc::new(Cell::new(0u64));
        // Ends when the engine drops its `LocalPool`.
        while let Some(request) = inbox.recv().await {
            match request {
                Request::CheckOut { begun, outcome } => {
                    let mut get = Box::pin(pool.get());
                    let guards = guards.clone();
                    let next = next.clone();
                    tokio::task::spawn_local(async move {
                        let mut begun = Some(begun);
                        let result = poll_fn(|cx| {
                            let poll = get.as_mut().poll(cx);
                            if let Some(begun) = begun.take() {
                                let _ = begun.send(());
                            }
                            poll
                        })
                        .await;
                        let answer = result.map(|guard| {
                            let key = next.get();
                            next.set(key + 1);
                            let id = guard.connection_id();
                            guards.borrow_mut().insert(key, guard);
                            (id, key)
                        });
                        let _ = outcome.send(answer);
                    });
                }
                Request::CheckIn(key, done) => {
                    let guard = guards.borrow_mut().remove(&key);
                    drop(guard);
                    let _ = done.send(());
                }
                Request::Clear(interrupt, done) => {
                    let _ = done.send(pool.clear(interrupt));
                }
                Request::Ready(done) => {
                    let _ = done.send(pool.ready());
                }
                Request::Close(done) => {
                    pool.close();
                    let _ = done.send(());
                }
                Request::Status(done) => {
                    let _ = done.send(pool.status());
                }
                Request::Shutdown => break,
            }
        }
        guards.borrow_mut().clear();
    });
}

/// A cmap-local pool on its own thread, driven from the engines' threads.
pub struct LocalPool {
    requests: mpsc::UnboundedSender<Request>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl LocalPool {
    /// Sends `request` made with a fresh reply channel, and waits for the
    /// answer (`None`: the pool's thread is gone).
    fn ask<T>(&self, request: impl FnOnce(Reply<T>) -> Request) -> Option<T> {
        let (reply, answer) = std_mpsc::channel();
        self.requests.send(request(reply)).ok()?;
        answer.recv().ok()
    }
}

/// A guard kept on the pool's thread; dropping this checks it in.
pub struct LocalConn {
    key: u64,
    requests: mpsc::UnboundedSender<Request>,
}

impl Drop for LocalConn {
    fn drop(&mut self) {
        let (done, wait) = std_mpsc::channel();
        if self.requests.send(Request::CheckIn(self.key, done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

impl DriverPool for LocalPool {
    type Conn = LocalConn;

    fn check_out(&self, begun: &dyn Fn()) -> Result<(ConnectionId, LocalConn), GetError> {
        let (begun_tx, begun_rx) = std_mpsc::channel();
        let (outcome_tx, outcome_rx) = std_mpsc::channel();
        let sent = self.requests.send(Request::CheckOut {
            begun: begun_tx,
            outcome: outcome_tx,
        });
        // A pool's thread that is gone fails the run through the engine's
        // own limits; here the checkout simply never begins.
        if sent.is_ok() && begun_rx.recv().is_ok() {
            begun();
        }
        match outcome_rx.recv() {
            Ok(outcome) => outcome.map(|(id, key)| {
                (
                    id,
                    LocalConn {
                        key,
                        requests: self.requests.clone(),
                    },
                )
            }),
            // The pool's thread is gone: as good as closed.
            Err(_) => Err(GetError::CheckOut(cmap_async::CheckOutError::PoolClosed {
                address: cmap_async::Address::new("localhost", 0),
            })),
        }
    }

    fn clear(&self, interrupt_in_use: bool) -> Result<(), UsageError> {
        self.ask(|r| Request::Clear(interrupt_in_use, r))
            .unwrap_or(Ok(()))
    }

    fn ready(&self) -> Result<(), UsageError> {
        self.ask(Request::Ready).unwrap_or(Ok(()))
    }

    fn close(&self) {
        let _ = self.ask(Request::Close);
    }

    fn status(&self) -> Status {
        self.ask(Request::Status)
            .expect("the pool's thread runs as long as its LocalPool")
    }
}

impl Drop for LocalPool {
    fn drop(&mut self) {
        // The thread drops the pool and the guards it still holds; a
        // `LocalConn` dropped later finds the channel closed.
        let _ = self.requests.send(Request::Shutdown);
        if let Some(thread) = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = thread.join();
        }
    }
}
