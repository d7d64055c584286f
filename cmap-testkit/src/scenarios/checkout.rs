//! Checking out and in: a connection reused, one broken or detached, and
//! the manager's reset and check that run around them.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use cmap_async::{GetError, PoolState, Runtime};

use super::{pool_of, runtimes};
use crate::rt::eventually;
use crate::{builder, CloseGate, Names, Unchecked};

/// A connection is checked out, checked in before `drop` returns, and
/// reused.
pub async fn check_out_check_in_and_reuse<R: Runtime + Default, T: Runtime + Default>() {
    let (_, _t, pool) = pool_of::<R, T>(2);
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

/// Marked broken, or found broken by the manager, a connection is closed.
pub async fn broken_connections_are_closed_not_pooled<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t, pool) = pool_of::<R, T>(3);
    let mut a = pool.get().await.unwrap();
    assert!(!a.is_marked_broken());
    assert_eq!(
        format!("{a:?}"),
        "PooledConnection { connection_id: Some(ConnectionId(1)), broken: false, .. }"
    );
    a.mark_broken();
    assert!(a.is_marked_broken());
    assert!(format!("{a:?}").contains("broken: true"), "{a:?}");
    drop(a);
    let mut b = pool.get().await.unwrap();
    assert_eq!(b.n, 2, "the broken one was not reused");
    b.broken = true; // the manager's is_broken sees this
    drop(b);
    eventually(&t, "closed", || m.alive() == 0).await;
    assert_eq!(pool.stats().returns_bad, 2);
    assert_eq!(pool.status().total, 0);
}

/// A connection the pool closes is dropped off the path of the thread that
/// gave it back, and never under the pool's lock: dropping may be I/O (a
/// goodbye message, a TLS close). Its drop here waits at a gate that opens
/// only after `drop(guard)` returned.
pub async fn a_closed_connection_is_dropped_off_the_callers_path<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t, pool) = pool_of::<R, T>(1);
    let gate = Arc::new(CloseGate::default());
    *m.close_gate.lock().unwrap() = Some(gate.clone());
    let mut conn = pool.get().await.unwrap();
    conn.mark_broken();
    drop(conn);
    gate.open();
    eventually(&t, "closed", || m.alive() == 0).await;
    assert_eq!(
        gate.blocked.load(Ordering::SeqCst),
        0,
        "a close ran on the thread that gave the connection back"
    );
}

/// `detach` takes the connection out of the pool for good.
pub async fn detach_takes_the_connection_out_of_the_pool<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t, pool) = pool_of::<R, T>(1);
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
    let (m, _t, pool) = pool_of::<R, T>(2);
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

/// A manager that says it does not check (`CHECKS = false`) is never
/// checked: a new connection and an idle one are handed out as they are,
/// though their check would fail.
pub async fn a_manager_that_does_not_check_is_never_checked<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    m.check_fails.store(true, Ordering::SeqCst);
    let pool = cmap_async::Pool::<_, R>::builder()
        .address("fake:27017")
        .max_pool_size(1)
        .build(Unchecked(m.clone()))
        .unwrap();
    let c = pool.get().await.expect("a new connection, not checked");
    assert_eq!(c.n, 1);
    drop(c);
    let c = pool.get().await.expect("the idle connection, not checked");
    assert_eq!(c.n, 1, "reused, not closed");
    drop(c);
    assert_eq!(pool.stats().returns_bad, 0);
}

/// A `get()` dropped while its connection is under the manager's check
/// gives it back marked errored: the connection's state is unknown, so it
/// is closed, not pooled, and no capacity is lost.
pub async fn a_get_dropped_during_its_check_closes_the_connection<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t, pool) = pool_of::<R, T>(1);
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
