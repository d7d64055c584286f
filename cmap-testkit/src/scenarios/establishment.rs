//! Establishing connections when the server will not have them: a connect
//! refused, credentials denied, a connect that never finishes; what the
//! checkout sees, whether the pool is cleared, and how it recovers.

use std::error::Error as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cmap_async::{CheckOutError, EstablishDroppedError, GetError, PoolState, Runtime};

use super::runtimes;
use crate::rt::{eventually, sleep, spawn, Shedding};
use crate::{assert_connect_timed_out, builder, Fake, FakeError};

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

/// An establishment task dropped unpolled (its runtime shutting down)
/// still reports: the core frees its slot, the checkout it was for fails
/// naming why, and the pool serves again once it is back to ready.
pub async fn an_establishment_dropped_before_it_reported_frees_its_slot<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let rt = Shedding::<R>::default();
    let m = Fake::<Shedding<R>>::default();
    let pool = builder()
        .max_pool_size(1)
        .build_on(m.clone(), rt.clone())
        .unwrap();
    rt.shed(true);
    let err = pool.get_timeout(Duration::from_secs(1)).await.unwrap_err();
    rt.shed(false);
    let dropped = err
        .connection_error()
        .and_then(|e| e.downcast_ref::<EstablishDroppedError>());
    assert!(dropped.is_some(), "{err:?}");
    assert_eq!(pool.status().pending, 0, "the slot is free");
    let t = T::default();
    eventually(&t, "ready again", || pool.status().state == PoolState::Ready).await;
    assert_eq!(pool.get().await.unwrap().n, 1);
}

/// A connect started for a checkout that then timed out, and that nobody
/// else needs, is given up at once (spec: the pool closes it with reason
/// `error`), not left running until its connect timeout (10 s here).
pub async fn a_connect_nobody_needs_after_its_checkout_timed_out_is_aborted<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = runtimes::<R, T>();
    m.hang.store(true, Ordering::SeqCst);
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let err = pool.get_timeout(Duration::from_millis(30)).await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(pool.status().pending, 0, "the pool gave it up");
    eventually(&t, "the connect is stopped", || {
        m.connects_dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(m.alive(), 0);
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
    assert_connect_timed_out(&err, Duration::from_millis(50));
    assert!(err.has_label("SystemOverloadedError"), "a network timeout");
}
