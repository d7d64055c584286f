//! A pool's life: closed, kept at its minimum in the background, dropped,
//! started paused, and refused at build for a bad address or option.

use std::time::{Duration, Instant};

use cmap_async::{BuildError, CheckOutError, GetError, Pool, PoolState, Runtime};

use super::{pool_of, runtimes};
use crate::rt::{eventually, spawn};
use crate::{builder, Fake};

/// Close fails the queued checkouts at once, closes idle connections, and
/// closes checked-out ones when they come back.
pub async fn close_fails_waiters_closes_idle_and_returned_connections<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t, pool) = pool_of::<R, T>(2);
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

/// A connection string that names one host gives the pool its address;
/// `address()`, before or after it, wins; several hosts give none.
pub async fn the_connection_strings_one_host_is_the_address<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let build = |b: cmap_async::PoolBuilder<Fake<R>, R>| b.start_paused(true).build(m.clone()).unwrap();
    let address = |pool: &Pool<Fake<R>, R>| pool.address().to_string();
    let uri = "mongodb://db.example:27018/?maxPoolSize=3";
    assert_eq!(
        address(&build(Pool::builder().connection_string(uri))),
        "db.example:27018"
    );
    assert_eq!(
        address(&build(Pool::builder().address("a:1").connection_string(uri))),
        "a:1"
    );
    assert_eq!(
        address(&build(Pool::builder().connection_string(uri).address("a:1"))),
        "a:1"
    );
    let several = Pool::<Fake<R>, R>::builder()
        .connection_string("mongodb://a,b/")
        .build(m.clone());
    assert_eq!(several.unwrap_err(), BuildError::MissingAddress);
}
