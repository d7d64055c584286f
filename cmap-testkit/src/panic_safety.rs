//! Panic safety, one scenario per hook of user code the pool calls: a
//! panic in it loses no connection, no capacity and no waiter's deadline;
//! the connection involved is closed and counted, the panic is logged
//! once and counted in `Stats::panics_caught`, and the pool goes on.
//! Re-exported by [`scenarios`](crate::scenarios), so that
//! [`pool_scenarios!`](crate::pool_scenarios) runs them on every runtime.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cmap_async::{Event, GetError, Hook, Panicked, PoolState, Runtime};
use futures_lite::FutureExt;
use tracing::span::{Attributes, Id, Record};
use tracing::{Level, Metadata, Subscriber};

use crate::rt::{eventually, sleep, spawn};
use crate::{builder, panicked_in, Fake, FakePool};

/// Checks out until a connection comes, for up to two seconds: the pool
/// goes on after a panic, if after a clear and its reconnect backoff.
async fn served_again<R: Runtime>(pool: &FakePool<R>, t: &impl Runtime) -> u64 {
    for _ in 0..200 {
        if let Ok(c) = pool.get_timeout(Duration::from_millis(100)).await {
            return c.n;
        }
        sleep(t, Duration::from_millis(10)).await;
    }
    panic!("the pool never served again after a panic");
}

/// A callback that panics on every checkout and check-in misses those
/// events; everything else goes on: a waiter gets the connection given
/// back, waiters time out on time (the timer task delivers events too),
/// and the connection is reused.
pub async fn a_panicking_callback_loses_no_connection_and_no_waiter<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = (Fake::<R>::default(), T::default());
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let _sub = pool.on_event(|e| {
        if matches!(
            e,
            Event::ConnectionCheckedOut { .. }
                | Event::ConnectionCheckedIn { .. }
                | Event::ConnectionCheckOutFailed { .. }
        ) {
            panic!("callback panicked on purpose");
        }
    });
    let held = pool.get().await.unwrap();
    let p = pool.clone();
    let waiter = spawn(&t, async move {
        p.get_timeout(Duration::from_secs(2)).await.map(|c| c.n)
    });
    eventually(&t, "the waiter is queued", || pool.status().waiting == 1).await;
    drop(held);
    assert_eq!(waiter.await.unwrap(), 1, "handed over despite the panics");
    let held = pool.get().await.unwrap();
    for _ in 0..2 {
        let t0 = Instant::now();
        let err = pool.get_timeout(Duration::from_millis(30)).await.unwrap_err();
        assert!(err.is_timeout(), "{err}");
        assert!(t0.elapsed() < Duration::from_millis(1500), "{:?}", t0.elapsed());
    }
    drop(held);
    let s = pool.status();
    assert_eq!(
        (s.state, s.total, s.available, s.in_use),
        (PoolState::Ready, 1, 1, 0)
    );
    assert_eq!(m.alive(), 1);
    // 3 checkouts, 3 check-ins, 2 timeouts.
    assert_eq!(pool.stats().panics_caught, 8);
}

/// A `tracing` subscriber that panics on the pool's DEBUG messages and
/// records its ERROR ones (the caught panics).
#[derive(Clone, Default)]
struct PanickingLogs {
    errors: Arc<Mutex<usize>>,
}

impl Subscriber for PanickingLogs {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == cmap_async::LOG_TARGET
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == Level::ERROR {
            *self.errors.lock().unwrap() += 1;
        } else {
            panic!("tracing subscriber panicked on purpose");
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// A `tracing` subscriber that panics on every log message of the pool
/// costs those messages only; each panic is logged once, at ERROR.
pub async fn a_panicking_tracing_subscriber_loses_nothing<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = (Fake::<R>::default(), T::default());
    let logs = PanickingLogs::default();
    // This thread's: the inputs below are made, and their messages
    // logged, here.
    let _default = tracing::subscriber::set_default(logs.clone());
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    // Events stay built whatever the timer task sees on its own thread,
    // where this thread's subscriber does not record.
    let _sub = pool.on_event(|_| {});
    for _ in 0..3 {
        drop(pool.get().await.unwrap());
    }
    let s = pool.status();
    assert_eq!((s.total, s.available, s.in_use), (1, 1, 0));
    let caught = pool.stats().panics_caught;
    assert!(caught >= 6, "every checkout and check-in message: {caught}");
    assert_eq!(*logs.errors.lock().unwrap() as u64, caught, "each logged once");
}

/// A `connect` that panics fails the checkout that asked, naming the
/// panic; its slot is freed, and the pool serves again once it stops.
pub async fn a_panicking_connect_fails_its_checkout_and_frees_its_slot<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = (Fake::<R>::default(), T::default());
    m.connect_panics.store(true, Ordering::SeqCst);
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let t0 = Instant::now();
    let err = pool.get_timeout(Duration::from_secs(2)).await.unwrap_err();
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "failed at once, not at the deadline"
    );
    let panicked = panicked_in(&err).unwrap_or_else(|| panic!("the panic is the cause: {err:?}"));
    assert_eq!(panicked.hook, Hook::Connect);
    assert_eq!(panicked.message, "connect panicked on purpose");
    let s = pool.status();
    assert_eq!((s.total, s.pending), (0, 0), "the slot is free");
    assert_eq!(pool.stats().panics_caught, 1);
    m.connect_panics.store(false, Ordering::SeqCst);
    assert_eq!(served_again(&pool, &t).await, 1);
}

/// A `check` that panics failed: the connection is closed, and the
/// checkout goes on with another one (or fails, for one made for it).
pub async fn a_panicking_check_closes_its_connection<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = (Fake::<R>::default(), T::default());
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    drop(pool.get().await.unwrap()); // one idle connection
    m.check_panics.store(true, Ordering::SeqCst);
    // The idle one panics and is closed; so does the new one, made for
    // this checkout: the error says so.
    let err = pool.get().await.unwrap_err();
    assert!(matches!(err, GetError::CheckFailed(_)), "{err:?}");
    let panicked = err.connection_error().and_then(|e| e.downcast_ref::<Panicked>());
    assert_eq!(panicked.map(|p| p.hook), Some(Hook::Check), "{err:?}");
    eventually(&t, "both closed", || m.alive() == 0).await;
    let (s, st) = (pool.status(), pool.stats());
    assert_eq!((s.total, s.in_use), (0, 0));
    assert_eq!((st.returns_bad, st.panics_caught), (2, 2));
    m.check_panics.store(false, Ordering::SeqCst);
    assert_eq!(pool.get().await.unwrap().n, 3);
}

/// A `reset` that panics, at once or after it had to wait, or an
/// `is_broken` that panics: the connection is closed, and its slot serves
/// the next checkout.
pub async fn a_panicking_reset_or_is_broken_closes_the_connection<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = (Fake::<R>::default(), T::default());
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    m.reset_panics.store(true, Ordering::SeqCst);
    drop(pool.get().await.unwrap());
    assert_eq!(pool.status().in_use, 0, "given back before drop returns");
    // Now one that panics in the task it went on in.
    m.reset_us.store(20_000, Ordering::SeqCst);
    drop(pool.get().await.unwrap());
    let c = pool.get_timeout(Duration::from_secs(2)).await.unwrap();
    assert_eq!(c.n, 3, "a new connection in the closed ones' slot");
    m.reset_panics.store(false, Ordering::SeqCst);
    m.reset_us.store(0, Ordering::SeqCst);
    m.is_broken_panics.store(true, Ordering::SeqCst);
    drop(c);
    m.is_broken_panics.store(false, Ordering::SeqCst);
    eventually(&t, "all three closed", || m.alive() == 0).await;
    let (s, st) = (pool.status(), pool.stats());
    assert_eq!((s.total, s.in_use, s.available), (0, 0, 0));
    assert_eq!(
        (st.returns_bad, st.panics_caught, st.connections_closed),
        (3, 3, 3)
    );
    assert_eq!(pool.get().await.unwrap().n, 4);
}

/// A reset that never ends (a server that stopped answering) is given up
/// at the builder's reset timeout: the connection is closed and its slot
/// serves the next checkout.
pub async fn a_hanging_reset_is_given_up_at_the_reset_timeout<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = (Fake::<R>::default(), T::default());
    m.reset_us.store(60_000_000, Ordering::SeqCst);
    let pool = builder()
        .max_pool_size(1)
        .reset_timeout(Duration::from_millis(50))
        .build(m.clone())
        .unwrap();
    let t0 = Instant::now();
    drop(pool.get().await.unwrap());
    let c = pool.get_timeout(Duration::from_secs(2)).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(50), "{:?}", t0.elapsed());
    assert_eq!(c.n, 2);
    assert_eq!(pool.stats().returns_bad, 1);
    eventually(&t, "the first one closed", || m.alive() == 1).await;
}

/// A connection whose own `Drop` panics when the pool closes it: the panic
/// is caught and counted, the connections closed with it are still
/// dropped, and the pool serves on.
pub async fn a_panicking_connection_drop_is_caught<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = (Fake::<R>::default(), T::default());
    let pool = builder().max_pool_size(2).build(m.clone()).unwrap();
    m.drop_panics.store(true, Ordering::SeqCst);
    let mut broken = pool.get().await.unwrap();
    broken.mark_broken();
    drop(broken);
    eventually(&t, "the broken one dropped", || m.alive() == 0).await;
    eventually(&t, "its panic counted", || pool.stats().panics_caught == 1).await;
    // Two idle ones closed in one input: both dropped, both counted.
    let (a, b) = (pool.get().await.unwrap(), pool.get().await.unwrap());
    assert_eq!((a.n, b.n), (2, 3), "the pool serves on");
    drop((a, b));
    pool.close();
    eventually(&t, "both dropped", || m.alive() == 0).await;
    eventually(&t, "their panics counted", || pool.stats().panics_caught == 3).await;
    m.drop_panics.store(false, Ordering::SeqCst);
}

/// A guard dropped while its user's code unwinds from a panic is closed,
/// not reset and pooled (whatever it was doing stopped halfway), and the
/// pool serves on.
pub async fn a_guard_dropped_while_unwinding_is_closed_not_reset<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = (Fake::<R>::default(), T::default());
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let p = pool.clone();
    let task = spawn(&t, async move {
        let _conn = p.get().await.unwrap();
        panic!("user code panicked on purpose");
    });
    assert!(AssertUnwindSafe(task).catch_unwind().await.is_err());
    assert_eq!(m.resets.load(Ordering::SeqCst), 0, "no hook runs while unwinding");
    eventually(&t, "closed", || m.alive() == 0).await;
    let s = pool.status();
    assert_eq!((s.total, s.in_use), (0, 0));
    assert_eq!(pool.stats().returns_bad, 1);
    assert_eq!(pool.get().await.unwrap().n, 2);
}
