//! cmap-async on a manual clock: every deadline the driver arms (the wait
//! queue's, the connect timeout, the timer task's) is met at the exact
//! instant it names, and the order of waiters and events is the same on
//! every run. The real-time scenarios (cmap-testkit's, on every runtime)
//! prove the same behaviour within tolerances; these prove it exactly.

// The testkit is not built under `--cfg loom` (see Cargo.toml).
#![cfg(not(loom))]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cmap_async::{Pool, PoolBuilder, Runtime};
use cmap_testkit::manual_clock::ManualRuntime;
use cmap_testkit::{Fake, Names};

type TestPool = Pool<Fake<ManualRuntime>, ManualRuntime>;

fn builder() -> PoolBuilder<Fake<ManualRuntime>, ManualRuntime> {
    Pool::builder().address("fake:27017")
}

fn build(
    rt: &ManualRuntime,
    b: PoolBuilder<Fake<ManualRuntime>, ManualRuntime>,
) -> (TestPool, Fake<ManualRuntime>) {
    let fake = Fake::on(rt.clone());
    let pool = b.build_on(fake.clone(), rt.clone()).expect("a pool");
    (pool, fake)
}

#[test]
fn a_checkout_times_out_exactly_at_wait_queue_timeout() {
    let rt = ManualRuntime::new();
    let (pool, _) = build(
        &rt,
        builder()
            .max_pool_size(1)
            .wait_queue_timeout(Duration::from_millis(100)),
    );
    let held = rt.block_on(pool.get()).expect("the one connection");
    let start = rt.elapsed();
    let err = rt.block_on(pool.get()).expect_err("nothing to spare");
    assert!(err.is_timeout(), "{err}");
    assert_eq!(rt.elapsed() - start, Duration::from_millis(100));
    drop(held);
}

#[test]
fn a_slow_connect_is_given_up_exactly_at_the_connect_timeout_and_the_checkout_waits_on() {
    let rt = ManualRuntime::new();
    let (pool, fake) = build(
        &rt,
        builder()
            .connect_timeout(Duration::from_millis(250))
            .wait_queue_timeout(Duration::from_secs(1)),
    );
    fake.connect_us.store(2_000_000, Ordering::SeqCst);
    let outcome = Arc::new(Mutex::new(None));
    let (p, out) = (pool.clone(), outcome.clone());
    rt.spawn(async move {
        *out.lock().unwrap() = Some(p.get().await.map(drop));
    });
    // The checkout starts, and its connect with it, at 0.
    rt.run_until_stalled();
    assert_eq!(pool.status().pending, 1);
    rt.advance(Duration::from_millis(249));
    assert_eq!(pool.stats().connections_failed, 0);
    rt.advance(Duration::from_millis(1));
    assert_eq!(pool.stats().connections_failed, 1, "given up at 250 ms");
    // A connect timeout is a network timeout, labelled
    // SystemOverloadedError: the checkout keeps waiting while the pool
    // tries again, until its own deadline.
    assert!(outcome.lock().unwrap().is_none());
    rt.advance(Duration::from_millis(749));
    assert!(outcome.lock().unwrap().is_none(), "still waiting at 999 ms");
    rt.advance(Duration::from_millis(1));
    let err = outcome
        .lock()
        .unwrap()
        .take()
        .expect("done at 1 s")
        .expect_err("no connection");
    assert!(err.is_timeout(), "{err}");
}

#[test]
fn a_connect_that_takes_its_time_serves_the_checkout_when_it_is_done() {
    let rt = ManualRuntime::new();
    let (pool, fake) = build(&rt, builder());
    fake.connect_us.store(40_000, Ordering::SeqCst);
    let conn = rt.block_on(pool.get()).expect("a connection");
    assert_eq!(conn.n, 1);
    assert_eq!(rt.elapsed(), Duration::from_millis(40));
}

#[test]
fn waiters_are_served_in_the_order_they_came_whatever_the_run() {
    let rt = ManualRuntime::new();
    let (pool, _) = build(&rt, builder().max_pool_size(1));
    let held = rt.block_on(pool.get()).expect("the one connection");
    let served = Arc::new(Mutex::new(Vec::new()));
    for i in 0..5 {
        let (pool, served) = (pool.clone(), served.clone());
        rt.spawn(async move {
            let conn = pool.get().await.expect("served in turn");
            served.lock().unwrap().push(i);
            drop(conn);
        });
    }
    rt.run_until_stalled();
    assert_eq!(pool.status().waiting, 5);
    drop(held);
    rt.run_until_stalled();
    assert_eq!(*served.lock().unwrap(), [0, 1, 2, 3, 4]);
    assert_eq!(pool.status().waiting, 0);
}

#[test]
fn an_idle_connection_is_closed_once_max_idle_time_has_passed_and_not_before() {
    let rt = ManualRuntime::new();
    let names = Names::default();
    let (pool, fake) = build(
        &rt,
        builder()
            .max_idle_time(Duration::from_secs(1))
            .on_event(names.callback()),
    );
    drop(rt.block_on(pool.get()).expect("a connection"));
    names.take();
    rt.advance(Duration::from_millis(999));
    assert_eq!(pool.status().available, 1, "not idle long enough yet");
    assert_eq!(fake.alive(), 1);
    // The timer task closes it at its own deadline, with nobody asking.
    rt.advance(Duration::from_secs(1));
    assert_eq!(pool.status().total, 0);
    assert_eq!(names.take(), ["ConnectionClosed"]);
    rt.run_until_stalled();
    assert_eq!(fake.alive(), 0, "closed, and dropped");
}

/// Records the deadline each establishment is given.
#[derive(Clone, Default)]
struct Deadlines(Arc<Mutex<Vec<Option<std::time::Instant>>>>);

impl cmap_async::ManageConnection for Deadlines {
    type Connection = ();
    type Error = std::io::Error;

    fn connect(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        std::future::ready(Err(std::io::Error::other("the pool calls connect_until")))
    }

    fn connect_until(
        &self,
        deadline: Option<std::time::Instant>,
    ) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        self.0.lock().unwrap().push(deadline);
        std::future::ready(Ok(()))
    }

    fn classify(&self, _: &std::io::Error) -> cmap_async::EstablishErrorKind {
        cmap_async::EstablishErrorKind::Other
    }
}

/// CSOT: a connect a checkout started is told that checkout's deadline
/// (the manager bounds it by `min(connectTimeoutMS, what is left)`); one
/// for minPoolSize, or for a checkout without one, is told none.
#[test]
fn a_connect_is_told_the_deadline_of_the_checkout_that_started_it() {
    let rt = ManualRuntime::new();
    let deadlines = Deadlines::default();
    let pool = Pool::builder()
        .address("fake:27017")
        .wait_queue_timeout(None)
        .build_on(deadlines.clone(), rt.clone())
        .expect("a pool");
    let due = rt.now() + Duration::from_millis(100);
    let first = rt
        .block_on(pool.get_timeout(Duration::from_millis(100)))
        .expect("made for it");
    let second = rt.block_on(pool.get()).expect("made for it");
    assert_eq!(*deadlines.0.lock().unwrap(), [Some(due), None]);
    drop((first, second));

    let deadlines = Deadlines::default();
    let populated = Pool::builder()
        .address("fake:27017")
        .min_pool_size(1)
        .build_on(deadlines.clone(), rt.clone())
        .expect("a pool");
    rt.advance(Duration::from_secs(1));
    assert_eq!(populated.status().available, 1, "made for minPoolSize");
    assert_eq!(*deadlines.0.lock().unwrap(), [None]);
}
