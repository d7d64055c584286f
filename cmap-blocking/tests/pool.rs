//! The synchronous pool: `get()` blocks the calling thread, connects run
//! on threads of their own.

mod common;

use std::error::Error as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cmap_blocking::{CheckOutError, GetError, Hook, PoolState};
use cmap_testkit::scenarios::TWO_CHECKOUTS_THEN_CLOSE;
use cmap_testkit::{FakeError, Names};
use common::{builder, eventually, SyncFake};

#[test]
fn check_out_check_in_and_reuse() {
    let m = SyncFake::default();
    let pool = builder().max_pool_size(2).build(m.clone()).unwrap();
    let c = pool.get().unwrap();
    assert_eq!(c.n, 1);
    let s = pool.status();
    assert_eq!((s.state, s.total, s.in_use), (PoolState::Ready, 1, 1));
    drop(c);
    assert_eq!(pool.status().available, 1, "checked in before drop returns");
    assert_eq!(pool.get().unwrap().n, 1, "reused");
    assert_eq!(pool.stats().connections_opened, 1);
}

#[test]
fn connects_run_on_threads_of_their_own_never_the_callers() {
    let m = SyncFake::default();
    let pool = builder().max_pool_size(3).build(m.clone()).unwrap();
    let held: Vec<_> = (0..3).map(|_| pool.get().unwrap()).collect();
    let threads = m.connect_threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 3);
    assert!(!threads.contains(&thread::current().id()));
    drop(held);
}

#[test]
fn get_blocks_at_most_the_wait_queue_timeout() {
    let pool = builder()
        .max_pool_size(1)
        .wait_queue_timeout(Duration::from_millis(60))
        .build(SyncFake::default())
        .unwrap();
    let _held = pool.get().unwrap();
    let t0 = Instant::now();
    let err = pool.get().unwrap_err();
    let took = t0.elapsed();
    assert!(err.is_timeout(), "{err}");
    assert!(took >= Duration::from_millis(60), "early: {took:?}");
    assert!(took < Duration::from_millis(160), "late: {took:?}");
    for ms in [20u64, 100] {
        let t0 = Instant::now();
        let err = pool.get_timeout(Duration::from_millis(ms)).unwrap_err();
        let took = t0.elapsed();
        assert!(err.is_timeout());
        assert!(took >= Duration::from_millis(ms), "early: {took:?} < {ms} ms");
        assert!(
            took < Duration::from_millis(ms + 100),
            "late: {took:?} for {ms} ms"
        );
    }
    let t0 = Instant::now();
    assert!(pool.get_timeout(Duration::ZERO).unwrap_err().is_timeout());
    assert!(t0.elapsed() < Duration::from_millis(50));
    assert_eq!(pool.stats().requests_timed_out, 4);
}

#[test]
fn a_waiting_thread_gets_the_connection_given_back() {
    let pool = builder().max_pool_size(1).build(SyncFake::default()).unwrap();
    let held = pool.get().unwrap();
    let p = pool.clone();
    let waiter = thread::spawn(move || p.get().map(|c| c.n));
    eventually("the waiter is queued", || pool.status().waiting == 1);
    drop(held);
    assert_eq!(waiter.join().unwrap().unwrap(), 1);
}

#[test]
fn clear_fails_waiting_threads_and_closes_stale_connections() {
    let m = SyncFake::default();
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let held = pool.get().unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let p = pool.clone();
            thread::spawn(move || p.get().map(|_| ()))
        })
        .collect();
    eventually("three queued", || pool.status().waiting == 3);
    pool.clear(false).unwrap();
    for w in waiters {
        let err = w.join().unwrap().unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert!(matches!(
            err,
            GetError::CheckOut(CheckOutError::PoolCleared { .. })
        ));
    }
    assert!(pool.get().unwrap_err().is_retryable(), "paused: fails at once");
    pool.ready().unwrap();
    drop(held);
    eventually("the stale connection closed", || m.alive() == 0);
    assert_eq!(pool.get().unwrap().n, 2);
}

#[test]
fn close_fails_waiting_threads_at_once_and_closes_connections() {
    let m = SyncFake::default();
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let held = pool.get().unwrap();
    let p = pool.clone();
    let waiter = thread::spawn(move || p.get().map(|_| ()));
    eventually("queued", || pool.status().waiting == 1);
    let t0 = Instant::now();
    pool.close();
    let err = waiter.join().unwrap().unwrap_err();
    assert!(t0.elapsed() < Duration::from_millis(100));
    assert!(matches!(
        err,
        GetError::CheckOut(CheckOutError::PoolClosed { .. })
    ));
    assert_eq!(m.alive(), 1, "in use until given back");
    drop(held);
    eventually("closed", || m.alive() == 0);
    assert_eq!(pool.status().state, PoolState::Closed);
}

#[test]
fn events_arrive_in_order_by_callback_and_by_iterator() {
    let names = Names::default();
    let pool = builder()
        .max_pool_size(1)
        .on_event(names.callback())
        .build(SyncFake::default())
        .unwrap();
    let mut events = pool.events();
    drop(pool.get().unwrap());
    drop(pool.get().unwrap());
    assert!(events.next_timeout(Duration::from_millis(10)).is_some());
    drop(pool);
    let expected = TWO_CHECKOUTS_THEN_CLOSE;
    assert_eq!(names.take(), expected);
    // The iterator ends with the pool; it started at the first checkout
    // (whose first event `next_timeout` took).
    let rest: Vec<_> = events.map(|e| e.name()).collect();
    assert_eq!(rest, expected[3..]);
}

#[test]
fn next_timeout_waits_no_longer_than_asked() {
    let pool = builder().build(SyncFake::default()).unwrap();
    let mut events = pool.events();
    let t0 = Instant::now();
    assert!(events.next_timeout(Duration::from_millis(40)).is_none());
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(40) && took < Duration::from_millis(140),
        "{took:?}"
    );
}

#[test]
fn a_refused_connect_waits_then_names_its_cause() {
    let m = SyncFake::default();
    m.refuse.store(true, Ordering::SeqCst);
    let pool = builder().build(m.clone()).unwrap();
    let t0 = Instant::now();
    let err = pool.get_timeout(Duration::from_millis(200)).unwrap_err();
    assert!(
        t0.elapsed() >= Duration::from_millis(200),
        "not before its deadline"
    );
    assert!(err.is_timeout(), "{err:?}");
    assert!(err.to_string().contains("connection refused"), "{err}");
    assert_eq!(pool.status().state, PoolState::Ready, "not cleared");
    m.refuse.store(false, Ordering::SeqCst);
    assert_eq!(pool.get().unwrap().n, 1);
}

#[test]
fn denied_credentials_give_their_real_error_and_clear() {
    let m = SyncFake::default();
    m.deny.store(true, Ordering::SeqCst);
    let pool = builder().build(m.clone()).unwrap();
    let err = pool.get().unwrap_err();
    assert!(
        matches!(&err, GetError::CheckOut(CheckOutError::ConnectionError { .. })),
        "{err:?}"
    );
    assert_eq!(err.source().unwrap().to_string(), "authentication failed");
    let real = err
        .connection_error()
        .unwrap()
        .downcast_ref::<FakeError>()
        .unwrap();
    assert_eq!(real.0, "authentication failed");
    assert!(pool.get().unwrap_err().is_retryable(), "cleared by the failure");
    m.deny.store(false, Ordering::SeqCst);
    eventually("ready again", || pool.status().state == PoolState::Ready);
    assert_eq!(pool.get().unwrap().n, 1);
}

#[test]
fn a_hanging_connect_is_given_up_at_the_connect_timeout() {
    // The connect blocks its thread; the checkout still fails on
    // time, because the pool waits for it on another thread.
    let m = SyncFake::default();
    m.hang.store(true, Ordering::SeqCst);
    // Told not to wait through a network timeout, the checkout fails with it.
    let pool = builder()
        .connect_timeout(Some(Duration::from_millis(50)))
        .configure(|o| o.keep_waiting_on_overload(false))
        .build(m.clone())
        .unwrap();
    let t0 = Instant::now();
    let err = pool.get().unwrap_err();
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(50) && took < Duration::from_millis(150),
        "{took:?}"
    );
    cmap_testkit::assert_connect_timed_out(&err, Duration::from_millis(50));
    // Once the call returns, its late connection is dropped, not pooled.
    m.hang.store(false, Ordering::SeqCst);
    eventually("the late connection dropped", || {
        m.connects.load(Ordering::SeqCst) == 1 && m.alive() == 0
    });
    assert_eq!(pool.status().total, 0);
}

#[test]
fn broken_detached_and_interrupted_connections() {
    let m = SyncFake::default();
    let pool = builder().max_pool_size(2).build(m.clone()).unwrap();
    let mut a = pool.get().unwrap();
    a.mark_broken();
    drop(a);
    let mut b = pool.get().unwrap();
    b.broken = true; // found broken by the manager
    drop(b);
    eventually("both closed", || m.alive() == 0);
    assert_eq!(pool.stats().returns_bad, 2);
    let raw = pool.get().unwrap().detach();
    assert_eq!((raw.n, pool.status().total), (3, 0));
    let c = pool.get().unwrap();
    assert!(!c.is_interrupted());
    pool.clear(true).unwrap();
    assert!(c.is_interrupted());
    drop(c);
    drop(raw);
    eventually("all gone", || m.alive() == 0);
}

#[test]
fn reset_runs_on_the_dropping_thread_before_drop_returns() {
    let m = SyncFake::default();
    m.reset_us.store(30_000, Ordering::SeqCst);
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let c = pool.get().unwrap();
    let t0 = Instant::now();
    drop(c);
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert_eq!(pool.status().available, 1);
    assert_eq!(m.resets.load(Ordering::SeqCst), 1);
}

#[test]
fn a_failed_check_fails_a_new_connection_and_discards_an_idle_one() {
    let m = SyncFake::default();
    let pool = builder().max_pool_size(2).build(m.clone()).unwrap();
    drop(pool.get().unwrap());
    m.check_fails.store(true, Ordering::SeqCst);
    assert!(matches!(pool.get().unwrap_err(), GetError::CheckFailed(_)));
    m.check_fails.store(false, Ordering::SeqCst);
    assert_eq!(pool.get().unwrap().n, 3);
}

/// A synchronous manager that says it does not check (`CHECKS = false`)
/// is never checked: its failing check would fail the first checkout and
/// close the idle connection of the second.
#[test]
fn a_sync_manager_that_does_not_check_is_never_checked() {
    struct Unchecked(SyncFake);
    impl cmap_blocking::ManageConnection for Unchecked {
        type Connection = cmap_testkit::Conn;
        type Error = FakeError;
        const CHECKS: bool = false;
        fn classify(&self, error: &FakeError) -> cmap_blocking::EstablishErrorKind {
            self.0.classify(error)
        }
        fn connect(&self) -> Result<Self::Connection, FakeError> {
            self.0.connect()
        }
        fn check(&self, conn: &mut Self::Connection) -> Result<(), FakeError> {
            self.0.check(conn)
        }
    }
    let m = SyncFake::default();
    m.check_fails.store(true, Ordering::SeqCst);
    let pool = cmap_blocking::Pool::builder()
        .address("fake:27017")
        .max_pool_size(1)
        .build(Unchecked(m.clone()))
        .unwrap();
    assert_eq!(pool.get().unwrap().n, 1);
    assert_eq!(pool.get().unwrap().n, 1, "reused, not closed");
    assert_eq!(pool.stats().returns_bad, 0);
}

/// The synchronous hooks run on other threads or inside the async
/// driver; a panic in any of them loses nothing (the async scenarios of
/// `async_pool.rs` cover each hook in depth).
#[test]
fn a_panicking_sync_manager_loses_no_connection_and_no_capacity() {
    let m = SyncFake::default();
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    // `connect` panics on its thread: the checkout fails with it.
    m.connect_panics.store(true, Ordering::SeqCst);
    let err = pool.get().unwrap_err();
    let panicked =
        cmap_testkit::panicked_in(&err).unwrap_or_else(|| panic!("the panic is the cause: {err:?}"));
    assert_eq!(panicked.hook, Hook::Connect);
    m.connect_panics.store(false, Ordering::SeqCst);
    eventually("ready again", || pool.status().state == PoolState::Ready);
    // `check` panics on the calling thread: the new connection is closed.
    m.check_panics.store(true, Ordering::SeqCst);
    assert!(matches!(pool.get().unwrap_err(), GetError::CheckFailed(_)));
    m.check_panics.store(false, Ordering::SeqCst);
    // `reset` panics in the dropping thread: closed, its slot free again.
    m.reset_panics.store(true, Ordering::SeqCst);
    drop(pool.get().unwrap());
    m.reset_panics.store(false, Ordering::SeqCst);
    let c = pool.get().unwrap();
    assert_eq!(c.n, 3);
    eventually("two closed", || m.alive() == 1);
    let (s, st) = (pool.status(), pool.stats());
    assert_eq!((s.total, s.in_use), (1, 1));
    assert_eq!((st.panics_caught, st.returns_bad), (3, 2));
}

/// A synchronous check cannot be cut short while it runs: it is told what
/// is left of the checkout's deadline, and a `get()` whose check bounds
/// itself by it returns on time.
#[test]
fn a_blocking_check_is_given_the_time_left_before_the_deadline() {
    let m = SyncFake::default();
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    drop(pool.get().unwrap()); // one idle connection
    m.check_us.store(10_000_000, Ordering::SeqCst); // a blackholed round trip
    let t0 = Instant::now();
    let err = pool.get_timeout(Duration::from_millis(100)).unwrap_err();
    let took = t0.elapsed();
    assert!(err.is_timeout(), "{err}");
    assert!(took >= Duration::from_millis(100), "early: {took:?}");
    assert!(took < Duration::from_millis(600), "late: {took:?}");
    eventually("the checked connection closed", || m.alive() == 0);
}

#[test]
fn build_and_wait_fails_fast_then_succeeds_and_check_idle_checks_every_idle_one() {
    let m = SyncFake::default();
    m.refuse.store(true, Ordering::SeqCst);
    let err = builder()
        .min_pool_size(2)
        .build_and_wait(m.clone(), Duration::from_millis(100))
        .unwrap_err();
    assert!(err.to_string().contains("connection refused"), "{err}");
    m.refuse.store(false, Ordering::SeqCst);
    let pool = builder()
        .min_pool_size(2)
        .build_and_wait(m.clone(), Duration::from_secs(2))
        .unwrap();
    assert_eq!(pool.status().available, 2);
    m.check_fails.store(true, Ordering::SeqCst);
    let report = pool.check_idle(Duration::from_secs(1));
    assert_eq!((report.checked, report.closed), (2, 2));
}

#[test]
fn min_pool_size_is_kept_and_a_dropped_pool_closes() {
    let m = SyncFake::default();
    let pool = builder().min_pool_size(2).build(m.clone()).unwrap();
    eventually("populated", || pool.status().available == 2);
    // An owned guard outlives the last handle.
    let held = pool.get_owned().unwrap();
    drop(pool);
    eventually("idle closed", || m.alive() == 1);
    drop(held);
    eventually("returned one closed", || m.alive() == 0);
}

#[test]
fn a_bad_build_and_the_builder_settings() {
    let err = cmap_blocking::Pool::<SyncFake>::builder()
        .build(SyncFake::default())
        .unwrap_err();
    assert_eq!(err, cmap_blocking::BuildError::MissingAddress);
    let err = builder()
        .connection_string("mongodb://h/?maxPoolSize=-1")
        .build(SyncFake::default());
    assert!(err.unwrap_err().to_string().contains("maxPoolSize"));
    let pool = builder()
        .connection_string("mongodb://h/?maxPoolSize=7&waitQueueTimeoutMS=5")
        .min_pool_size(1)
        .max_connecting(3)
        .max_idle_time(Duration::from_secs(9))
        .start_paused(true)
        .build(SyncFake::default())
        .unwrap();
    let o = pool.options();
    assert_eq!(
        (o.max_pool_size(), o.min_pool_size(), o.max_connecting()),
        (7, 1, 3)
    );
    assert_eq!(pool.status().state, PoolState::Paused);
    assert_eq!(pool.address().to_string(), "fake:27017");
}

/// Many threads checking out with tiny timeouts, holding, breaking, while
/// the pool is cleared now and then: nothing is lost.
#[test]
fn threads_with_tiny_timeouts_and_clears_lose_nothing() {
    const MAX: u32 = 5;
    const THREADS: usize = 24;
    const ROUNDS: usize = 150;
    let m = SyncFake::default();
    m.connect_us.store(800, Ordering::SeqCst);
    m.jitter.store(true, Ordering::SeqCst);
    let pool = builder()
        .max_pool_size(MAX)
        .max_connecting(2)
        .build(m.clone())
        .unwrap();
    let start = Arc::new(Barrier::new(THREADS + 1));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let tiny = || Duration::from_micros(fastrand::u64(0..1500));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (pool, start, errors) = (pool.clone(), start.clone(), errors.clone());
            thread::spawn(move || {
                start.wait();
                for _ in 0..ROUNDS {
                    let got = match fastrand::u8(0..3) {
                        0 => pool.get_timeout(Duration::ZERO),
                        1 => pool.get_timeout(tiny()),
                        _ => pool.get_timeout(Duration::from_secs(5)),
                    };
                    match got {
                        Ok(mut conn) => {
                            if fastrand::u8(0..10) == 0 {
                                conn.mark_broken();
                            }
                            thread::sleep(tiny());
                        }
                        Err(e) if e.is_timeout() => {}
                        // Paused by a clear: back off a little, as an
                        // application would, instead of failing in a loop.
                        Err(e) if e.is_retryable() => thread::sleep(tiny()),
                        Err(e) => errors.lock().unwrap().push(e.to_string()),
                    }
                }
            })
        })
        .collect();
    start.wait();
    for _ in 0..5 {
        thread::sleep(Duration::from_millis(40));
        pool.clear(fastrand::bool()).unwrap();
        thread::sleep(tiny());
        pool.ready().unwrap();
    }
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(*errors.lock().unwrap(), Vec::<String>::new());
    eventually("settled", || {
        let s = pool.status();
        s.in_use == 0 && s.waiting == 0 && s.pending == 0
    });
    eventually("every live connection is the pool's", || {
        m.alive() == pool.status().total as i64
    });
    let held: Vec<_> = (0..MAX)
        .map(|_| pool.get_timeout(Duration::from_secs(2)).expect("full capacity"))
        .collect();
    assert_eq!(pool.status().in_use, MAX as usize);
    drop(held);
    let stats = pool.stats();
    eprintln!("{stats:#?}");
    assert_eq!(stats.requests, (THREADS * ROUNDS) as u64 + u64::from(MAX));
    assert!(stats.requests_timed_out > 0, "some checkouts timed out");
    assert!(
        stats.requests - stats.requests_failed > stats.requests / 10,
        "many were served"
    );
}

/// Leak detection through the blocking facade: the location reported is
/// the line of this file that called the blocking `get`, not the facade's.
#[test]
fn a_leak_report_names_the_line_that_called_the_blocking_get() {
    let notices = cmap_testkit::logs::notices();
    let host = format!("blocking-leak-{}", std::process::id());
    let pool = builder()
        .address(format!("{host}:27017").as_str())
        .leak_detection_threshold(Duration::from_millis(30))
        .build(SyncFake::default())
        .unwrap();
    let line = line!() + 1;
    let held = pool.get().unwrap();
    eventually("reported", || pool.stats().leaks_detected == 1);
    drop(held);
    let logged = notices.of_host(&host);
    assert_eq!(logged.len(), 2, "{logged:#?}");
    let here = format!("cmap-blocking/tests/pool.rs:{line}:");
    assert!(logged[0]["location"].contains(&here), "{here} in {:?}", logged[0]);
    assert_eq!(logged[1]["level"], "INFO");
}

#[test]
fn metrics_are_fed_from_the_pools_inputs() {
    let rec = cmap_testkit::recorder::Recording::default();
    let pool = metrics::with_local_recorder(&rec, || {
        let builder = builder().address("metrics:5432").max_pool_size(2);
        builder.metrics(true).build(SyncFake::default()).unwrap()
    });
    // available, in use, pending, total, waiting
    let gauges = || rec.pool_gauges("metrics:5432");
    let first = pool.get().unwrap();
    let mut second = pool.get().unwrap();
    assert_eq!(gauges(), [0.0, 2.0, 0.0, 2.0, 0.0]);
    drop(first);
    assert_eq!(gauges(), [1.0, 1.0, 0.0, 2.0, 0.0]);
    second.mark_broken();
    drop(second);
    assert_eq!(gauges(), [1.0, 0.0, 0.0, 1.0, 0.0]);
    pool.close();
    assert_eq!(gauges(), [0.0; 5]);
    let opened = rec.counter("cmap_connections_opened_total{address=metrics:5432}");
    assert_eq!(opened, 2);
}

/// A manager that records the deadline each connect is told.
struct Deadlines(SyncFake, Arc<Mutex<Vec<Option<Instant>>>>);

impl cmap_blocking::ManageConnection for Deadlines {
    type Connection = cmap_testkit::Conn;
    type Error = FakeError;

    fn connect(&self) -> Result<cmap_testkit::Conn, FakeError> {
        unreachable!("the pool calls connect_until")
    }

    fn connect_until(&self, deadline: Option<Instant>) -> Result<cmap_testkit::Conn, FakeError> {
        self.1.lock().unwrap().push(deadline);
        self.0.connect()
    }

    fn classify(&self, error: &FakeError) -> cmap_blocking::EstablishErrorKind {
        error.kind()
    }
}

/// As cmap-async's: a connect a checkout started is told its deadline;
/// one for minPoolSize is told none.
#[test]
fn a_connect_is_told_the_deadline_of_the_checkout_that_started_it() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let pool = cmap_blocking::Pool::builder()
        .address("fake:27017")
        .build(Deadlines(SyncFake::default(), seen.clone()))
        .unwrap();
    let before = Instant::now() + Duration::from_millis(500);
    let conn = pool.get_timeout(Duration::from_millis(500)).unwrap();
    let after = Instant::now() + Duration::from_millis(500);
    let told = seen.lock().unwrap()[0].expect("the checkout's deadline");
    assert!(before <= told && told <= after, "{told:?}");
    drop(conn);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let _pool = cmap_blocking::Pool::builder()
        .address("fake:27017")
        .min_pool_size(1)
        .build_and_wait(
            Deadlines(SyncFake::default(), seen.clone()),
            Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [None], "minPoolSize");
}
