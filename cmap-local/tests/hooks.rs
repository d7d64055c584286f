//! What cmap-local shares with every adapter around user code: panics in
//! the manager's hooks and in event callbacks caught (the hook failed, no
//! slot lost), leak detection, and the metrics export.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};

use cmap_local::{
    ConnectionId, EstablishErrorKind, Event, GetError, Hook, ManageConnection, Panicked, Pool, PoolState,
    TokioLocal,
};
use cmap_testkit::logs::{notices, Fields};
use cmap_testkit::panicked_in;

/// The hook that panics next, once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Panic {
    Connect,
    /// `connect`, after the connection has had to wait.
    ConnectLater,
    ServiceId,
    Check,
    Reset,
    /// `reset`, after it has had to wait (in its task).
    ResetLater,
    IsBroken,
}

/// Connections numbered from 1, `Rc`s (not `Send`); every hook can be made
/// to panic once.
#[derive(Clone, Default)]
struct Hooks {
    made: Rc<Cell<u32>>,
    next: Rc<Cell<Option<Panic>>>,
}

impl Hooks {
    fn panic_in(&self, hook: Panic) {
        self.next.set(Some(hook));
    }

    fn panics(&self, hook: Panic) -> bool {
        if self.next.get() == Some(hook) {
            self.next.set(None);
            return true;
        }
        false
    }
}

impl ManageConnection for Hooks {
    type Connection = Rc<u32>;
    type Error = std::io::Error;

    fn connect(&self) -> impl Future<Output = Result<Rc<u32>, std::io::Error>> {
        if self.panics(Panic::Connect) {
            panic!("connect: boom");
        }
        let later = self.panics(Panic::ConnectLater);
        let made = self.made.clone();
        async move {
            tokio::task::yield_now().await;
            if later {
                panic!("connect later: boom");
            }
            made.set(made.get() + 1);
            Ok(Rc::new(made.get()))
        }
    }

    fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(e)
    }

    fn service_id(&self, _: &Rc<u32>) -> Option<cmap_local::ServiceId> {
        if self.panics(Panic::ServiceId) {
            panic!("service_id: boom");
        }
        None
    }

    fn check(&self, _: &mut Rc<u32>, _: Option<Instant>) -> impl Future<Output = Result<(), std::io::Error>> {
        if self.panics(Panic::Check) {
            panic!("check: boom");
        }
        std::future::ready(Ok(()))
    }

    fn reset(&self, _: &mut Rc<u32>) -> impl Future<Output = Result<(), std::io::Error>> {
        if self.panics(Panic::Reset) {
            panic!("reset: boom");
        }
        let later = self.panics(Panic::ResetLater);
        async move {
            if later {
                tokio::task::yield_now().await;
                panic!("reset later: boom");
            }
            Ok(())
        }
    }

    fn is_broken(&self, _: &mut Rc<u32>) -> bool {
        if self.panics(Panic::IsBroken) {
            panic!("is_broken: boom");
        }
        false
    }
}

type HookPool = Pool<Hooks, TokioLocal>;

/// Runs `f` on a current-thread runtime inside a `LocalSet`.
fn local<F: Future<Output = ()>>(f: impl FnOnce() -> F) {
    cmap_testkit::rt::on_local_set(f());
}

fn pool(hooks: &Hooks, host: &str) -> HookPool {
    Pool::builder()
        .address(format!("{host}:5432").as_str())
        .max_pool_size(1)
        .wait_queue_timeout(Duration::from_secs(2))
        .build(hooks.clone())
        .unwrap()
}

/// Waits until `done`, for up to two seconds.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}");
}

/// The panics logged with `text` in their error.
fn panic_logs(text: &str) -> Vec<Fields> {
    let all = notices().0.lock().unwrap().clone();
    all.into_iter()
        .filter(|f| f.get("error").is_some_and(|e| e.contains(text)))
        .collect()
}

/// A connection comes (the pool's one slot is free), and is the `n`th made.
async fn served(pool: &HookPool, n: u32) {
    let conn = pool.get().await.unwrap();
    assert_eq!(**conn, n);
    assert_eq!(pool.status().total, 1, "{:?}", pool.status());
}

#[test]
fn a_panicking_connect_fails_the_establishment_and_frees_its_slot() {
    let _ = notices();
    // The connection `service_id` panicked for was made, and dropped.
    for (hook, text, next) in [
        (Panic::Connect, "connect: boom", 1),
        (Panic::ConnectLater, "connect later: boom", 1),
        (Panic::ServiceId, "service_id: boom", 2),
    ] {
        local(|| async {
            let hooks = Hooks::default();
            let pool = pool(&hooks, "connect");
            hooks.panic_in(hook);
            let error = pool.get().await.unwrap_err();
            let panicked = panicked_in(&error).unwrap_or_else(|| panic!("{hook:?}: {error:?}"));
            assert_eq!(panicked.hook, Hook::Connect);
            assert!(panicked.message.contains(text), "{panicked}");
            assert_eq!(pool.stats().panics_caught, 1);
            assert_eq!(pool.status().total, 0, "{hook:?}: the slot is free");
            // Cleared (an `Other` failure), it serves again after its
            // reconnect backoff.
            for _ in 0..200 {
                if let Ok(conn) = pool.get_timeout(Duration::from_millis(100)).await {
                    assert_eq!(**conn, next);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(pool.state(), PoolState::Ready);
            served(&pool, next).await;
            assert_eq!(panic_logs(text).len(), 1, "{hook:?}: logged once");
        });
    }
}

#[test]
fn a_panicking_check_closes_that_connection_and_the_checkout_goes_on() {
    local(|| async {
        let hooks = Hooks::default();
        let pool = pool(&hooks, "check");
        // Made for this checkout: the checkout fails with the panic.
        hooks.panic_in(Panic::Check);
        let error = pool.get().await.unwrap_err();
        assert!(matches!(error, GetError::CheckFailed(_)), "{error:?}");
        let panicked = error
            .connection_error()
            .and_then(|e| e.downcast_ref::<Panicked>());
        assert_eq!(panicked.map(|p| p.hook), Some(Hook::Check), "{error:?}");
        assert_eq!(pool.status().total, 0, "closed");
        // Idle: the checkout takes another.
        drop(pool.get().await.unwrap());
        hooks.panic_in(Panic::Check);
        served(&pool, 3).await;
        let stats = pool.stats();
        assert_eq!(
            (stats.panics_caught, stats.connections_closed),
            (2, 2),
            "{stats:?}"
        );
    });
}

#[test]
fn a_panicking_reset_or_is_broken_closes_that_connection() {
    for hook in [Panic::Reset, Panic::ResetLater, Panic::IsBroken] {
        local(|| async {
            let hooks = Hooks::default();
            let pool = pool(&hooks, "reset");
            let conn = pool.get().await.unwrap();
            hooks.panic_in(hook);
            drop(conn);
            eventually("closed", || pool.status().total == 0).await;
            assert_eq!(pool.stats().panics_caught, 1, "{hook:?}");
            served(&pool, 2).await;
            // Without a panic, reused.
            served(&pool, 2).await;
        });
    }
}

#[test]
fn a_panicking_event_callback_loses_nothing() {
    local(|| async {
        let hooks = Hooks::default();
        let pool = pool(&hooks, "callback");
        let seen = Rc::new(RefCell::new(Vec::new()));
        let sink = seen.clone();
        let _ = pool.on_event(move |e: &Event| {
            if matches!(e, Event::ConnectionCheckedOut { .. }) {
                panic!("callback: boom");
            }
            sink.borrow_mut().push(e.name());
        });
        let conn = pool.get().await.unwrap();
        // The waiter is served, and a second one after a check-in.
        let waiter = tokio::task::spawn_local(pool.get());
        tokio::task::yield_now().await;
        drop(conn);
        assert_eq!(**waiter.await.unwrap().unwrap(), 1);
        assert_eq!(pool.stats().panics_caught, 2);
        assert!(seen.borrow().contains(&"ConnectionCheckedIn"), "{seen:?}");
    });
}

#[test]
fn a_guard_held_past_the_leak_threshold_is_reported_once() {
    let notices = notices();
    local(|| async {
        let host = "leak";
        let pool: HookPool = Pool::builder()
            .address(format!("{host}:5432").as_str())
            .max_pool_size(2)
            .leak_detection_threshold(Duration::from_millis(50))
            .build(Hooks::default())
            .unwrap();
        drop(pool.get().await.unwrap()); // back in time: nothing
        let line = line!() + 1;
        let held = pool.get().await.unwrap();
        eventually("the leak is reported", || pool.stats().leaks_detected == 1).await;
        tokio::time::sleep(Duration::from_millis(120)).await; // two more thresholds
        assert_eq!(pool.stats().leaks_detected, 1, "reported once");
        drop(held);
        // Detached after the pool closed.
        let line_detached = line!() + 1;
        let held = pool.get_timeout(Duration::from_secs(1)).await.unwrap();
        eventually("the second leak", || pool.stats().leaks_detected == 2).await;
        pool.close();
        let _ = held.detach();
        let logged = notices.of_host(host);
        let summary: Vec<(&str, &str)> = logged
            .iter()
            .map(|f| (f["level"].as_str(), f["driverConnectionId"].as_str()))
            .collect();
        assert_eq!(
            summary,
            [("WARN", "1"), ("INFO", "1"), ("WARN", "1"), ("INFO", "1")],
            "{logged:#?}"
        );
        for (fields, line) in logged.chunks(2).zip([line, line_detached]) {
            let (warn, info) = (&fields[0], &fields[1]);
            let here = format!("hooks.rs:{line}:");
            assert!(warn["location"].contains(&here), "{here} in {warn:?}");
            assert!(
                warn["message"].contains("leak detection threshold of 50 ms"),
                "{warn:?}"
            );
            assert_eq!(info["location"], warn["location"]);
        }
        assert!(
            logged[3]["message"].contains("was detached after"),
            "{:?}",
            logged[3]
        );
    });
}

#[test]
fn leak_detection_off_reports_nothing() {
    local(|| async {
        let hooks = Hooks::default();
        let pool = pool(&hooks, "no-leak");
        let held = pool.get().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(held.connection_id(), ConnectionId(1));
        assert_eq!(pool.stats().leaks_detected, 0);
    });
}

#[test]
fn metrics_are_fed_from_the_pools_events() {
    local(|| async {
        let rec = cmap_testkit::recorder::Recording::default();
        let pool: HookPool = metrics::with_local_recorder(&rec, || {
            Pool::builder()
                .address("metrics:5432")
                .max_pool_size(2)
                .metrics(true)
                .build(Hooks::default())
                .unwrap()
        });
        let a = "address=metrics:5432";
        let gauges = || rec.pool_gauges("metrics:5432");
        let first = pool.get().await.unwrap();
        let mut second = pool.get().await.unwrap();
        assert_eq!(gauges(), [0.0, 2.0, 0.0, 2.0, 0.0]);
        drop(first);
        assert_eq!(gauges(), [1.0, 1.0, 0.0, 2.0, 0.0]);
        let again = pool.get().await.unwrap();
        let error = pool.get_timeout(Duration::from_millis(20)).await.unwrap_err();
        assert!(error.is_timeout(), "{error}");
        drop(again);
        second.mark_broken();
        drop(second);
        assert_eq!(gauges(), [1.0, 0.0, 0.0, 1.0, 0.0]);
        pool.close();
        assert_eq!(gauges(), [0.0; 5]);
        assert_eq!(rec.counter(&format!("cmap_connections_opened_total{{{a}}}")), 2);
        assert_eq!(rec.counter(&format!("cmap_checkouts_total{{{a}}}")), 3);
        assert_eq!(rec.counter(&format!("cmap_checkout_timeouts_total{{{a}}}")), 1);
        assert_eq!(
            rec.counter(&format!("cmap_connections_closed_total{{{a},reason=error}}")),
            1
        );
        assert_eq!(
            rec.histogram(&format!("cmap_checkout_wait_seconds{{{a}}}")).len(),
            3
        );
    });
}

/// Connections whose own `Drop` panics while their flag is up.
struct Bombs(Rc<Cell<bool>>);

struct Bomb(Rc<Cell<bool>>);

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.0.get() && !std::thread::panicking() {
            panic!("drop: boom");
        }
    }
}

impl ManageConnection for Bombs {
    type Connection = Bomb;
    type Error = std::io::Error;

    fn connect(&self) -> impl Future<Output = Result<Bomb, std::io::Error>> {
        std::future::ready(Ok(Bomb(self.0.clone())))
    }

    fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(e)
    }
}

#[test]
fn a_panicking_connection_drop_is_caught_and_the_pool_goes_on() {
    let _ = notices();
    local(|| async {
        let armed = Rc::new(Cell::new(true));
        let pool: Pool<Bombs, TokioLocal> = Pool::builder()
            .address("bombs:5432")
            .max_pool_size(2)
            .build(Bombs(armed.clone()))
            .unwrap();
        let mut conn = pool.get().await.unwrap();
        conn.mark_broken();
        // Closed in the guard's drop: the panic stops there.
        drop(conn);
        assert_eq!(pool.stats().panics_caught, 1);
        // Two idle ones closed in one input: both dropped, both counted.
        let (a, b) = (pool.get().await.unwrap(), pool.get().await.unwrap());
        drop((a, b));
        pool.close();
        let stats = pool.stats();
        assert_eq!(
            (stats.panics_caught, stats.connections_closed),
            (3, 3),
            "{stats:?}"
        );
        assert_eq!(panic_logs("drop: boom").len(), 3);
        armed.set(false);
    });
}

/// No task of a pool outlives it: the timer and the leak watcher hold it
/// weakly and end once its last handle is dropped, even one that waits
/// with no deadline.
#[test]
fn every_task_of_a_dropped_pool_ends() {
    let (rt, tasks) = cmap_testkit::rt::local_set();
    tasks.block_on(&rt, async {
        let pool: HookPool = Pool::builder()
            .address("watcher:5432")
            .max_pool_size(1)
            .leak_detection_threshold(Duration::from_secs(60))
            .build(Hooks::default())
            .unwrap();
        drop(pool.get().await.unwrap());
    });
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(2), tasks)
            .await
            .expect("a task of the dropped pool still runs");
    });
}
