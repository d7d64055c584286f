//! The pool's behaviour on a real clock, one `async fn` per test, generic
//! over the pool's runtime `R` and the runtime `T` that the test's own
//! tasks run on. [`pool_scenarios!`](crate::pool_scenarios) makes them
//! `#[test]`s for one runtime.

use std::error::Error as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use cmap_async::{
    BuildError, CheckOutError, ConnectTimeoutError, ConnectionId, GetError, Pool, PoolState,
    PooledConnection, Runtime,
};

use crate::rt::{eventually, next, sleep, spawn, timeout, FrozenCoarse};
use crate::{builder, Fake, FakeError, FakePool, Names};

pub use crate::flight::*;
pub use crate::operations::*;
pub use crate::panic_safety::*;

/// Both runtimes of a scenario, made where it starts (inside the runtime).
pub(crate) fn runtimes<R: Default, T: Default>() -> (Fake<R>, T) {
    (Fake::default(), T::default())
}

/// Drops `conn`, a connection the pool interrupted, and checks that the
/// manager's reset did not run for it (`why` says why it must not).
pub(crate) fn give_back_unreset<R: Runtime>(m: &Fake<R>, conn: PooledConnection<'_, Fake<R>>, why: &str) {
    let resets = m.resets.load(Ordering::SeqCst);
    drop(conn);
    assert_eq!(m.resets.load(Ordering::SeqCst), resets, "{why}");
}

/// A connection is checked out, checked in before `drop` returns, and
/// reused.
pub async fn check_out_check_in_and_reuse<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(2).build(m.clone()).unwrap();
    let c = pool.get().await.unwrap();
    assert_eq!(c.n, 1);
    assert_eq!(c.connection_id().0, 1);
    let s = pool.status();
    assert_eq!(
        (s.state, s.total, s.in_use, s.available),
        (PoolState::Ready, 1, 1, 0)
    );
    drop(c);
    // Checked in before `drop` returns (the default reset has nothing to wait for).
    assert_eq!(pool.status().available, 1);
    let again = pool.get().await.unwrap();
    assert_eq!(again.n, 1, "the idle connection is reused");
    drop(again);
    let stats = pool.stats();
    assert_eq!((stats.requests, stats.connections_opened), (2, 1));
}

/// A queued checkout gets the connection given back.
pub async fn a_waiter_gets_the_connection_given_back<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(1).build(m).unwrap();
    let held = pool.get().await.unwrap();
    let p = pool.clone();
    let waiter = spawn(&t, async move { p.get().await.map(|c| c.n) });
    eventually(&t, "the waiter is queued", || pool.status().waiting == 1).await;
    drop(held);
    assert_eq!(waiter.await.unwrap(), 1);
}

/// `get_timeout` fails neither early nor late.
pub async fn get_timeout_fires_on_time<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(1).build(m).unwrap();
    let _held = pool.get().await.unwrap();
    for ms in [30u64, 80, 150] {
        let t0 = Instant::now();
        let err = pool.get_timeout(Duration::from_millis(ms)).await.unwrap_err();
        let took = t0.elapsed();
        assert!(err.is_timeout(), "{err}");
        assert!(
            took >= Duration::from_millis(ms),
            "fired early: {took:?} < {ms} ms"
        );
        assert!(
            took < Duration::from_millis(ms + 100),
            "fired late: {took:?} for {ms} ms"
        );
    }
    assert_eq!(pool.status().waiting, 0);
    assert_eq!(pool.stats().requests_timed_out, 3);
}

/// A checkout served at once and a check-in nobody waits for read only
/// the runtime's cheap clock: the precise one costs a fifth of a cycle.
pub async fn an_uncontended_cycle_reads_only_the_cheap_clock<R: Runtime + Default, T: Runtime + Default>() {
    let rt = FrozenCoarse::<R>::default();
    let pool = builder()
        .max_pool_size(2)
        .build_on(Fake::<FrozenCoarse<R>>::default(), rt.clone())
        .unwrap();
    drop(pool.get().await.unwrap()); // the connection is made
    let before = rt.precise_reads();
    for _ in 0..1000 {
        drop(pool.get().await.unwrap());
    }
    // The timer task may wake meanwhile; 2,000 reads would be the cycles'.
    let reads = rt.precise_reads() - before;
    assert!(reads < 100, "{reads} precise reads in 1,000 cycles");
    assert_eq!(pool.stats().requests, 1001);
}

/// The instants that time a wait are precise even where the pool would
/// otherwise read the cheap clock: the first waiter's start (nobody
/// waited before it) and the check-in that hands it a connection.
pub async fn a_waited_checkout_is_timed_on_the_precise_clock<R: Runtime + Default, T: Runtime + Default>() {
    let t = T::default();
    let rt = FrozenCoarse::<R>::default();
    let waited = Arc::new(Mutex::new(Vec::new()));
    let seen = waited.clone();
    let pool = builder()
        .max_pool_size(1)
        .on_event(move |e| {
            if let cmap_async::Event::ConnectionCheckedOut { duration, .. } = e {
                seen.lock().unwrap().push(*duration);
            }
        })
        .build_on(Fake::<FrozenCoarse<R>>::default(), rt.clone())
        .unwrap();
    let held = pool.get().await.unwrap();
    // The last input's instant is this far behind when the waiter comes:
    // a start taken from it would add this much to the wait.
    sleep(&t, Duration::from_millis(600)).await;
    let p = pool.clone();
    let waiter = spawn(&t, async move { p.get().await.map(|c| c.n) });
    eventually(&t, "the waiter is queued", || pool.status().waiting == 1).await;
    sleep(&t, Duration::from_millis(50)).await;
    drop(held);
    assert_eq!(waiter.await.unwrap(), 1);
    let durations = waited.lock().unwrap().clone();
    assert_eq!(durations.len(), 2, "{durations:?}");
    assert!(
        durations[1] >= Duration::from_millis(50) && durations[1] < Duration::from_millis(600),
        "the waiter waited about 50 ms, not {:?}",
        durations[1]
    );
}

/// The timer sleeps until a far deadline; a nearer one must wake it.
pub async fn an_earlier_deadline_rearms_the_timer<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(1).build(m).unwrap();
    let _held = pool.get().await.unwrap();
    let _far = spawn(&t, pool.get_owned_timeout(Duration::from_secs(30)));
    eventually(&t, "queued", || pool.status().waiting == 1).await;
    let t0 = Instant::now();
    let err = pool.get_timeout(Duration::from_millis(40)).await.unwrap_err();
    assert!(err.is_timeout());
    assert!(t0.elapsed() < Duration::from_millis(140), "{:?}", t0.elapsed());
    // Dropping the pool fails the far checkout: its task ends.
}

/// `waitQueueTimeoutMS` from a connection string bounds `get()`.
pub async fn wait_queue_timeout_from_the_connection_string<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder()
        .connection_string("mongodb://fake/?maxPoolSize=1&waitQueueTimeoutMS=50")
        .build(m)
        .unwrap();
    assert_eq!(pool.options().max_pool_size(), 1);
    let _held = pool.get().await.unwrap();
    let t0 = Instant::now();
    let err = pool.get().await.unwrap_err();
    assert!(err.is_timeout());
    assert!(t0.elapsed() >= Duration::from_millis(50));
    assert_eq!(
        err.check_out_error().unwrap().spec_message(),
        "Timed out while checking out a Connection from connection pool"
    );
    let text = err.to_string();
    assert!(
        text.contains("(maxPoolSize 1, total 1, idle 0, in use 1, connecting 0, waiting 1)"),
        "{text}"
    );
}

/// A clear fails the queued checkouts (retryable), pauses the pool, and
/// closes the stale connection when it comes back.
pub async fn clear_fails_waiters_and_closes_stale_connections<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let names = Names::default();
    let _sub = pool.on_event(names.callback());
    let held = pool.get().await.unwrap();
    let waiters: Vec<_> = (0..3).map(|_| spawn(&t, pool.get_owned())).collect();
    eventually(&t, "three queued", || pool.status().waiting == 3).await;
    pool.clear(false).unwrap();
    for w in waiters {
        let err = w.await.unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert!(matches!(
            err,
            GetError::CheckOut(CheckOutError::PoolCleared { .. })
        ));
    }
    assert_eq!(pool.status().state, PoolState::Paused);
    // Paused: fails at once.
    assert!(pool.get().await.unwrap_err().is_retryable());
    pool.ready().unwrap();
    drop(held); // stale: closed, not pooled
    eventually(&t, "the stale connection is gone", || m.alive() == 0).await;
    let fresh = pool.get().await.unwrap();
    assert_eq!(fresh.n, 2);
    let names = names.take();
    assert!(names.contains(&"ConnectionPoolCleared"));
    assert!(names.contains(&"ConnectionClosed"));
}

/// Close fails the queued checkouts at once, closes idle connections, and
/// closes checked-out ones when they come back.
pub async fn close_fails_waiters_closes_idle_and_returned_connections<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(2).build(m.clone()).unwrap();
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    drop(b); // idle
    let waiter_conn = spawn(&t, pool.get_owned_timeout(Duration::from_secs(1)))
        .await
        .unwrap();
    let queued = spawn(&t, pool.get_owned());
    eventually(&t, "queued", || pool.status().waiting == 1).await;
    let t0 = Instant::now();
    pool.close();
    let err = queued.await.unwrap_err();
    assert!(t0.elapsed() < Duration::from_millis(100), "waiters fail at once");
    assert!(matches!(
        err,
        GetError::CheckOut(CheckOutError::PoolClosed { .. })
    ));
    assert_eq!(m.alive(), 2, "in-use connections stay open until given back");
    drop(a);
    drop(waiter_conn);
    eventually(&t, "all closed", || m.alive() == 0).await;
    let s = pool.status();
    assert_eq!((s.state, s.total), (PoolState::Closed, 0));
    assert!(matches!(
        pool.get().await.unwrap_err(),
        GetError::CheckOut(CheckOutError::PoolClosed { .. })
    ));
    assert!(pool.ready().is_err());
}

/// The events of a pool of one connection, checked out twice and then
/// closed, in the order the core emits them (every adapter's ordering
/// test expects them).
pub const TWO_CHECKOUTS_THEN_CLOSE: [&str; 12] = [
    "ConnectionPoolCreated",
    "ConnectionPoolReady",
    "ConnectionCheckOutStarted",
    "ConnectionCreated",
    "ConnectionReady",
    "ConnectionCheckedOut",
    "ConnectionCheckedIn",
    "ConnectionCheckOutStarted",
    "ConnectionCheckedOut",
    "ConnectionCheckedIn",
    "ConnectionClosed",
    "ConnectionPoolClosed",
];

/// Callbacks and streams see the core's events in its order.
pub async fn events_arrive_in_the_cores_order<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let names = Names::default();
    let pool = builder()
        .max_pool_size(1)
        .on_event(names.callback())
        .build(m)
        .unwrap();
    let mut stream = pool.events();
    let c = pool.get().await.unwrap();
    drop(c);
    let c = pool.get().await.unwrap();
    drop(c);
    pool.close();
    let expected = TWO_CHECKOUTS_THEN_CLOSE;
    assert_eq!(names.take(), expected);
    // The stream was made after the pool: it starts at the first checkout.
    let mut streamed = Vec::new();
    while let Some(e) = stream.try_next() {
        streamed.push(e.name());
    }
    assert_eq!(streamed, expected[2..]);
}

/// An event stream ends once its pool is gone.
pub async fn the_event_stream_ends_when_the_pool_is_gone<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().build(m).unwrap();
    let mut stream = pool.events();
    drop(pool.get().await.unwrap());
    drop(pool);
    let mut names = Vec::new();
    while let Some(e) = timeout(&t, Duration::from_secs(2), next(&mut stream))
        .await
        .expect("the stream ends")
    {
        names.push(e.name());
    }
    assert_eq!(names.last(), Some(&"ConnectionPoolClosed"));
}

/// `interrupted()` resolves when a clear interrupts the connection.
pub async fn interrupted_future_resolves_on_an_interrupting_clear<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(2).build(m.clone()).unwrap();
    let conn = pool.get().await.unwrap();
    let other = pool.get().await.unwrap();
    drop(other); // idle: not interrupted, closed as stale
    assert!(!conn.is_interrupted());
    let interrupted = conn.interrupted();
    let (p, t2) = (pool.clone(), t.clone());
    let _clear = spawn(&t, async move {
        sleep(&t2, Duration::from_millis(20)).await;
        p.clear(true).unwrap();
    });
    let err = timeout(&t, Duration::from_secs(2), interrupted)
        .await
        .expect("interrupted");
    assert_eq!(
        err.to_string(),
        "Connection to fake:27017 interrupted due to server monitor timeout"
    );
    assert!(conn.is_interrupted());
    let in_use = pool.status().in_use;
    assert_eq!(in_use, 0, "an interrupted connection counts as closed");
    // The idle one is stale: the background run the clear scheduled closes it.
    eventually(&t, "the stale idle connection closed", || {
        pool.status().total == 0
    })
    .await;
    give_back_unreset(&m, conn, "an interrupted connection is not reset");
    eventually(&t, "both closed", || m.alive() == 0).await;
    assert_eq!(pool.stats().connections_lost, 1);
}

/// A subscriber added or removed between two inputs sees exactly the
/// events of the inputs after it came and before it went, callbacks and
/// streams alike (deliveries keep a snapshot of the subscribers: it must
/// follow every change).
pub async fn subscribing_and_unsubscribing_take_effect_at_once<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(1).build(m).unwrap();
    let cycle = || async { drop(pool.get().await.unwrap()) };
    const ONE_CYCLE: [&str; 3] = [
        "ConnectionCheckOutStarted",
        "ConnectionCheckedOut",
        "ConnectionCheckedIn",
    ];
    let first = Names::default();
    let first_sub = pool.on_event(first.callback());
    cycle().await;
    let _ = first.take();

    let second = Names::default();
    let second_sub = pool.on_event(second.callback());
    let mut stream = pool.events();
    cycle().await;
    assert_eq!(first.take(), ONE_CYCLE);
    assert_eq!(
        second.take(),
        ONE_CYCLE,
        "a new callback sees the next input's events"
    );
    let mut streamed = Vec::new();
    while let Some(event) = stream.try_next() {
        streamed.push(event.name());
    }
    assert_eq!(streamed, ONE_CYCLE, "a new stream sees the next input's events");

    first_sub.unsubscribe();
    drop(stream);
    cycle().await;
    assert_eq!(
        first.take(),
        Vec::<&str>::new(),
        "an unsubscribed callback sees nothing more"
    );
    assert_eq!(second.take(), ONE_CYCLE);

    second_sub.unsubscribe();
    cycle().await;
    assert_eq!(second.take(), Vec::<&str>::new());
    let third = Names::default();
    let _third_sub = pool.on_event(third.callback());
    cycle().await;
    assert_eq!(third.take(), ONE_CYCLE, "subscribing again after none were left");
}

/// Marked broken, or found broken by the manager, a connection is closed.
pub async fn broken_connections_are_closed_not_pooled<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(3).build(m.clone()).unwrap();
    let mut a = pool.get().await.unwrap();
    a.mark_broken();
    drop(a);
    let mut b = pool.get().await.unwrap();
    assert_eq!(b.n, 2, "the broken one was not reused");
    b.broken = true; // the manager's is_broken sees this
    drop(b);
    eventually(&t, "closed", || m.alive() == 0).await;
    assert_eq!(pool.stats().returns_bad, 2);
    assert_eq!(pool.status().total, 0);
}

/// `detach` takes the connection out of the pool for good.
pub async fn detach_takes_the_connection_out_of_the_pool<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let names = Names::default();
    let _sub = pool.on_event(names.callback());
    let c = pool.get().await.unwrap();
    let raw = c.detach();
    assert_eq!(raw.n, 1);
    assert_eq!(pool.status().total, 0, "no longer counts against maxPoolSize");
    let c2 = pool.get_timeout(Duration::from_secs(1)).await.unwrap();
    assert_eq!(c2.n, 2);
    assert!(names.take().contains(&"ConnectionClosed"));
    assert_eq!(m.alive(), 2);
    drop(raw);
}

/// A refused connect (a network error: possibly overload) neither clears
/// the pool nor fails the checkout at once: the checkout waits, and
/// fails at its own deadline naming the cause and the pool's state;
/// once the server is back a waiting checkout is served.
pub async fn a_refused_connect_waits_for_the_server_then_reconnects<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = runtimes::<R, T>();
    m.refuse.store(true, Ordering::SeqCst);
    let pool = builder().build(m.clone()).unwrap();
    let t0 = Instant::now();
    let err = pool.get_timeout(Duration::from_millis(200)).await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(
        t0.elapsed() >= Duration::from_millis(200),
        "not before its deadline"
    );
    let text = err.to_string();
    assert!(text.contains("connection refused"), "{text}");
    assert!(text.contains("SystemOverloadedError"), "{text}");
    assert!(text.contains("maxPoolSize"), "{text}");
    assert_eq!(pool.status().state, PoolState::Ready, "not cleared");
    assert!(pool.stats().connections_failed > 1, "it kept trying");
    // A checkout waiting when the server comes back is served.
    let server = m.clone();
    let rt = t.clone();
    let _back = spawn(&t, async move {
        sleep(&rt, Duration::from_millis(100)).await;
        server.refuse.store(false, Ordering::SeqCst);
    });
    let got = pool.get_timeout(Duration::from_secs(5)).await.unwrap();
    assert_eq!(got.n, 1);
    assert_eq!(pool.stats().requests_failed, 1, "only the first checkout failed");
}

/// Without `keep_waiting_on_overload` (the spec's behaviour), a refused
/// connect fails the checkout it was made for with the manager's own
/// error, labelled, and still does not clear the pool.
pub async fn a_refused_connect_fails_its_checkout_when_told_not_to_wait<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, _t) = runtimes::<R, T>();
    m.refuse.store(true, Ordering::SeqCst);
    let pool = builder()
        .configure(|o| o.keep_waiting_on_overload(false))
        .build(m.clone())
        .unwrap();
    let err = pool.get().await.unwrap_err();
    assert!(
        matches!(&err, GetError::CheckOut(CheckOutError::ConnectionError { .. })),
        "{err:?}"
    );
    assert!(err.has_label("SystemOverloadedError") && err.has_label("RetryableError"));
    assert!(err.is_retryable());
    let source = err.source().expect("the establishment error is the source");
    assert!(source.to_string().starts_with("connection refused"), "{source}");
    let real = err
        .connection_error()
        .unwrap()
        .downcast_ref::<FakeError>()
        .unwrap();
    assert_eq!(real.0, "connection refused");
    assert_eq!(
        pool.status().state,
        PoolState::Ready,
        "a labelled error does not clear"
    );
    m.refuse.store(false, Ordering::SeqCst);
    assert_eq!(pool.get().await.unwrap().n, 1);
}

/// Refused credentials (no backpressure label) fail the checkout with the
/// manager's own error and clear the pool, whose cause the next checkout
/// names in its message and its source; the reconnect backoff readies the
/// pool once the credentials are accepted again.
pub async fn denied_credentials_clear_the_pool_then_reconnect<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    m.deny.store(true, Ordering::SeqCst);
    let pool = builder().build(m.clone()).unwrap();
    let err = pool.get().await.unwrap_err();
    assert!(
        matches!(&err, GetError::CheckOut(CheckOutError::ConnectionError { .. })),
        "{err:?}"
    );
    assert!(!err.has_label("SystemOverloadedError"));
    let err = pool.get().await.unwrap_err();
    assert!(err.is_retryable());
    assert!(err.to_string().contains("authentication failed"), "{err}");
    let mut chain = err.source();
    let mut found = false;
    while let Some(cause) = chain {
        found |= cause.downcast_ref::<FakeError>().is_some();
        chain = cause.source();
    }
    assert!(found, "the manager's error is down the chain of {err:?}");
    m.deny.store(false, Ordering::SeqCst);
    eventually(&t, "ready again", || pool.status().state == PoolState::Ready).await;
    assert_eq!(pool.get().await.unwrap().n, 1);
}

/// A connect that never finishes is given up at the connect timeout, a
/// network timeout: the checkout keeps waiting for the next attempt and
/// fails at its own deadline, naming the timeout; told not to wait, it
/// fails with the timeout itself.
pub async fn connect_timeout_fails_the_checkout<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    m.hang.store(true, Ordering::SeqCst);
    let pool = builder()
        .connect_timeout(Duration::from_millis(50))
        .wait_queue_timeout(Duration::from_millis(200))
        .build(m.clone())
        .unwrap();
    let t0 = Instant::now();
    let err = pool.get().await.unwrap_err();
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert!(err.is_timeout(), "{err:?}");
    assert!(
        err.to_string().contains("connecting took longer than 50ms"),
        "{err}"
    );
    drop(pool);
    let pool = builder()
        .connect_timeout(Duration::from_millis(50))
        .configure(|o| o.keep_waiting_on_overload(false))
        .build(m)
        .unwrap();
    let t0 = Instant::now();
    let err = pool.get().await.unwrap_err();
    assert!(t0.elapsed() >= Duration::from_millis(50));
    let timeout = err
        .connection_error()
        .unwrap()
        .downcast_ref::<ConnectTimeoutError>();
    assert_eq!(
        timeout,
        Some(&ConnectTimeoutError {
            after: Duration::from_millis(50)
        })
    );
    assert!(err.has_label("SystemOverloadedError"), "a network timeout");
}

/// A reset that has to wait goes on in a task; the connection is checked
/// in once it is done.
pub async fn a_slow_reset_runs_in_a_task_before_check_in<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    m.reset_us.store(30_000, Ordering::SeqCst);
    let pool = builder().max_pool_size(1).build(m).unwrap();
    let c = pool.get().await.unwrap();
    let t0 = Instant::now();
    drop(c);
    assert!(
        t0.elapsed() < Duration::from_millis(10),
        "drop does not wait for the reset"
    );
    assert_eq!(pool.status().in_use, 1, "still resetting");
    let c = pool.get().await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert_eq!(c.n, 1);
}

/// A failed check closes an idle connection and the checkout goes on; a
/// new connection failing its check fails the checkout.
pub async fn a_failed_check_discards_the_idle_connection_and_tries_another<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(2).build(m.clone()).unwrap();
    drop(pool.get().await.unwrap()); // one idle connection
    m.check_fails.store(true, Ordering::SeqCst);
    // The idle one fails its check and is closed; the new one fails too,
    // and was made for this checkout: the error says so.
    let err = pool.get().await.unwrap_err();
    assert!(matches!(err, GetError::CheckFailed(_)), "{err:?}");
    m.check_fails.store(false, Ordering::SeqCst);
    let c = pool.get().await.unwrap();
    assert_eq!(c.n, 3);
    assert_eq!(pool.stats().returns_bad, 2);
}

/// A `get()` dropped while its connection is under the manager's check
/// gives it back marked errored: the connection's state is unknown, so it
/// is closed, not pooled, and no capacity is lost.
pub async fn a_get_dropped_during_its_check_closes_the_connection<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    drop(pool.get().await.unwrap()); // one idle connection
    m.check_us.store(60_000_000, Ordering::SeqCst);
    let mut get = Box::pin(pool.get());
    // One poll: the idle connection is checked out, its check waits.
    let first = std::future::poll_fn(|cx| Poll::Ready(get.as_mut().poll(cx).is_pending())).await;
    assert!(first, "the check is still running");
    assert_eq!(pool.status().in_use, 1);
    drop(get);
    assert_eq!(pool.status().in_use, 0);
    assert_eq!(pool.status().available, 0, "closed, not pooled");
    assert_eq!(pool.stats().returns_bad, 1);
    eventually(&t, "closed", || m.alive() == 0).await;
    // Its capacity is back: the next checkout makes a new connection.
    m.check_us.store(0, Ordering::SeqCst);
    let c = pool.get().await.unwrap();
    assert_eq!(c.n, 2);
}

/// The background task fills the pool to `minPoolSize`.
pub async fn min_pool_size_is_kept_in_the_background<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().min_pool_size(3).build(m.clone()).unwrap();
    eventually(&t, "populated", || pool.status().available == 3).await;
    assert_eq!(m.alive(), 3);
}

/// The last handle dropped closes the pool; its connections follow.
pub async fn a_dropped_pool_closes_and_its_tasks_end<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().min_pool_size(2).build(m.clone()).unwrap();
    eventually(&t, "populated", || pool.status().available == 2).await;
    // Made owned, the guard outlives every handle.
    let held = pool.get().await.unwrap().into_owned();
    drop(pool);
    eventually(&t, "idle closed", || m.alive() == 1).await;
    drop(held);
    eventually(&t, "returned one closed", || m.alive() == 0).await;
}

/// A pool built paused serves nothing until `ready()`.
pub async fn start_paused_waits_for_ready<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder().start_paused(true).build(m).unwrap();
    assert_eq!(pool.status().state, PoolState::Paused);
    let err = pool.get().await.unwrap_err();
    assert!(err.is_retryable());
    assert!(err.to_string().contains("not been marked ready"), "{err}");
    pool.ready().unwrap();
    pool.get().await.unwrap();
}

/// No address, a bad one, or a bad option fails `build`.
pub async fn a_bad_address_or_option_fails_the_build<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let err = Pool::<Fake<R>, R>::builder().build(m.clone()).unwrap_err();
    assert_eq!(err, BuildError::MissingAddress);
    let err = builder::<R>().address("h:port").build(m.clone()).unwrap_err();
    assert!(err.to_string().contains("h:port"), "{err}");
    let err = builder::<R>()
        .connection_string("mongodb://h/?maxPoolSize=-1")
        .build(m.clone())
        .unwrap_err();
    assert!(err.to_string().contains("maxPoolSize"), "{err}");
    let err = builder::<R>().max_connecting(0).build(m).unwrap_err();
    assert!(err.to_string().contains("maxConnecting"), "{err}");
}

/// A zero timeout takes an idle connection, or fails at once.
pub async fn a_zero_timeout_takes_an_available_connection_or_fails_at_once<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder().max_pool_size(1).build(m).unwrap();
    drop(pool.get().await.unwrap());
    let held = pool
        .get_timeout(Duration::ZERO)
        .await
        .expect("the idle connection");
    let t0 = Instant::now();
    let err = pool.get_timeout(Duration::ZERO).await.unwrap_err();
    assert!(err.is_timeout());
    assert!(t0.elapsed() < Duration::from_millis(50));
    drop(held);
}

/// Concurrent inputs never reorder a connection's events, and each input
/// returns only once its own events are delivered (whichever thread
/// delivered them).
pub async fn concurrent_inputs_never_reorder_events<R: Runtime + Default, T: Runtime + Default>() {
    use std::collections::BTreeMap;
    type Log = Arc<Mutex<Vec<(&'static str, Option<ConnectionId>)>>>;
    /// Where the latest event about `id` is, and its name.
    fn latest(log: &Log, id: ConnectionId) -> Option<(usize, &'static str)> {
        let log = log.lock().unwrap();
        log.iter()
            .enumerate()
            .rev()
            .find(|(_, (_, of))| *of == Some(id))
            .map(|(at, (name, _))| (at, *name))
    }
    let (m, t) = runtimes::<R, T>();
    let seen: Log = Arc::default();
    let log = seen.clone();
    let pool = builder()
        .max_pool_size(3)
        .on_event(move |e| {
            // A slow subscriber widens any window for reordering.
            std::thread::sleep(Duration::from_micros(20));
            log.lock().unwrap().push((e.name(), e.connection_id()))
        })
        .build(m)
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            let seen = seen.clone();
            spawn(&t, async move {
                for _ in 0..300 {
                    let c = pool.get().await.unwrap();
                    let id = c.connection_id();
                    // Nobody else can use it while it is lent to us.
                    let (out_at, name) = latest(&seen, id).expect("its events are out");
                    assert_eq!(name, "ConnectionCheckedOut", "connection {id}");
                    drop(c);
                    let came_back = {
                        let log = seen.lock().unwrap();
                        log[out_at + 1..].contains(&("ConnectionCheckedIn", Some(id)))
                    };
                    assert!(came_back, "the check-in of {id} was out before drop returned");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await;
    }
    pool.close();
    let seen = seen.lock().unwrap();
    // Per connection: created, ready, then checked out and in by turns,
    // then closed, as the core emitted them.
    let mut life: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (name, id) in seen.iter() {
        if let Some(id) = id {
            life.entry(id.0).or_default().push(name);
        }
    }
    for (id, events) in &life {
        assert_eq!(
            events[..2],
            ["ConnectionCreated", "ConnectionReady"],
            "connection {id}"
        );
        assert_eq!(events.last(), Some(&"ConnectionClosed"), "connection {id}");
        for (i, e) in events[2..events.len() - 1].iter().enumerate() {
            let expected = if i % 2 == 0 {
                "ConnectionCheckedOut"
            } else {
                "ConnectionCheckedIn"
            };
            assert_eq!(*e, expected, "connection {id}, event {}", i + 2);
        }
    }
    let started = seen
        .iter()
        .filter(|(n, _)| *n == "ConnectionCheckOutStarted")
        .count();
    assert_eq!(started, 8 * 300);
    assert_eq!(seen.last().map(|(n, _)| *n), Some("ConnectionPoolClosed"));
}

/// A callback may call into its own pool without deadlocking; its events
/// come after the current one.
pub async fn a_callback_may_call_into_its_pool<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let names = Names::default();
    let handle: Arc<OnceLock<FakePool<R>>> = Arc::default();
    let h = handle.clone();
    let record = names.callback();
    let pool = builder()
        .on_event(move |e| {
            record(e);
            // Re-ready a cleared pool from inside the callback: its events
            // come after this one, from the loop already delivering.
            if e.name() == "ConnectionPoolCleared" {
                let pool = h.get().unwrap();
                assert_eq!(pool.status().state, PoolState::Paused);
                pool.ready().unwrap();
            }
        })
        .build(m)
        .unwrap();
    let _ = handle.set(pool.clone());
    pool.clear(false).unwrap();
    assert_eq!(pool.status().state, PoolState::Ready);
    assert_eq!(
        names.take(),
        [
            "ConnectionPoolCreated",
            "ConnectionPoolReady",
            "ConnectionPoolCleared",
            "ConnectionPoolReady"
        ]
    );
    // The callback holds a handle: close explicitly.
    pool.close();
}

/// A `get_owned()` future kept aside, for an event callback to poll or
/// drop while the pool delivers events.
type Parked<R> = Pin<Box<dyn Future<Output = Result<PooledConnection<'static, Fake<R>>, GetError>> + Send>>;
type ParkedSlot<R> = Arc<Mutex<Option<Parked<R>>>>;

/// Checks out the pool's one connection, and parks in `parked` a checkout
/// queued behind it (polled once); returns the connection held.
async fn hold_and_park<'a, R: Runtime>(
    pool: &'a FakePool<R>,
    parked: &ParkedSlot<R>,
) -> PooledConnection<'a, Fake<R>> {
    let held = pool.get().await.unwrap();
    let mut waiting: Parked<R> = Box::pin(pool.get_owned());
    assert!(waiting
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    assert_eq!(pool.status().waiting, 1);
    *parked.lock().unwrap() = Some(waiting);
    held
}

/// A queued checkout dropped after an input handed it a connection, but
/// before that outcome reached it (here: from the event callback, which
/// runs in between), gives the connection back: nothing is lost.
pub async fn a_checkout_dropped_as_its_connection_arrives_gives_it_back<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, _t) = runtimes::<R, T>();
    let parked: ParkedSlot<R> = Arc::default();
    let dropped = Arc::new(AtomicBool::new(false));
    let (p, d) = (parked.clone(), dropped.clone());
    let pool = builder()
        .max_pool_size(1)
        .on_event(move |e| {
            // Only the parked checkout's delivery finds one parked.
            if e.name() == "ConnectionCheckedOut" {
                if let Some(waiting) = p.lock().unwrap().take() {
                    drop(waiting);
                    d.store(true, Ordering::SeqCst);
                }
            }
        })
        .build(m)
        .unwrap();
    let held = hold_and_park(&pool, &parked).await;
    drop(held);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the callback dropped the checkout"
    );
    let s = pool.status();
    assert_eq!(
        (s.total, s.in_use, s.available, s.waiting),
        (1, 0, 1, 0),
        "the connection handed to the dropped checkout is back"
    );
    let again = pool.get().await.unwrap();
    assert_eq!(again.n, 1, "and it is the same connection");
    drop(again);
    pool.close();
}

/// A queued checkout does not complete before its `ConnectionCheckedOut`
/// is delivered, even when polled while the input that served it is
/// still delivering events (here: from the callback of the event before).
pub async fn a_waiting_checkout_completes_only_after_its_event_is_out<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, _t) = runtimes::<R, T>();
    let parked: ParkedSlot<R> = Arc::default();
    let seen: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let (p, s) = (parked.clone(), seen.clone());
    let pool = builder()
        .max_pool_size(1)
        .on_event(move |e| {
            if e.name() == "ConnectionCheckedIn" {
                // The check-in that serves the parked checkout: poll it
                // before its ConnectionCheckedOut, which comes next.
                let mut parked = p.lock().unwrap();
                if let Some(waiting) = parked.as_mut() {
                    let mut cx = Context::from_waker(Waker::noop());
                    let state = match waiting.as_mut().poll(&mut cx) {
                        Poll::Pending => "pending",
                        Poll::Ready(_) => {
                            // Never polled again; its connection goes back
                            // once the lock on `parked` is released.
                            let done = parked.take();
                            drop(parked);
                            drop(done);
                            "completed"
                        }
                    };
                    s.lock().unwrap().push(state);
                }
            }
        })
        .build(m)
        .unwrap();
    let held = hold_and_park(&pool, &parked).await;
    drop(held);
    assert_eq!(
        *seen.lock().unwrap(),
        ["pending"],
        "polled before its ConnectionCheckedOut, the checkout must still wait"
    );
    let mut waiting = parked.lock().unwrap().take().unwrap();
    let Poll::Ready(Ok(conn)) = waiting.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
        panic!("served once its events are out");
    };
    assert_eq!(conn.n, 1);
    drop(conn);
    pool.close();
}

/// `reset_after_fork` (called here without a fork, as a forked child
/// would): the pool is cleared and ready again, the connections it had are
/// leaked rather than dropped (their sockets would be the parent's), one
/// checked out is given back without a reset, and a new timer task serves
/// deadlines while the old one has ended.
pub async fn reset_after_fork_clears_restarts_the_timer_and_leaks_old_connections<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = runtimes::<R, T>();
    let names = Names::default();
    let pool = builder().max_pool_size(2).build(m.clone()).unwrap();
    let lent = pool.get().await.unwrap();
    drop(pool.get().await.unwrap()); // one idle
    assert_eq!(m.alive(), 2);
    let _sub = pool.on_event(names.callback());
    pool.reset_after_fork();
    assert_eq!(
        names.take(),
        [
            "ConnectionPoolCleared",
            "ConnectionClosed",
            "ConnectionClosed",
            "ConnectionPoolReady"
        ]
    );
    let s = pool.status();
    assert_eq!((s.state, s.total, s.in_use), (PoolState::Ready, 0, 0));
    assert!(lent.is_interrupted());
    let resets = m.resets.load(Ordering::SeqCst);
    drop(lent);
    assert_eq!(m.resets.load(Ordering::SeqCst), resets, "no reset");
    // Neither the idle one nor the lent one was dropped.
    sleep(&t, Duration::from_millis(20)).await;
    assert_eq!(m.alive(), 2, "the old connections are leaked, not closed");
    // New connections, and the new timer fires deadlines.
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    assert_eq!((a.n, b.n), (3, 4));
    let t0 = Instant::now();
    let err = pool.get_timeout(Duration::from_millis(30)).await.unwrap_err();
    assert!(err.is_timeout());
    assert!(t0.elapsed() < Duration::from_millis(130), "{:?}", t0.elapsed());
    drop((a, b));
    // New connections close normally.
    pool.close();
    eventually(&t, "the new ones closed", || m.alive() == 2).await;
}
