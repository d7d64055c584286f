//! cmap-local in real time on tokio's current-thread runtime with a
//! `LocalSet`: checkout and check-in, a deadline that expires, a dropped
//! `get()`, clear, close, and the events' order.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use cmap_local::{ConnectionId, EstablishErrorKind, Event, ManageConnection, Pool, PoolState, TokioLocal};

/// Connections that are `Rc`s (not `Send`), made after `delay`.
struct Local {
    delay: Duration,
    made: Rc<RefCell<u32>>,
}

impl ManageConnection for Local {
    type Connection = Rc<u32>;
    type Error = std::io::Error;
    const CHECKS: bool = false;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Rc<u32>, std::io::Error>> {
        let delay = self.delay;
        let made = self.made.clone();
        async move {
            tokio::time::sleep(delay).await;
            *made.borrow_mut() += 1;
            Ok(Rc::new(*made.borrow()))
        }
    }

    fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(e)
    }
}

fn manager(delay_ms: u64) -> Local {
    Local {
        delay: Duration::from_millis(delay_ms),
        made: Rc::default(),
    }
}

/// Runs `f` on a current-thread runtime inside a `LocalSet`.
fn local<F: Future<Output = ()>>(f: impl FnOnce() -> F) {
    cmap_testkit::rt::on_local_set(f());
}

type LocalPool = Pool<Local, TokioLocal>;

fn pool(max: u32, delay_ms: u64) -> LocalPool {
    Pool::builder()
        .address("localhost:5432")
        .max_pool_size(max)
        .build(manager(delay_ms))
        .unwrap()
}

/// Collects the events' names.
fn recorder(pool: &LocalPool) -> Rc<RefCell<Vec<&'static str>>> {
    let names = Rc::new(RefCell::new(Vec::new()));
    let sink = names.clone();
    let _ = pool.on_event(move |e: &Event| sink.borrow_mut().push(e.name()));
    names
}

#[test]
fn a_connection_is_checked_out_checked_in_and_reused() {
    local(|| async {
        let pool = pool(2, 0);
        let first = pool.get().await.unwrap();
        let id = first.connection_id();
        assert_eq!(**first, 1);
        assert_eq!(pool.status().in_use, 1);
        drop(first);
        assert_eq!(pool.status().available, 1);
        let again = pool.get().await.unwrap();
        assert_eq!(again.connection_id(), id, "the idle connection is reused");
        assert_eq!(pool.stats().connections_opened, 1);
    });
}

/// With the pool's one connection held, a wait of 50 ms ends in a timeout
/// at its deadline, not at the next maintenance run a second away.
async fn wait_times_out_at_its_deadline(pool: &LocalPool) {
    let held = pool.get().await.unwrap();
    let started = tokio::time::Instant::now();
    let error = pool.get_timeout(Duration::from_millis(50)).await.unwrap_err();
    let waited = started.elapsed();
    assert!(error.is_timeout(), "{error}");
    assert!(
        waited >= Duration::from_millis(50) && waited < Duration::from_millis(500),
        "{waited:?}"
    );
    drop(held);
    assert_eq!(pool.status().waiting, 0);
}

#[test]
fn a_wait_ends_at_its_deadline_with_a_timeout() {
    local(|| async {
        let pool = pool(1, 0);
        let names = recorder(&pool);
        wait_times_out_at_its_deadline(&pool).await;
        // The failure was the last event before the held one came back.
        let names = names.borrow();
        assert_eq!(
            names[names.len() - 2..],
            ["ConnectionCheckOutFailed", "ConnectionCheckedIn"]
        );
    });
}

/// The same with nobody listening: the queued checkout leaves no output,
/// and still arms the timer for its deadline.
#[test]
fn a_wait_with_events_off_ends_at_its_deadline() {
    local(|| async { wait_times_out_at_its_deadline(&pool(1, 0)).await });
}

#[test]
fn a_dropped_get_loses_no_connection_and_no_capacity() {
    local(|| async {
        let pool = pool(1, 0);
        let held = pool.get().await.unwrap();
        // Queued, then dropped while it waits.
        let waiting = tokio::time::timeout(Duration::from_millis(20), pool.get()).await;
        assert!(waiting.is_err(), "it was still waiting");
        assert_eq!(pool.status().waiting, 0, "withdrawn");
        drop(held);
        // Dropped while its connection is being established.
        let slow = pool_slow();
        let get = tokio::time::timeout(Duration::from_millis(10), slow.get()).await;
        assert!(get.is_err());
        tokio::time::sleep(Duration::from_millis(100)).await;
        let status = slow.status();
        assert_eq!(
            (status.available, status.pending, status.in_use),
            (1, 0, 0),
            "{status:?}"
        );
        // Both pools serve at once.
        let a = tokio::time::timeout(Duration::from_millis(20), pool.get())
            .await
            .unwrap()
            .unwrap();
        let b = tokio::time::timeout(Duration::from_millis(20), slow.get())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (a.connection_id(), b.connection_id()),
            (ConnectionId(1), ConnectionId(1))
        );
    });
}

fn pool_slow() -> LocalPool {
    pool(1, 50)
}

#[test]
fn a_clear_fails_the_waiters_and_interrupts_in_use_connections() {
    local(|| async {
        let pool = pool(1, 0);
        let held = pool.get().await.unwrap();
        assert!(!held.is_interrupted(), "nothing interrupted it yet");
        let waiter = tokio::task::spawn_local(pool.get());
        tokio::task::yield_now().await;
        assert_eq!(pool.status().waiting, 1);
        pool.clear(true).unwrap();
        let error = waiter.await.unwrap().unwrap_err();
        assert!(error.is_retryable(), "PoolClearedError is retryable: {error}");
        assert!(held.is_interrupted());
        assert_eq!(pool.state(), PoolState::Paused);
        drop(held);
        assert_eq!(
            pool.status().total,
            0,
            "an interrupted connection is closed on return"
        );
        pool.ready().unwrap();
        assert!(pool.get().await.is_ok());
    });
}

#[test]
fn close_fails_the_waiters_and_every_later_checkout() {
    local(|| async {
        let pool = pool(1, 0);
        let held = pool.get().await.unwrap();
        let waiter = tokio::task::spawn_local(pool.get());
        tokio::task::yield_now().await;
        pool.close();
        let error = waiter.await.unwrap().unwrap_err();
        assert!(error.to_string().to_lowercase().contains("closed"), "{error}");
        assert!(pool.get().await.is_err());
        drop(held);
        assert_eq!(pool.status().total, 0);
    });
}

#[test]
fn events_come_in_the_cores_order() {
    local(|| async {
        let names = Rc::new(RefCell::new(Vec::new()));
        let sink = names.clone();
        let pool: LocalPool = Pool::builder()
            .address("localhost:5432")
            .max_pool_size(1)
            .on_event(move |e| sink.borrow_mut().push(e.name()))
            .build(manager(5))
            .unwrap();
        let conn = pool.get().await.unwrap();
        drop(conn);
        pool.close();
        assert_eq!(
            *names.borrow(),
            [
                "ConnectionPoolCreated",
                "ConnectionPoolReady",
                "ConnectionCheckOutStarted",
                "ConnectionCreated",
                "ConnectionReady",
                "ConnectionCheckedOut",
                "ConnectionCheckedIn",
                "ConnectionClosed",
                "ConnectionPoolClosed",
            ]
        );
    });
}

#[test]
fn a_waiter_is_served_by_a_check_in_in_fifo_order() {
    local(|| async {
        let pool = pool(1, 0);
        let held = pool.get().await.unwrap();
        let order = Rc::new(RefCell::new(Vec::new()));
        let mut tasks = Vec::new();
        for n in 0..3 {
            let get = pool.get();
            let order = order.clone();
            tasks.push(tokio::task::spawn_local(async move {
                let conn = get.await.unwrap();
                order.borrow_mut().push(n);
                tokio::task::yield_now().await;
                drop(conn);
            }));
            tokio::task::yield_now().await;
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.borrow(), [0, 1, 2]);
    });
}

#[test]
fn the_flight_recorder_records_inputs_that_replay_exactly() {
    local(|| async {
        let pool: LocalPool = Pool::builder()
            .address("localhost:5432")
            .max_pool_size(1)
            .flight_recorder(1_000)
            .build(manager(1))
            .unwrap();
        let held = pool.get().await.unwrap();
        let error = pool.get_timeout(Duration::from_millis(5)).await.unwrap_err();
        assert!(error.is_timeout());
        drop(held);
        let recording = pool.recording().expect("the recorder is on");
        assert!(recording.inputs() >= 5, "{} inputs", recording.inputs());
        assert_eq!(recording.incident(), None);
        // Any origin will do: no output depends on it.
        recording
            .replay(std::time::Instant::now())
            .expect("an exact replay");
    });
}

#[test]
fn a_callback_that_calls_the_pool_sees_events_in_order() {
    local(|| async {
        let names = Rc::new(RefCell::new(Vec::new()));
        let pool = pool(2, 0);
        let (sink, handle) = (names.clone(), pool.clone());
        let once = std::cell::Cell::new(true);
        let _ = pool.on_event(move |e: &Event| {
            // A subscriber that reads the pool and, once, checks a
            // connection out and back in from inside the callback.
            let _ = handle.status();
            sink.borrow_mut().push(e.name());
            if e.name() == "ConnectionCheckedIn" && once.replace(false) {
                let get = handle.get_timeout(Duration::ZERO);
                tokio::task::spawn_local(async move {
                    drop(get.await);
                });
            }
        });
        drop(pool.get().await.unwrap());
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert_eq!(
            *names.borrow(),
            [
                "ConnectionCheckOutStarted",
                "ConnectionCreated",
                "ConnectionReady",
                "ConnectionCheckedOut",
                "ConnectionCheckedIn",
                "ConnectionCheckOutStarted",
                "ConnectionCheckedOut",
                "ConnectionCheckedIn",
            ]
        );
    });
}

/// A manager whose server refuses every connection.
struct Refused;

impl ManageConnection for Refused {
    type Connection = Rc<u32>;
    type Error = std::io::Error;
    const CHECKS: bool = false;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Rc<u32>, std::io::Error>> {
        std::future::ready(Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)))
    }

    fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(e)
    }
}

#[test]
fn build_and_wait_returns_once_min_pool_size_is_open() {
    local(|| async {
        let pool: LocalPool = Pool::builder()
            .address("localhost:5432")
            .min_pool_size(3)
            .build_and_wait(manager(5), Duration::from_secs(5))
            .await
            .unwrap();
        assert!(pool.status().available >= 3, "{:?}", pool.status());
        // Connections in use count toward minPoolSize too.
        let held = [pool.get().await.unwrap(), pool.get().await.unwrap()];
        pool.wait_ready(Duration::from_millis(200))
            .await
            .expect("three open, two of them in use");
        drop(held);
        // With minPoolSize 0, one checkout proves the server answers.
        let pool = self::pool(2, 5);
        pool.wait_ready(Duration::from_secs(5)).await.unwrap();
        assert_eq!(pool.status().available, 1);
    });
}

#[test]
fn wait_ready_names_the_cause_when_the_server_refuses() {
    local(|| async {
        let started = tokio::time::Instant::now();
        let built = Pool::<Refused, TokioLocal>::builder()
            .address("localhost:5432")
            .min_pool_size(2)
            .build_and_wait(Refused, Duration::from_millis(200))
            .await;
        let Err(cmap_local::BuildError::NotReady(not_ready)) = built else {
            panic!("not ready expected");
        };
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert_eq!(not_ready.wanted, 2);
        let cause = not_ready.last_error().expect("the refusal").to_string();
        assert!(cause.contains("refused"), "{cause}");
    });
}

#[test]
fn resize_serves_a_waiter_at_once_and_shrinks_the_idle() {
    local(|| async {
        let pool = pool(1, 0);
        let first = pool.get().await.unwrap();
        let waiting = tokio::task::spawn_local(pool.get_timeout(Duration::from_secs(5)));
        tokio::task::yield_now().await;
        assert_eq!(pool.status().waiting, 1);
        pool.resize(0, 2).unwrap();
        let second = waiting.await.unwrap().expect("served by the larger size");
        assert_eq!(pool.status().in_use, 2);
        drop((first, second));
        pool.resize(0, 1).unwrap();
        assert_eq!(
            pool.status().total,
            1,
            "the idle connection over the size is closed"
        );
        assert!(matches!(
            pool.resize(3, 2),
            Err(cmap_local::UsageError::InvalidSize(_))
        ));
    });
}

#[test]
fn close_gracefully_waits_for_the_connections_in_use_then_forces_the_rest() {
    local(|| async {
        let pool = pool(2, 0);
        let held = pool.get().await.unwrap();
        let giver = async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(held);
        };
        let (forced, ()) = tokio::join!(pool.close_gracefully(Duration::from_secs(5)), giver);
        assert_eq!(forced, 0, "it came back in time");
        assert_eq!(pool.status().total, 0);

        let pool = self::pool(2, 0);
        let kept = pool.get().await.unwrap();
        let started = tokio::time::Instant::now();
        assert_eq!(pool.close_gracefully(Duration::from_millis(50)).await, 1);
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(pool.status().in_use, 0, "forced closed");
        drop(kept);
    });
}

/// Connections numbered from 1; once `failing` is set, the check fails
/// the odd ones.
struct OddsFail(Local, Rc<std::cell::Cell<bool>>);

impl ManageConnection for OddsFail {
    type Connection = Rc<u32>;
    type Error = std::io::Error;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Rc<u32>, std::io::Error>> {
        self.0.connect()
    }

    fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(e)
    }

    fn check(
        &self,
        conn: &mut Rc<u32>,
        _deadline: Option<std::time::Instant>,
    ) -> impl Future<Output = Result<(), std::io::Error>> {
        let fails = self.1.get() && **conn % 2 == 1;
        std::future::ready(if fails {
            Err(std::io::Error::other("odd"))
        } else {
            Ok(())
        })
    }
}

#[test]
fn check_idle_closes_the_idle_connections_that_fail_and_keeps_the_rest() {
    local(|| async {
        let failing = Rc::new(std::cell::Cell::new(false));
        let pool: Pool<OddsFail, TokioLocal> = Pool::builder()
            .address("localhost:5432")
            .max_pool_size(4)
            .build(OddsFail(manager(0), failing.clone()))
            .unwrap();
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(pool.get().await.unwrap());
        }
        drop(held);
        assert_eq!(pool.status().available, 4);
        failing.set(true);
        let report = pool.check_idle(Duration::from_secs(1)).await;
        assert_eq!((report.checked, report.closed), (4, 2));
        assert_eq!(pool.status().available, 2);
        assert_eq!(pool.status().total, 2);
    });
}

/// Counts the events a callback is given.
fn counter(pool: &LocalPool) -> (Rc<std::cell::Cell<u32>>, cmap_local::Subscription) {
    let count = Rc::new(std::cell::Cell::new(0));
    let sink = count.clone();
    let subscription = pool.on_event(move |_: &Event| sink.set(sink.get() + 1));
    (count, subscription)
}

#[test]
fn unsubscribe_ends_that_subscription_and_no_other() {
    local(|| async {
        let pool = pool(1, 0);
        let (first, subscription) = counter(&pool);
        let (second, _) = counter(&pool);
        drop(pool.get().await.unwrap());
        let seen = first.get();
        assert!(seen > 0 && second.get() == seen, "{seen} and {}", second.get());
        pool.unsubscribe(subscription);
        drop(pool.get().await.unwrap());
        assert_eq!(first.get(), seen, "an ended subscription got events");
        // Started, checked out, checked in.
        assert_eq!(second.get(), seen + 3, "the other subscription lost events");
    });
}

#[test]
fn an_input_made_by_a_callback_is_delivered_after_the_event_being_delivered() {
    local(|| async {
        let pool = pool(1, 0);
        let handle = pool.clone();
        // The first subscriber clears the pool from inside a callback, so
        // that the clear's event is queued while `ConnectionCheckedIn` is
        // being delivered: the second must get them in the core's order.
        let _ = pool.on_event(move |e: &Event| {
            if e.name() == "ConnectionCheckedIn" {
                handle.clear(false).unwrap();
            }
        });
        let names = recorder(&pool);
        drop(pool.get().await.unwrap());
        let names = names.borrow();
        let at = |name| {
            names
                .iter()
                .position(|n| *n == name)
                .unwrap_or_else(|| panic!("{name} in {names:?}"))
        };
        assert!(
            at("ConnectionCheckedIn") < at("ConnectionPoolCleared"),
            "{names:?}"
        );
    });
}

#[test]
fn a_guard_shows_its_connection_id() {
    local(|| async {
        let pool = pool(1, 0);
        let conn = pool.get().await.unwrap();
        let shown = format!("{conn:?}");
        assert!(
            shown.starts_with("PooledConnection") && shown.contains(&format!("{:?}", conn.connection_id())),
            "{shown}"
        );
    });
}

#[test]
fn the_pool_closes_when_its_last_handle_is_dropped() {
    local(|| async {
        let pool = pool(1, 0);
        let shown = format!("{pool:?}");
        assert!(
            shown.starts_with("Pool") && shown.contains("localhost"),
            "{shown}"
        );
        let names = recorder(&pool);
        let clone = pool.clone();
        drop(clone);
        assert_eq!(pool.state(), PoolState::Ready, "another handle is left");
        let held = pool.get().await.unwrap();
        drop(pool);
        assert!(
            names.borrow().contains(&"ConnectionPoolClosed"),
            "{:?}",
            names.borrow()
        );
        // A guard outlives the handles: given back, its connection closes.
        drop(held);
        assert_eq!(
            names.borrow().last(),
            Some(&"ConnectionClosed"),
            "{:?}",
            names.borrow()
        );
    });
}

#[test]
fn only_the_connections_in_use_at_a_clear_are_interrupted() {
    local(|| async {
        let pool = pool(2, 0);
        let before = pool.get().await.unwrap();
        pool.clear(true).unwrap();
        pool.ready().unwrap();
        let after = pool.get().await.unwrap();
        assert!(before.is_interrupted());
        assert!(!after.is_interrupted(), "checked out after the clear");
    });
}

#[test]
fn an_establishment_dropped_with_its_runtime_frees_its_place() {
    let (rt, tasks) = cmap_testkit::rt::local_set();
    let pool = tasks.block_on(&rt, async {
        let pool = pool(1, 60_000);
        let get = pool.get();
        tokio::task::spawn_local(async move {
            let _ = get.await;
        });
        tokio::task::yield_now().await;
        assert_eq!(pool.status().pending, 1, "{:?}", pool.status());
        pool
    });
    // The runtime shuts down: the connect in flight is dropped unfinished.
    drop(tasks);
    drop(rt);
    let status = pool.status();
    assert_eq!((status.pending, status.total), (0, 0), "{status:?}");
}

#[test]
fn a_burst_of_deadlines_larger_than_one_timer_turn_all_fail_on_time() {
    // With time paused, 300 checkouts queued at one instant share one
    // deadline: the timer's one wake leaves more outputs than a turn
    // drains (the driver layer's `OUTPUTS_PER_WAKE`), and it must turn
    // again at once, not sleep until the pool's next deadline (the long
    // checkout's, a minute on).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, async {
        let pool = Pool::<Local, TokioLocal>::builder()
            .address("localhost:5432")
            .max_pool_size(1)
            .configure(|o| o.maintenance_interval(None))
            .build(manager(0))
            .unwrap();
        let _held = pool.get().await.unwrap();
        let long = tokio::task::spawn_local(pool.get_timeout(Duration::from_secs(60)));
        tokio::task::yield_now().await;
        let t0 = tokio::time::Instant::now();
        let burst: Vec<_> = (0..300)
            .map(|_| {
                let get = pool.get_timeout(Duration::from_secs(1));
                tokio::task::spawn_local(async move { (get.await.err(), tokio::time::Instant::now()) })
            })
            .collect();
        for checkout in burst {
            let (err, ended) = checkout.await.unwrap();
            assert!(err.is_some_and(|e| e.is_timeout()));
            assert_eq!(
                ended - t0,
                Duration::from_secs(1),
                "every one fails at its deadline"
            );
        }
        assert!(long.await.unwrap().is_err_and(|e| e.is_timeout()));
    });
}

/// Records the deadline each connect is given, then connects as `Local`.
struct Deadlines(Local, Rc<RefCell<Vec<Option<std::time::Instant>>>>);

impl ManageConnection for Deadlines {
    type Connection = Rc<u32>;
    type Error = std::io::Error;
    const CHECKS: bool = false;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Rc<u32>, std::io::Error>> {
        std::future::ready(Err(std::io::Error::other("the pool calls connect_until")))
    }

    fn connect_until(
        &self,
        deadline: Option<std::time::Instant>,
    ) -> impl Future<Output = Result<Rc<u32>, std::io::Error>> {
        self.1.borrow_mut().push(deadline);
        self.0.connect()
    }

    fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(e)
    }
}

/// As cmap-async's: a connect a checkout started is told its deadline;
/// one for minPoolSize is told none.
#[test]
fn a_connect_is_told_the_deadline_of_the_checkout_that_started_it() {
    local(|| async {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let pool = Pool::<Deadlines, TokioLocal>::builder()
            .address("localhost:5432")
            .build(Deadlines(manager(1), seen.clone()))
            .unwrap();
        let before = std::time::Instant::now() + Duration::from_millis(500);
        let conn = pool.get_timeout(Duration::from_millis(500)).await.unwrap();
        let after = std::time::Instant::now() + Duration::from_millis(500);
        let told = seen.borrow()[0].expect("the checkout's deadline");
        assert!(before <= told && told <= after, "{told:?}");
        drop(conn);

        let seen = Rc::new(RefCell::new(Vec::new()));
        let _pool = Pool::<Deadlines, TokioLocal>::builder()
            .address("localhost:5432")
            .min_pool_size(1)
            .build_and_wait(Deadlines(manager(1), seen.clone()), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(*seen.borrow(), [None], "minPoolSize");
    });
}
