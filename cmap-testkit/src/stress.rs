//! Cancellation stress: thousands of `get()` futures dropped at random
//! points (queued, being served, just served, holding the connection),
//! with random clears, must leave every connection accounted for and the
//! whole capacity available.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cmap_async::{PoolState, PooledConnection, Runtime};
use futures_lite::FutureExt;

use crate::rt::{eventually, sleep, spawn, timeout};
use crate::{builder, Fake, FakePool};

/// The pool's `maxPoolSize`.
pub const MAX: u32 = 5;

fn tiny() -> Duration {
    Duration::from_micros(fastrand::u64(0..1500))
}

async fn hold<R: Runtime>(t: &impl Runtime, mut conn: PooledConnection<'_, Fake<R>>) {
    if fastrand::u8(0..10) == 0 {
        conn.mark_broken();
    }
    sleep(t, tiny()).await;
}

async fn one_client<R: Runtime, T: Runtime>(t: T, pool: FakePool<R>) {
    match fastrand::u8(0..5) {
        // Dropped by a timeout anywhere: queued, or while holding it.
        0 => {
            let _ = timeout(&t, tiny(), async {
                if let Ok(conn) = pool.get().await {
                    hold(&t, conn).await;
                }
            })
            .await;
        }
        // Dropped by losing a race to a random sleep.
        1 => {
            async {
                if let Ok(conn) = pool.get().await {
                    hold(&t, conn).await
                }
            }
            .or(sleep(&t, tiny()))
            .await
        }
        // Polled once with a waker that does nothing, then dropped.
        2 => {
            let mut get = pin!(pool.get());
            let polled = get.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            if let Poll::Ready(Ok(conn)) = polled {
                hold(&t, conn).await;
            }
        }
        // The pool's own deadline.
        3 => {
            if let Ok(conn) = pool.get_timeout(tiny()).await {
                hold(&t, conn).await;
            }
        }
        // Waits as long as it takes (bounded by the test's timeout).
        _ => {
            if let Ok(conn) = pool.get_timeout(Duration::from_secs(5)).await {
                hold(&t, conn).await;
            }
        }
    }
}

/// Runs `clients` clients on `T`'s tasks against a pool on `R` (connects
/// take up to 800 µs), with a clear every 400 clients, then checks that
/// nothing was lost: no connection in use, waiting or half-made, every
/// live connection the pool's, and `maxPoolSize` connections available
/// at once.
pub async fn dropped_checkouts_lose_no_connection_and_no_capacity<
    R: Runtime + Default,
    T: Runtime + Default,
>(
    clients: usize,
) {
    let t = T::default();
    let m = Fake::<R>::default();
    m.connect_us.store(800, Ordering::SeqCst);
    m.jitter.store(true, Ordering::SeqCst);
    let pool = builder()
        .max_pool_size(MAX)
        .max_connecting(2)
        .build(m.clone())
        .unwrap();
    let mut tasks = Vec::with_capacity(clients);
    let mut clears = Vec::new();
    for i in 0..clients {
        tasks.push(spawn(&t, one_client(t.clone(), pool.clone())));
        if i % 400 == 399 {
            let (p, t2) = (pool.clone(), t.clone());
            clears.push(spawn(&t, async move {
                p.clear(fastrand::bool()).unwrap();
                sleep(&t2, tiny()).await;
                p.ready().unwrap();
            }));
        }
        // Spread the clients out, so that most of them meet a ready pool
        // and the clears fall among busy checkouts.
        if i % 10 == 9 {
            sleep(&t, Duration::from_micros(500)).await;
        }
    }
    let run = async {
        for task in tasks.into_iter().chain(clears) {
            task.await;
        }
    };
    timeout(&t, Duration::from_secs(60), run)
        .await
        .expect("clients finished");

    // Settled: nothing in use, nobody waiting, nothing half-established.
    pool.ready().unwrap();
    eventually(&t, "settled", || {
        let s = pool.status();
        s.in_use == 0 && s.waiting == 0 && s.pending == 0
    })
    .await;
    let s = pool.status();
    assert_eq!(s.state, PoolState::Ready);
    assert!(s.total <= MAX as usize, "{s:?}");
    assert_eq!(s.total, s.available);
    eventually(&t, "every live connection is the pool's", || {
        m.alive() == pool.status().total as i64
    })
    .await;

    // The whole capacity is there: maxPoolSize connections at once.
    let all: Vec<_> = (0..MAX)
        .map(|_| pool.get_timeout(Duration::from_secs(2)))
        .collect();
    let mut held = Vec::new();
    for get in all {
        held.push(get.await.expect("full capacity is available"));
    }
    let s = pool.status();
    assert_eq!((s.in_use, s.total), (MAX as usize, MAX as usize));
    drop(held);
    let stats = pool.stats();
    eprintln!("{stats:#?}");
    assert!(
        stats.requests_failed < stats.requests / 2,
        "most checkouts met a ready pool"
    );
    assert!(
        stats.requests_cancelled > 0,
        "some checkouts were dropped while queued: {stats:?}"
    );
    assert_eq!(pool.status().available, MAX as usize);
}
