//! `tokio-postgres` off tokio: its sockets and timers need a tokio reactor,
//! which async-std and smol do not run. The testkit keeps a small tokio
//! runtime of its own for them, as the synchronous `postgres` crate keeps
//! one for each of its clients: connecting (and so spawning the session's
//! connection task) happens inside that runtime's context, and the
//! connection task runs on its threads. The client's queries need no
//! reactor (they talk to the connection task through channels), so they
//! are awaited on whatever runtime the test runs.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Instant;

use cmap_async::{Address, EstablishErrorKind, ManageConnection, ServiceId};
use tokio::runtime::{Builder, Handle, Runtime};

/// The testkit's tokio runtime: two worker threads, which drive the
/// reactor and the timers of the `tokio-postgres` sessions opened in its
/// context and run their connection tasks. Made on first use, it lives as
/// long as the test process.
pub fn handle() -> &'static Handle {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("cmap-testkit-tokio")
                .enable_all()
                .build()
                .expect("the testkit's tokio runtime")
        })
        .handle()
}

/// `future`, each poll of it inside the context of the testkit's tokio
/// runtime ([`handle`]), on any runtime: what it creates of tokio's (a
/// socket, a timer, a spawned task) belongs to that runtime.
pub fn in_tokio<F: Future>(future: F) -> impl Future<Output = F::Output> {
    let mut future = Box::pin(future);
    std::future::poll_fn(move |cx| {
        let _inside = handle().enter();
        future.as_mut().poll(cx)
    })
}

/// A manager written for tokio (such as `cmap_postgres::PgManager`, which
/// spawns each session's connection task with `tokio::spawn`) made usable
/// by a pool on another runtime: its `connect`, `check` and `reset` run
/// [`in_tokio`]; the rest is the manager's own.
#[derive(Debug)]
pub struct OnTokio<M>(pub M);

impl<M: ManageConnection> ManageConnection for OnTokio<M> {
    type Connection = M::Connection;
    type Error = M::Error;
    const RESETS: bool = M::RESETS;

    fn connect(&self) -> impl Future<Output = Result<M::Connection, M::Error>> + Send {
        in_tokio(self.0.connect())
    }

    fn classify(&self, error: &M::Error) -> EstablishErrorKind {
        self.0.classify(error)
    }

    fn check(&self, conn: &mut M::Connection) -> impl Future<Output = Result<(), M::Error>> + Send {
        in_tokio(self.0.check(conn))
    }

    fn check_until(
        &self,
        conn: &mut M::Connection,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<(), M::Error>> + Send {
        in_tokio(self.0.check_until(conn, deadline))
    }

    fn reset(&self, conn: &mut M::Connection) -> impl Future<Output = Result<(), M::Error>> + Send {
        in_tokio(self.0.reset(conn))
    }

    fn is_broken(&self, conn: &mut M::Connection) -> bool {
        self.0.is_broken(conn)
    }

    fn address(&self) -> Option<Address> {
        self.0.address()
    }

    fn service_id(&self, conn: &M::Connection) -> Option<ServiceId> {
        self.0.service_id(conn)
    }
}
