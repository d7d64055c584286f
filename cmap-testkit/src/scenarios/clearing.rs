//! Clearing the pool: queued checkouts failed, stale connections closed,
//! connections in use interrupted, and `reset_after_fork`'s clear.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::task::Context;
use std::time::{Duration, Instant};

use cmap_async::{CheckOutError, Clear, GetError, PoolState, Runtime, UsageError};

use super::{give_back_unreset, pool_of, runtimes, CountingWaker};
use crate::rt::{eventually, sleep, spawn, timeout};
use crate::{builder, Names};

/// Load-balanced mode through the adapter: each connection carries the
/// service its handshake reached (the manager's `service_id`), a clear
/// names its service (a plain one is refused there), and it makes stale
/// only that service's connections.
pub async fn a_load_balanced_clear_makes_only_its_services_connections_stale<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = runtimes::<R, T>();
    m.services.store(2, Ordering::SeqCst);
    let pool = builder()
        .max_pool_size(4)
        .configure(|o| o.load_balanced(true))
        .build(m.clone())
        .unwrap();
    let (a, b) = (pool.get().await.unwrap(), pool.get().await.unwrap());
    assert_eq!((a.n, b.n), (1, 2));
    assert_eq!(a.service_id(), m.service_of(1));
    assert_eq!(b.service_id(), m.service_of(2));
    assert_ne!(a.service_id(), b.service_id());
    let cleared = a.service_id();
    assert!(matches!(pool.clear(false), Err(UsageError::ClearMode(_))));
    drop(a);
    drop(b);
    pool.clear_with(Clear {
        service_id: cleared,
        ..Clear::default()
    })
    .unwrap();
    assert_eq!(
        pool.status().state,
        PoolState::Ready,
        "a load-balanced pool is not paused"
    );
    // Last in, first out: 2 (the other service's) is served, then 1 is
    // found stale and closed, and a new connection is made.
    let first = pool.get().await.unwrap();
    let second = pool.get().await.unwrap();
    assert_eq!((first.n, second.n), (2, 3));
    eventually(&t, "the stale connection closed", || m.alive() == 2).await;
    assert_eq!(pool.stats().connections_closed, 1);
}

/// A clear that interrupts, right after one that did not: its input
/// leaves nothing to do after the lock but the interruption (no idle
/// connection to close, the background run already scheduled), and the
/// guard still hears of it.
pub async fn a_second_clear_that_interrupts_wakes_the_guard<R: Runtime + Default, T: Runtime + Default>() {
    let (_, t, pool) = pool_of::<R, T>(1);
    let conn = pool.get().await.unwrap();
    // Waiting already when the clear comes: it must be woken.
    let mut interrupted = Box::pin(conn.interrupted());
    let waker = CountingWaker::new();
    let task_waker = waker.waker();
    let mut cx = Context::from_waker(&task_waker);
    assert!(interrupted.as_mut().poll(&mut cx).is_pending());
    pool.clear(false).unwrap();
    assert!(!conn.is_interrupted(), "a clear that does not interrupt");
    pool.clear(true).unwrap();
    eventually(&t, "the guard's future is woken", || waker.woken()).await;
    assert!(interrupted.as_mut().poll(&mut cx).is_ready());
    assert!(conn.is_interrupted());
}

/// A clear fails the queued checkouts (retryable), pauses the pool, and
/// closes the stale connection when it comes back.
pub async fn clear_fails_waiters_and_closes_stale_connections<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t, pool) = pool_of::<R, T>(1);
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

/// A clear interrupts the connections in use then, not those checked out
/// after it, even while an interrupted one is still held.
pub async fn only_the_connections_in_use_at_the_clear_are_interrupted<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (_m, _t, pool) = pool_of::<R, T>(2);
    let old = pool.get().await.unwrap();
    pool.clear(true).unwrap();
    pool.ready().unwrap();
    let new = pool.get().await.unwrap();
    assert!(old.is_interrupted());
    assert!(!new.is_interrupted(), "checked out after the clear");
    assert!(format!("{:?}", old.interrupted()).contains(&format!("{:?}", old.connection_id())));
    drop(old);
    assert!(!new.is_interrupted());
}

/// `interrupted()` resolves when a clear interrupts the connection.
pub async fn interrupted_future_resolves_on_an_interrupting_clear<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t, pool) = pool_of::<R, T>(2);
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
    give_back_unreset(&m, lent, "no reset");
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
