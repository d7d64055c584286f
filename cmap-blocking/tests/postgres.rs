//! The blocking pool used for real, against PostgreSQL at 127.0.0.1:5432
//! (user `postgres`, trust auth, database `test`) through the synchronous
//! `postgres` crate: the checks of `cmap-tokio/tests/postgres.rs`, on
//! threads, with the ready-made manager of `cmap-postgres`.
//!
//! The tests that need the server run only with `CMAP_PG_TESTS=1` (CI sets
//! it) and otherwise say why they did not run. The refused-connection test
//! needs no server and always runs.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use cmap_blocking::{CheckOutError, ClosedReason, Event, GetError, Pool, PoolState};
use cmap_postgres::blocking::PgManager;
use cmap_postgres::PgError;
use postgres::{Client, Config, NoTls};

/// The ready-made manager of `cmap-postgres`, validating on every
/// checkout (a round trip: an empty query). A synchronous client reads its
/// socket only when it is used, so unlike `tokio-postgres` it cannot learn
/// meanwhile that the server ended the session; asking costs about 50 µs
/// on a local server. (Polling the socket without a round trip, through
/// `notifications().timeout_iter(0)`, costs a millisecond: the tick of the
/// client's private runtime.) r2d2's `test_on_check_out`, on by default,
/// does the same; the manager's own default validates only connections
/// idle 500 ms or more, as HikariCP.
fn manager(config: Config) -> PgManager {
    PgManager::new(config, NoTls).validate_idle_after(Duration::ZERO)
}

/// Whether the server tests run; says why not, past the test harness's
/// output capture.
fn server_tests_enabled(test: &str) -> bool {
    if std::env::var("CMAP_PG_TESTS").as_deref() == Ok("1") {
        return true;
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipping {test}: set CMAP_PG_TESTS=1 to run it against PostgreSQL at 127.0.0.1:5432"
    );
    false
}

fn config_on(port: u16, application_name: &str) -> Config {
    let mut config = Config::new();
    config
        .host("127.0.0.1")
        .port(port)
        .user("postgres")
        .dbname("test")
        .application_name(application_name)
        .connect_timeout(Duration::from_secs(5));
    config
}

fn config(application_name: &str) -> Config {
    config_on(5432, application_name)
}

/// A name no other test run uses, to find this pool's sessions.
fn app_name(test: &str) -> String {
    format!(
        "cmap-blocking-{test}-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    )
}

fn pool(app: &str, max: u32) -> Pool<PgManager> {
    Pool::builder()
        .address("127.0.0.1:5432")
        .max_pool_size(max)
        .wait_queue_timeout(Duration::from_secs(20))
        .build(manager(config(app)))
        .unwrap()
}

/// A session outside the pool, to watch and kill the pool's sessions.
fn admin() -> Client {
    config("cmap-test-admin").connect(NoTls).unwrap()
}

fn sessions(admin: &mut Client, app: &str) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .get(0)
}

fn kill_all(admin: &mut Client, app: &str) -> usize {
    admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .len()
}

#[test]
fn a_hundred_threads_never_open_more_than_max_pool_size_sessions() {
    if !server_tests_enabled("a_hundred_threads_never_open_more_than_max_pool_size_sessions") {
        return;
    }
    let app = app_name("max");
    let pool = pool(&app, 10);
    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicI64::new(0));
    let watcher = {
        let (done, most, app) = (done.clone(), most.clone(), app.clone());
        thread::spawn(move || {
            let mut admin = admin();
            while !done.load(Ordering::SeqCst) {
                most.fetch_max(sessions(&mut admin, &app), Ordering::SeqCst);
                thread::sleep(Duration::from_millis(2));
            }
            admin
        })
    };
    let threads: Vec<_> = (0..100i32)
        .map(|n| {
            let pool = pool.clone();
            thread::spawn(move || {
                for round in 0..6i32 {
                    let mut conn = pool.get().unwrap();
                    let row = conn
                        .query_one("SELECT $1::int4 + $2::int4, pg_sleep(0.002)::text", &[&n, &round])
                        .unwrap();
                    assert_eq!(row.get::<_, i32>(0), n + round);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let mut admin = watcher.join().unwrap();
    let most = most.load(Ordering::SeqCst);
    let opened = pool.stats().connections_opened;
    eprintln!("600 queries from 100 threads: at most {most} sessions seen, {opened} opened");
    assert!(most <= 10, "{most} sessions of one pool of maxPoolSize 10");
    assert!(most >= 2, "the pool was used concurrently");
    assert!(opened <= 10, "{opened} connections opened for a pool of 10");
    assert!(pool.status().total <= 10);
    // Closing the pool closes its sessions.
    pool.close();
    let t0 = Instant::now();
    while sessions(&mut admin, &app) > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "sessions outlived the pool"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Runs one query, retrying once on another connection if it fails, as an
/// application would. Returns the server process ids of the sessions it
/// failed on. A checkout that fails because a connect failed (the pool
/// cleared itself) is retried too: that is no query lost to a dead session.
fn query_retrying_once(pool: &Pool<PgManager>, n: i32) -> Result<Vec<i32>, String> {
    let mut failed_on = Vec::new();
    let give_up = Instant::now() + Duration::from_secs(20);
    while failed_on.len() < 2 {
        let mut conn = match pool.get() {
            Ok(conn) => conn,
            Err(GetError::CheckOut(
                CheckOutError::PoolCleared { .. } | CheckOutError::ConnectionError { .. },
            )) if Instant::now() < give_up => {
                thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        match conn.query_one("SELECT $1::int4", &[&n]) {
            Ok(row) => {
                assert_eq!(row.get::<_, i32>(0), n);
                return Ok(failed_on);
            }
            Err(_) => {
                failed_on.push(conn.backend_pid());
                // Its session is gone or in an unknown state: never reuse it.
                conn.mark_broken();
            }
        }
    }
    Err(format!("query {n} failed twice, on sessions {failed_on:?}"))
}

#[test]
fn killed_sessions_are_detected_replaced_and_cost_at_most_one_query_each() {
    if !server_tests_enabled("killed_sessions_are_detected_replaced_and_cost_at_most_one_query_each") {
        return;
    }
    let app = app_name("kill");
    let pool = pool(&app, 4);
    let closed_by_error = Arc::new(AtomicI64::new(0));
    {
        let closed = closed_by_error.clone();
        let _ = pool.on_event(move |e| {
            if let Event::ConnectionClosed { reason, .. } = e {
                if *reason == ClosedReason::Error {
                    closed.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    }
    let mut admin = admin();

    // 1. Idle sessions killed: the check on checkout finds them dead, so
    //    no query even fails.
    let held: Vec<_> = (0..4).map(|_| pool.get().unwrap()).collect();
    let first_pids: Vec<i32> = held.iter().map(|c| c.backend_pid()).collect();
    drop(held);
    assert_eq!(kill_all(&mut admin, &app), 4);
    while sessions(&mut admin, &app) > 0 {
        thread::sleep(Duration::from_millis(5));
    }
    for n in 0..20 {
        let failed_on = query_retrying_once(&pool, n).unwrap();
        assert!(
            failed_on.is_empty(),
            "a dead idle session was handed out: {failed_on:?}"
        );
    }
    assert_eq!(
        closed_by_error.load(Ordering::SeqCst),
        4,
        "the four dead sessions closed as errors"
    );
    let conn = pool.get().unwrap();
    assert!(
        !first_pids.contains(&conn.backend_pid()),
        "a killed session came back"
    );
    drop(conn);

    // 2. A session killed while checked out: the query on it fails, the
    //    guard marked broken closes it (reason `error`).
    let mut conn = pool.get().unwrap();
    let victim = conn.backend_pid();
    admin
        .query_one("SELECT pg_terminate_backend($1)", &[&victim])
        .unwrap();
    let err = conn.query_one("SELECT 1", &[]).unwrap_err();
    eprintln!("the query on the killed session failed with: {err}");
    conn.mark_broken();
    drop(conn);
    assert_eq!(closed_by_error.load(Ordering::SeqCst), 5);
    //    Not marked and not used after the kill: the client has not read
    //    its socket since, so `is_broken` cannot tell, but the reset's
    //    round trip on return (or else the check of the next checkout)
    //    finds it dead: closed as an error, no query failed.
    let conn = pool.get().unwrap();
    let victim2 = conn.backend_pid();
    admin
        .query_one("SELECT pg_terminate_backend($1)", &[&victim2])
        .unwrap();
    while admin
        .query_opt("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&victim2])
        .unwrap()
        .is_some()
    {
        thread::sleep(Duration::from_millis(2));
    }
    drop(conn);
    let failed_on = query_retrying_once(&pool, 7).unwrap();
    assert!(failed_on.is_empty(), "a killed session was reused: {failed_on:?}");
    assert_eq!(closed_by_error.load(Ordering::SeqCst), 6);
    let conn = pool.get().unwrap();
    assert!(![victim, victim2].contains(&conn.backend_pid()));
    drop(conn);

    // 3. Sessions killed at random under load: every query succeeds with at
    //    most one retry, and no dead session makes more than one query fail.
    //    The load runs until the killer has killed KILLS sessions, however
    //    fast or slow the machine: a fixed amount of work can end before
    //    any session is old enough to be a victim. One kill at a time, each
    //    seen through before the next, 50 ms apart, established sessions
    //    only (killing one while it connects is a failed connect, which
    //    clears the pool: another test). Sixteen threads, not tokio's forty
    //    tasks: forty threads on a small machine queue long enough behind
    //    four sessions that a retry can meet the next kill, which would be a
    //    second fresh corpse, not a dead session handed out again.
    const KILLS: usize = 3;
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicUsize::new(0));
    let killer = {
        let (stop, kills, app) = (stop.clone(), kills.clone(), app.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(50));
                let victims = admin
                    .query(
                        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE application_name = $1 \
                           AND backend_start < clock_timestamp() - interval '200 milliseconds' \
                         ORDER BY random() LIMIT 1",
                        &[&app],
                    )
                    .unwrap();
                for victim in victims {
                    let pid: i32 = victim.get(0);
                    while admin
                        .query_opt("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid])
                        .unwrap()
                        .is_some()
                    {
                        thread::sleep(Duration::from_millis(1));
                    }
                    kills.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let (pool, stop) = (pool.clone(), stop.clone());
            thread::spawn(move || {
                let mut failures = Vec::new();
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    failures.extend(query_retrying_once(&pool, t * 100_000 + i)?);
                    thread::sleep(Duration::from_millis(2));
                    i += 1;
                }
                Ok::<_, String>(failures)
            })
        })
        .collect();
    let t0 = Instant::now();
    while kills.load(Ordering::SeqCst) < KILLS && t0.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::SeqCst);
    let mut failures_per_session: BTreeMap<i32, usize> = BTreeMap::new();
    for t in threads {
        for pid in t.join().unwrap().unwrap() {
            *failures_per_session.entry(pid).or_default() += 1;
        }
    }
    killer.join().unwrap();
    let kills = kills.load(Ordering::SeqCst);
    eprintln!(
        "{kills} sessions killed under load; queries failed once on {} of them",
        failures_per_session.len()
    );
    assert!(kills >= KILLS, "only {kills} sessions killed in 30 s");
    for (pid, failures) in &failures_per_session {
        assert_eq!(*failures, 1, "session {pid} made {failures} queries fail");
    }
    assert!(pool.status().total <= 4);
    assert!(
        pool.stats().connections_opened > 4,
        "killed sessions were replaced"
    );
}

#[test]
fn a_refused_connection_gives_its_real_error_not_a_timeout() {
    // No server needed: nothing listens on port 1. A refused connection
    // is a network error (possibly overload): the checkout waits for the
    // server until its deadline, then names the cause.
    let pool: Pool<PgManager> = Pool::builder()
        .address("127.0.0.1:1")
        .wait_queue_timeout(Duration::from_millis(300))
        .build(manager(config_on(1, "cmap-refused")))
        .unwrap();
    let t0 = Instant::now();
    let err = pool.get().unwrap_err();
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "not before its deadline"
    );
    assert!(err.is_timeout(), "{err:?}");
    eprintln!("get() failed with: {err}");
    assert!(err.to_string().contains("error connecting to server"), "{err}");
    assert!(err.to_string().contains("SystemOverloadedError"), "{err}");
    // Told not to wait (the spec's behaviour), the checkout fails at once
    // with the manager's own error, labelled; the pool is not cleared.
    let pool: Pool<PgManager> = Pool::builder()
        .address("127.0.0.1:1")
        .configure(|o| o.keep_waiting_on_overload(false))
        .wait_queue_timeout(Duration::from_secs(10))
        .build(manager(config_on(1, "cmap-refused")))
        .unwrap();
    let t0 = Instant::now();
    let err = pool.get().unwrap_err();
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "failed fast, not at the wait-queue timeout"
    );
    assert!(!err.is_timeout());
    let GetError::CheckOut(CheckOutError::ConnectionError { ref source, .. }) = err else {
        panic!("expected ConnectionCheckOutFailed with the connection error, got {err:?}");
    };
    assert!(source.has_label("SystemOverloadedError"), "{source:?}");
    let pg = source.downcast_ref::<PgError>().expect("the manager's own error");
    assert!(matches!(pg, PgError::Postgres(_)), "{pg:?}");
    // Down the chain: the operating system's "connection refused".
    assert!(
        cmap_testkit::caused_by_io(&err, std::io::ErrorKind::ConnectionRefused),
        "the chain of {err:?} ends in ConnectionRefused"
    );
    assert_eq!(pool.status().state, PoolState::Ready, "not cleared");
}
