//! The wait queue: a checkout waiting for a connection given back, the
//! timeouts that bound the wait (fired neither early nor late, however
//! they are set), and the clocks that time it.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use cmap_async::Runtime;

use super::{pool_of, runtimes, CountingWaker};
use crate::rt::{eventually, sleep, spawn, timeout, FrozenCoarse};
use crate::{builder, Fake};

/// A queued checkout gets the connection given back.
pub async fn a_waiter_gets_the_connection_given_back<R: Runtime + Default, T: Runtime + Default>() {
    let (_, t, pool) = pool_of::<R, T>(1);
    let held = pool.get().await.unwrap();
    let p = pool.clone();
    let waiter = spawn(&t, async move { p.get().await.map(|c| c.n) });
    eventually(&t, "the waiter is queued", || pool.status().waiting == 1).await;
    drop(held);
    assert_eq!(waiter.await.unwrap(), 1);
}

/// A queued checkout polled again with another waker (its future moved
/// to another task, or a `select!` that polls it from a new context) is
/// woken through the last waker it was polled with, not the first.
pub async fn a_waiter_polled_with_a_new_waker_is_woken_through_it<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (_, t, pool) = pool_of::<R, T>(1);
    let held = pool.get().await.unwrap();
    let mut waiting = Box::pin(pool.get());
    let (first, last) = (CountingWaker::new(), CountingWaker::new());
    let last_waker = last.waker();
    let first_poll = waiting.as_mut().poll(&mut Context::from_waker(&first.waker()));
    assert!(first_poll.is_pending(), "the only connection is held");
    let polled_again = waiting.as_mut().poll(&mut Context::from_waker(&last_waker));
    assert!(polled_again.is_pending(), "still held");
    drop(held);
    eventually(&t, "the last waker is woken", || last.woken()).await;
    let Poll::Ready(Ok(conn)) = waiting.as_mut().poll(&mut Context::from_waker(&last_waker)) else {
        panic!("a woken waiter has its connection");
    };
    assert_eq!(conn.n, 1);
}

/// `get_timeout` fails neither early nor late.
pub async fn get_timeout_fires_on_time<R: Runtime + Default, T: Runtime + Default>() {
    let (_, _t, pool) = pool_of::<R, T>(1);
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

/// An idle pool's timer task sleeps until its next deadline (the
/// background run, a second away by default): it does not wake every
/// millisecond. Each wake reads the precise clock, which counts them.
pub async fn an_idle_pools_timer_sleeps_until_its_next_deadline<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let rt = FrozenCoarse::<R>::default();
    let pool = builder()
        .max_pool_size(2)
        .build_on(Fake::<FrozenCoarse<R>>::default(), rt.clone())
        .unwrap();
    drop(pool.get().await.unwrap());
    let t = T::default();
    sleep(&t, Duration::from_millis(20)).await;
    let before = rt.precise_reads();
    sleep(&t, Duration::from_millis(200)).await;
    let reads = rt.precise_reads() - before;
    assert!(reads < 20, "{reads} precise clock reads in 200 ms of idling");
    let debug = format!("{pool:?}");
    assert!(
        debug.starts_with("Pool { address: ") && debug.contains("status: Status { state: Ready"),
        "{debug}"
    );
}

/// With no background runs (maintenance off), the timer task that served
/// a checkout's deadline has nothing scheduled after it: it must still
/// be there for the next checkout's.
pub async fn after_its_last_deadline_the_timer_stays_for_the_next<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder()
        .max_pool_size(1)
        .configure(|o| o.maintenance_interval(None))
        .build(m)
        .unwrap();
    let held = pool.get().await.unwrap();
    for round in 0..2 {
        let ended = timeout(
            &t,
            Duration::from_secs(2),
            pool.get_timeout(Duration::from_millis(50)),
        )
        .await
        .unwrap_or_else(|| panic!("round {round}: the checkout ends at its deadline"));
        assert!(ended.is_err_and(|e| e.is_timeout()), "round {round}");
    }
    drop(held);
}

/// With no background runs (maintenance off) the timer task sleeps with
/// no deadline at all, and still serves the deadlines that come: 300
/// checkouts timing out together (more than one wake of the timer drains)
/// all fail on time.
pub async fn without_background_runs_the_timer_still_serves_a_burst_of_deadlines<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t) = runtimes::<R, T>();
    let pool = Arc::new(
        builder()
            .max_pool_size(1)
            .configure(|o| o.maintenance_interval(None))
            .build(m)
            .unwrap(),
    );
    let held = pool.get().await.unwrap();
    sleep(&t, Duration::from_millis(30)).await;
    let t0 = Instant::now();
    let waiters: Vec<_> = (0..300)
        .map(|_| {
            let pool = pool.clone();
            spawn(&t, async move {
                pool.get_timeout(Duration::from_millis(50)).await.err()
            })
        })
        .collect();
    for waiter in waiters {
        let err = timeout(&t, Duration::from_secs(5), waiter)
            .await
            .expect("every checkout ends at its deadline");
        assert!(err.is_some_and(|e| e.is_timeout()));
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    drop(held);
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
    let (_, t, pool) = pool_of::<R, T>(1);
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

/// A zero timeout takes an idle connection, or fails at once.
pub async fn a_zero_timeout_takes_an_available_connection_or_fails_at_once<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (_, _t, pool) = pool_of::<R, T>(1);
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

/// Drives `futures` to their ends together on the calling task (a
/// thread-per-task runtime would start one thread each), and returns
/// their outputs in order.
async fn all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(&mut outputs) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future ended"))
        .collect()
}

/// Twenty thousand checkouts with 1 ms deadlines against an exhausted
/// pool: each times out, the wait queue is empty afterwards, and the
/// connection given back is served at once to the next checkout (a zero
/// timeout: it takes an available connection or fails).
pub async fn a_flood_of_short_deadlines_leaves_the_queue_empty<R: Runtime + Default, T: Runtime + Default>() {
    const WAVES: usize = 20;
    const PER_WAVE: usize = 1_000;
    let (_, _t, pool) = pool_of::<R, T>(1);
    let held = pool.get().await.unwrap();
    for _ in 0..WAVES {
        let wave = (0..PER_WAVE)
            .map(|_| pool.get_timeout(Duration::from_millis(1)))
            .collect();
        for outcome in all(wave).await {
            let err = outcome.expect_err("the only connection is held");
            assert!(err.is_timeout(), "{err}");
        }
    }
    assert_eq!(pool.status().waiting, 0);
    assert_eq!(pool.stats().requests_timed_out, (WAVES * PER_WAVE) as u64);
    drop(held);
    let conn = pool
        .get_timeout(Duration::ZERO)
        .await
        .expect("the returned connection, at once");
    assert_eq!(conn.n, 1);
}

/// Ten thousand checkouts dropped while they wait leave no waiter
/// behind, and the connection given back goes to the next checkout at
/// once, not to a cancelled one.
pub async fn ten_thousand_cancelled_waiters_leave_nothing_behind<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    const WAITERS: usize = 10_000;
    let (_, t, pool) = pool_of::<R, T>(1);
    let held = pool.get().await.unwrap();
    let waker = CountingWaker::new().waker();
    let mut waiting: Vec<_> = (0..WAITERS).map(|_| Box::pin(pool.get())).collect();
    for checkout in &mut waiting {
        assert!(checkout
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
    }
    assert_eq!(pool.status().waiting, WAITERS);
    drop(waiting);
    eventually(&t, "every waiter cancelled", || pool.status().waiting == 0).await;
    assert_eq!(pool.stats().requests_cancelled, WAITERS as u64);
    drop(held);
    let conn = pool
        .get_timeout(Duration::ZERO)
        .await
        .expect("the returned connection, at once");
    assert_eq!(conn.n, 1);
}
