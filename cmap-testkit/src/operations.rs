//! The operational controls of a running pool, beyond the spec: resize,
//! graceful close, waiting until ready, checking idle connections, leak
//! detection and metrics. Re-exported by [`scenarios`](crate::scenarios),
//! so that [`pool_scenarios!`](crate::pool_scenarios) runs them on every
//! runtime.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cmap_async::{BuildError, CheckOutError, ConnectionId, GetError, Runtime};

use crate::rt::{eventually, sleep, spawn};
use crate::scenarios::{give_back_unreset, pool_of, runtimes};
use crate::{builder, Names};

/// A running pool resized: growing serves a waiter at once, shrinking
/// closes the idle connection and leaves the one in use alone, and raising
/// the minimum opens connections in the background.
pub async fn resize_grows_and_shrinks_a_running_pool<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let names = Names::default();
    let pool = builder().max_pool_size(1).build(m.clone()).unwrap();
    let _sub = pool.on_event(names.callback());
    let held = pool.get().await.unwrap();
    let p = pool.clone();
    let waiter = spawn(&t, async move {
        p.get_timeout(Duration::from_secs(2)).await.map(|c| c.n)
    });
    eventually(&t, "the waiter is queued", || pool.status().waiting == 1).await;
    pool.resize(0, 3).unwrap();
    assert_eq!(waiter.await.unwrap(), 2, "served by a new connection at once");
    assert_eq!(pool.status().available, 1);
    pool.resize(0, 1).unwrap();
    eventually(&t, "the idle one closed", || m.alive() == 1).await;
    let s = pool.status();
    assert_eq!(
        (s.total, s.in_use, s.available),
        (1, 1, 0),
        "the one in use is left alone"
    );
    drop(held);
    assert_eq!(pool.status().available, 1, "within the new size: pooled again");
    pool.resize(2, 3).unwrap();
    eventually(&t, "populated to the new minimum", || {
        pool.status().available == 2
    })
    .await;
    assert_eq!(pool.options().min_pool_size(), 2);
    assert!(pool.resize(4, 3).is_err());
    let resized = names
        .take()
        .iter()
        .filter(|n| **n == "ConnectionPoolResized")
        .count();
    assert_eq!(resized, 3);
}

/// `close_gracefully` fails queued and new checkouts at once, waits for
/// connections in use to come back, and forces the ones still out at its
/// timeout; with everything back it returns before the timeout.
pub async fn close_gracefully_waits_for_connections_in_use_then_forces_the_rest<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, t, pool) = pool_of::<R, T>(2);
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap().into_owned();
    let p = pool.clone();
    let queued = spawn(&t, async move {
        p.get_timeout(Duration::from_secs(2)).await.map(|c| c.n)
    });
    eventually(&t, "the waiter is queued", || pool.status().waiting == 1).await;
    let p = pool.clone();
    let t0 = Instant::now();
    let closing = spawn(&t, async move {
        p.close_gracefully(Duration::from_millis(1500)).await
    });
    let err = queued.await.unwrap_err();
    assert!(
        matches!(err, GetError::CheckOut(CheckOutError::PoolClosed { .. })),
        "{err:?}"
    );
    assert!(
        t0.elapsed() < Duration::from_millis(1000),
        "failed at once, not at the timeout"
    );
    assert!(
        pool.get_timeout(Duration::from_secs(1)).await.is_err(),
        "closed to new checkouts"
    );
    drop(a); // comes back in time: closed, not forced
    eventually(&t, "the returned one closed", || m.alive() == 1).await;
    let forced = closing.await;
    assert!(t0.elapsed() >= Duration::from_millis(1500), "{:?}", t0.elapsed());
    assert_eq!(forced, 1, "the one still out");
    assert!(b.is_interrupted());
    give_back_unreset(&m, b, "no reset for a forced one");
    eventually(&t, "all closed", || m.alive() == 0).await;
    assert_eq!(pool.stats().connections_lost, 1);

    // Everything back before the timeout, given back or detached: it
    // returns then, forcing none.
    let (m, t) = runtimes::<R, T>();
    for detach in [false, true] {
        let pool = builder().build(m.clone()).unwrap();
        let c = pool.get().await.unwrap().into_owned();
        let p = pool.clone();
        let t0 = Instant::now();
        let closing = spawn(
            &t,
            async move { p.close_gracefully(Duration::from_secs(10)).await },
        );
        sleep(&t, Duration::from_millis(20)).await;
        let raw = detach.then(|| c.detach());
        assert_eq!(closing.await, 0, "detached: {detach}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        drop(raw);
        eventually(&t, "closed", || m.alive() == 0).await;
    }
}

/// Whole options given to the builder are the pool's, as they are; a
/// reconnect policy set on the builder is the pool's too.
pub async fn the_builders_options_are_the_pools<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let options = cmap_async::PoolOptions::builder()
        .max_pool_size(3)
        .max_connecting(1)
        .build()
        .unwrap();
    let pool = builder().options(options.clone()).build(m.clone()).unwrap();
    let used = pool.options();
    assert_eq!(
        (used.max_pool_size(), used.max_connecting(), used.reconnect()),
        (3, 1, options.reconnect())
    );
    assert!(builder()
        .build(m.clone())
        .unwrap()
        .options()
        .reconnect()
        .is_some());
    let pool = builder().reconnect(None).build(m).unwrap();
    assert_eq!(pool.options().reconnect(), None, "a cleared pool stays paused");
}

/// `wait_ready` waits until minPoolSize connections are open, and fails
/// at its timeout naming the cause when the server refuses; with
/// minPoolSize 0 one checkout proves the server answers; `build_and_wait`
/// fails the build then.
pub async fn wait_ready_waits_for_the_minimum_and_names_the_cause<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, _t) = runtimes::<R, T>();
    m.connect_us.store(30_000, Ordering::SeqCst);
    let pool = builder().min_pool_size(2).build(m.clone()).unwrap();
    let t0 = Instant::now();
    pool.wait_ready(Duration::from_secs(2)).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(30), "{:?}", t0.elapsed());
    assert_eq!(pool.status().available, 2);

    m.connect_us.store(0, Ordering::SeqCst);
    m.refuse.store(true, Ordering::SeqCst);
    let pool = builder().min_pool_size(1).build(m.clone()).unwrap();
    let t0 = Instant::now();
    let err = pool.wait_ready(Duration::from_millis(200)).await.unwrap_err();
    assert!(t0.elapsed() >= Duration::from_millis(200), "{:?}", t0.elapsed());
    assert_eq!(err.wanted, 1);
    assert!(err.to_string().contains("connection refused"), "{err}");
    assert!(err.last_error().is_some());

    let none = builder().build(m.clone()).unwrap();
    assert!(none.wait_ready(Duration::from_millis(100)).await.is_err());
    let err = builder()
        .min_pool_size(1)
        .build_and_wait(m.clone(), Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(matches!(err, BuildError::NotReady(_)), "{err:?}");
    m.refuse.store(false, Ordering::SeqCst);
    none.wait_ready(Duration::from_secs(2)).await.unwrap();
    assert_eq!(
        none.status().available,
        1,
        "the proving checkout's connection stays idle"
    );
}

/// `wait_ready` counts the connections in use as open: a pool of
/// minPoolSize 2 with one of them checked out is ready once the other is
/// made, not when two are idle.
pub async fn wait_ready_counts_connections_in_use<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder().min_pool_size(2).build(m).unwrap();
    let held = pool.get().await.unwrap();
    pool.wait_ready(Duration::from_secs(2)).await.unwrap();
    let status = pool.status();
    assert_eq!((status.in_use, status.available), (1, 1));
    drop(held);
}

/// `check_idle` checks every idle connection: the good ones go back, the
/// ones that fail or outlast the timeout are closed.
pub async fn check_idle_closes_the_idle_connections_that_fail<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t, pool) = pool_of::<R, T>(3);
    let held: Vec<_> = [pool.get().await, pool.get().await, pool.get().await]
        .into_iter()
        .map(Result::unwrap)
        .collect();
    drop(held);
    let report = pool.check_idle(Duration::from_secs(1)).await;
    assert_eq!((report.checked, report.closed), (3, 0));
    assert_eq!(pool.status().available, 3, "all back");
    m.check_fails.store(true, Ordering::SeqCst);
    let report = pool.check_idle(Duration::from_secs(1)).await;
    assert_eq!((report.checked, report.closed), (3, 3));
    eventually(&t, "all closed", || m.alive() == 0).await;
    m.check_fails.store(false, Ordering::SeqCst);
    drop(pool.get().await.unwrap());
    m.check_us.store(60_000_000, Ordering::SeqCst);
    let t0 = Instant::now();
    let report = pool.check_idle(Duration::from_millis(100)).await;
    assert_eq!((report.checked, report.closed), (1, 1), "outlasted the timeout");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(pool.status().total, 0);
}

/// Leak detection: with a 50 ms threshold, a guard given back in time is
/// not reported; one held past it is reported once (a WARN naming it, how
/// long it has been held and the line of this file where `get()` was
/// called, and `Stats::leaks_detected`), however long it is then held, and
/// noted once at INFO when given back.
pub async fn a_guard_held_past_the_leak_threshold_is_reported_once<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    static POOLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let (m, t) = runtimes::<R, T>();
    let notices = crate::logs::notices();
    // Its own host: the scenarios of other runtimes log to the same
    // global subscriber meanwhile.
    let host = format!(
        "leak-{}-{}",
        std::process::id(),
        POOLS.fetch_add(1, Ordering::Relaxed)
    );
    let pool = builder()
        .address(format!("{host}:27017").as_str())
        .max_pool_size(2)
        .leak_detection_threshold(Duration::from_millis(50))
        .build(m)
        .unwrap();
    drop(pool.get().await.unwrap()); // back in time: nothing
    let line = line!() + 1;
    let held = pool.get().await.unwrap();
    let id = held.connection_id();
    let t0 = Instant::now();
    eventually(&t, "the leak is reported", || pool.stats().leaks_detected == 1).await;
    assert!(t0.elapsed() < Duration::from_millis(1000), "{:?}", t0.elapsed());
    sleep(&t, Duration::from_millis(120)).await; // past two more thresholds
    assert_eq!(pool.stats().leaks_detected, 1, "reported once");
    drop(held);
    // An owned guard held past it too, given back after the pool closed.
    let line_owned = line!() + 1;
    let owned = pool.get_owned().await.unwrap();
    eventually(&t, "the second leak is reported", || {
        pool.stats().leaks_detected == 2
    })
    .await;
    pool.close();
    drop(owned);
    let logged = notices.of_host(&host);
    let summary: Vec<(&str, &str)> = logged
        .iter()
        .map(|f| (f["level"].as_str(), f["driverConnectionId"].as_str()))
        .collect();
    assert_eq!(
        summary,
        [("WARN", "1"), ("INFO", "1"), ("WARN", "1"), ("INFO", "1")],
        "{logged:#?}"
    );
    assert_eq!(id, ConnectionId(1));
    for (fields, line) in logged.chunks(2).zip([line, line_owned]) {
        let (warn, info) = (&fields[0], &fields[1]);
        let here = format!("operations.rs:{line}:");
        assert!(warn["location"].contains(&here), "{here} in {warn:?}");
        assert!(warn["message"].contains(&here), "{here} in {warn:?}");
        assert!(
            warn["message"].contains("leak detection threshold of 50 ms"),
            "{warn:?}"
        );
        let held_ms: f64 = warn["durationMS"].parse().unwrap();
        assert!(held_ms >= 50.0, "{warn:?}");
        assert_eq!(warn["thresholdMS"], "50.0");
        assert!(info["message"].contains("was returned after"), "{info:?}");
        assert_eq!(info["location"], warn["location"]);
        let back_ms: f64 = info["durationMS"].parse().unwrap();
        assert!(back_ms >= held_ms, "{info:?}");
    }
}

/// Metrics export: a pool built with `.metrics(true)` inside
/// `metrics::with_local_recorder` writes its gauges, counters and
/// histograms there, labelled with its address, on whatever thread its
/// events are delivered.
pub async fn metrics_count_checkouts_through_the_facade<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let rec = crate::recorder::Recording::default();
    let pool = metrics::with_local_recorder(&rec, || {
        builder().max_pool_size(2).metrics(true).build(m.clone()).unwrap()
    });
    let a = "address=fake:27017";
    let gauges = |rec: &crate::recorder::Recording| rec.pool_gauges("fake:27017");
    let first = pool.get().await.unwrap();
    let mut second = pool.get().await.unwrap();
    assert_eq!(gauges(&rec), [0.0, 2.0, 0.0, 2.0, 0.0]);
    drop(first);
    assert_eq!(gauges(&rec), [1.0, 1.0, 0.0, 2.0, 0.0]);
    let again = pool.get().await.unwrap();
    // Both out: a checkout that times out.
    let err = pool.get_timeout(Duration::from_millis(20)).await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
    // One waiting, seen while it waits.
    let p = pool.clone();
    let waiter = spawn(&t, async move {
        p.get_timeout(Duration::from_secs(5)).await.map(|c| c.n)
    });
    eventually(&t, "the waiting gauge", || {
        rec.gauge(&format!("cmap_checkouts_waiting{{{a}}}")) == Some(1.0)
    })
    .await;
    drop(again);
    assert_eq!(waiter.await.unwrap(), 1);
    second.mark_broken();
    drop(second);
    assert_eq!(gauges(&rec), [1.0, 0.0, 0.0, 1.0, 0.0]);
    pool.close();
    assert_eq!(gauges(&rec), [0.0, 0.0, 0.0, 0.0, 0.0]);

    assert_eq!(rec.counter(&format!("cmap_connections_opened_total{{{a}}}")), 2);
    assert_eq!(rec.counter(&format!("cmap_checkouts_total{{{a}}}")), 4);
    assert_eq!(
        rec.counter(&format!("cmap_checkout_failures_total{{{a},reason=timeout}}")),
        1
    );
    assert_eq!(rec.counter(&format!("cmap_checkout_timeouts_total{{{a}}}")), 1);
    assert_eq!(
        rec.counter(&format!("cmap_connections_closed_total{{{a},reason=error}}")),
        1
    );
    assert_eq!(
        rec.counter(&format!("cmap_connections_closed_total{{{a},reason=poolClosed}}")),
        1
    );
    assert_eq!(
        rec.histogram(&format!("cmap_connection_connect_seconds{{{a}}}"))
            .len(),
        2
    );
    let waits = rec.histogram(&format!("cmap_checkout_wait_seconds{{{a}}}"));
    assert_eq!(waits.len(), 4);
    assert!(waits.iter().all(|w| *w >= 0.0));
    let uses = rec.histogram(&format!("cmap_connection_use_seconds{{{a}}}"));
    assert_eq!(uses.len(), 4);
    // `second` was out across the 20 ms checkout that timed out.
    assert!(uses.iter().any(|u| *u >= 0.019), "{uses:?}");
    // Nothing else was registered under another name.
    assert!(
        rec.keys().iter().all(|k| k.starts_with("cmap_") && k.contains(a)),
        "{:?}",
        rec.keys()
    );
    // Each is described for the exporter's HELP line; durations in seconds.
    for key in rec.keys() {
        let name = key.split('{').next().unwrap_or_default();
        let (unit, help) = rec
            .description(name)
            .unwrap_or_else(|| panic!("{name} described"));
        assert!(!help.is_empty(), "{name}");
        assert_eq!(
            unit == Some(metrics::Unit::Seconds),
            name.ends_with("_seconds"),
            "{name}: {unit:?}"
        );
    }

    // Failed establishments, by kind, on a pool of their own: refused
    // (network: labelled overloaded, the checkout waits to its deadline),
    // then denied (authentication: the checkout fails).
    let rec = crate::recorder::Recording::default();
    let pool = metrics::with_local_recorder(&rec, || builder().metrics(true).build(m.clone()).unwrap());
    m.refuse.store(true, Ordering::SeqCst);
    let refused = pool.get_timeout(Duration::from_millis(30)).await.unwrap_err();
    assert!(refused.is_timeout(), "{refused}");
    m.refuse.store(false, Ordering::SeqCst);
    m.deny.store(true, Ordering::SeqCst);
    assert!(pool.get_timeout(Duration::from_secs(5)).await.is_err());
    m.deny.store(false, Ordering::SeqCst);
    let failures = |kind: &str| {
        rec.counter(&format!(
            "cmap_connection_establish_failures_total{{{a},kind={kind}}}"
        ))
    };
    assert!(failures("network") >= 1, "{}", failures("network"));
    assert_eq!(failures("authentication"), 1);
    assert_eq!(failures("other"), 0);
}
