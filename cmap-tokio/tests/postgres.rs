//! The pool used for real, against PostgreSQL at 127.0.0.1:5432 (user
//! `postgres`, trust auth, database `test`) through `tokio-postgres`, with
//! the ready-made manager of `cmap-postgres` (its defaults: `is_closed` on
//! checkout, a rollback of an open transaction on check-in).
//!
//! The tests that need the server run only with `CMAP_PG_TESTS=1` (CI sets
//! it) and otherwise say why they did not run. The refused-connection test
//! needs no server and always runs.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_postgres::{PgError, PgManager};
use cmap_tokio::{CheckOutError, Event, GetError, Pool, PoolState};
use tokio_postgres::{Client, NoTls};

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

fn config(application_name: &str) -> tokio_postgres::Config {
    config_on(5432, application_name)
}

fn config_on(port: u16, application_name: &str) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(port)
        .user("postgres")
        .dbname("test")
        .application_name(application_name)
        .connect_timeout(Duration::from_secs(5));
    config
}

/// A name no other test run uses, to find this pool's sessions.
fn app_name(test: &str) -> String {
    format!("cmap-{test}-{}-{}", std::process::id(), fastrand::u32(..))
}

fn pool(app: &str, max: u32) -> Pool<PgManager> {
    Pool::builder()
        .address("127.0.0.1:5432")
        .max_pool_size(max)
        .wait_queue_timeout(Duration::from_secs(20))
        .build(PgManager::new(config(app), NoTls))
        .unwrap()
}

/// A connection outside the pool, to watch and kill the pool's sessions.
async fn admin() -> Client {
    let (client, connection) = config("cmap-test-admin").connect(NoTls).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

async fn sessions(admin: &Client, app: &str) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .get(0)
}

async fn kill_all(admin: &Client, app: &str) -> usize {
    admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_tasks_never_open_more_than_max_pool_size_sessions() {
    if !server_tests_enabled("two_hundred_tasks_never_open_more_than_max_pool_size_sessions") {
        return;
    }
    let app = app_name("max");
    let pool = pool(&app, 10);
    let admin = admin().await;
    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicI64::new(0));
    let watcher = {
        let (done, most, app) = (done.clone(), most.clone(), app.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                let now = sessions(&admin, &app).await;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            admin
        })
    };
    let mut tasks = Vec::new();
    for n in 0..200i32 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..3i32 {
                let conn = pool.get().await.unwrap();
                let row = conn
                    .query_one("SELECT $1::int4 + $2::int4, pg_sleep(0.002)::text", &[&n, &round])
                    .await
                    .unwrap();
                assert_eq!(row.get::<_, i32>(0), n + round);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let admin = watcher.await.unwrap();
    let most = most.load(Ordering::SeqCst);
    let opened = pool.stats().connections_opened;
    eprintln!("600 queries from 200 tasks: at most {most} sessions seen, {opened} opened");
    assert!(most <= 10, "{most} sessions of one pool of maxPoolSize 10");
    assert!(most >= 2, "the pool was used concurrently");
    assert!(opened <= 10, "{opened} connections opened for a pool of 10");
    assert!(pool.status().total <= 10);
    // Closing the pool closes its sessions.
    pool.close();
    let t0 = Instant::now();
    while sessions(&admin, &app).await > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "sessions outlived the pool"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs one query, retrying once on another connection if it fails, as
/// an application would. Returns the server process ids of the sessions it
/// failed on. A checkout that fails because a connect failed (the killer
/// hit a session being established: the pool cleared itself) is retried
/// too: that is no query lost to a dead session.
async fn query_retrying_once(pool: &Pool<PgManager>, n: i32) -> Result<Vec<i32>, String> {
    let mut failed_on = Vec::new();
    let give_up = Instant::now() + Duration::from_secs(20);
    while failed_on.len() < 2 {
        let mut conn = match pool.get().await {
            Ok(conn) => conn,
            Err(
                e @ GetError::CheckOut(
                    CheckOutError::PoolCleared { .. } | CheckOutError::ConnectionError { .. },
                ),
            ) if Instant::now() < give_up => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        match conn.query_one("SELECT $1::int4", &[&n]).await {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_sessions_are_detected_replaced_and_cost_at_most_one_query_each() {
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
                if *reason == cmap_tokio::ClosedReason::Error {
                    closed.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    }
    let admin = admin().await;

    // 1. Idle sessions killed: the check on checkout (`is_closed`) refuses
    //    them, so no query even fails.
    let held: Vec<_> = futures_all((0..4).map(|_| pool.get_owned())).await;
    let first_pids: Vec<i32> = held.iter().map(|c| c.as_ref().unwrap().backend_pid()).collect();
    drop(held);
    assert_eq!(kill_all(&admin, &app).await, 4);
    while sessions(&admin, &app).await > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Let the clients read the server's goodbye.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for n in 0..20 {
        let failed_on = query_retrying_once(&pool, n).await.unwrap();
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
    let conn = pool.get().await.unwrap();
    assert!(
        !first_pids.contains(&conn.backend_pid()),
        "a killed session came back"
    );
    drop(conn);

    // 2. A session killed while checked out: the query on it fails, the
    //    guard marked broken closes it (reason `error`).
    let mut conn = pool.get().await.unwrap();
    let victim = conn.backend_pid();
    admin
        .query_one("SELECT pg_terminate_backend($1)", &[&victim])
        .await
        .unwrap();
    let err = conn.query_one("SELECT 1", &[]).await.unwrap_err();
    eprintln!("the query on the killed session failed with: {err}");
    conn.mark_broken();
    drop(conn);
    assert_eq!(closed_by_error.load(Ordering::SeqCst), 5);
    //    Not marked, it is still found broken on return (`is_broken`: the
    //    client saw its socket close) once the client has noticed.
    let conn = pool.get().await.unwrap();
    let victim2 = conn.backend_pid();
    admin
        .query_one("SELECT pg_terminate_backend($1)", &[&victim2])
        .await
        .unwrap();
    let t0 = Instant::now();
    while !conn.is_closed() {
        assert!(t0.elapsed() < Duration::from_secs(5), "the client never noticed");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    drop(conn);
    assert_eq!(closed_by_error.load(Ordering::SeqCst), 6);
    let failed_on = query_retrying_once(&pool, 7).await.unwrap();
    assert!(failed_on.is_empty(), "a killed session was reused: {failed_on:?}");
    let conn = pool.get().await.unwrap();
    assert!(![victim, victim2].contains(&conn.backend_pid()));
    drop(conn);

    // 3. Sessions killed at random under load: every query succeeds with at
    //    most one retry, and no dead session makes more than one query fail.
    //    The load runs until the killer has killed KILLS sessions, however
    //    fast or slow the machine: a fixed amount of work can end before
    //    any session is old enough to be a victim.
    const KILLS: usize = 3;
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicUsize::new(0));
    // One kill at a time, each seen through (the session gone) before the
    // next, 20 ms apart: a retry never meets a second fresh corpse, so any
    // second failure of a query would be a dead session handed out again.
    let killer = {
        let (stop, kills, app) = (stop.clone(), kills.clone(), app.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                // Established sessions only: killing one while it connects
                // is a failed connect, which clears the pool and backs off
                // (a different test).
                let victims = admin
                    .query(
                        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE application_name = $1 \
                           AND backend_start < clock_timestamp() - interval '200 milliseconds' \
                         ORDER BY random() LIMIT 1",
                        &[&app],
                    )
                    .await
                    .unwrap();
                for victim in victims {
                    let pid: i32 = victim.get(0);
                    while admin
                        .query_opt("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid])
                        .await
                        .unwrap()
                        .is_some()
                    {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    kills.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    let mut tasks = Vec::new();
    for t in 0..40 {
        let (pool, stop) = (pool.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                failures.extend(query_retrying_once(&pool, t * 100_000 + i).await?);
                tokio::time::sleep(Duration::from_millis(2)).await;
                i += 1;
            }
            Ok::<_, String>(failures)
        }));
    }
    let t0 = Instant::now();
    while kills.load(Ordering::SeqCst) < KILLS && t0.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut failures_per_session: BTreeMap<i32, usize> = BTreeMap::new();
    for task in tasks {
        for pid in task.await.unwrap().unwrap() {
            *failures_per_session.entry(pid).or_default() += 1;
        }
    }
    killer.await.unwrap();
    let kills = kills.load(Ordering::SeqCst);
    eprintln!(
        "{kills} sessions killed under load; queries failed once on {} of them",
        failures_per_session.len()
    );
    assert!(kills >= KILLS, "only {kills} sessions killed in 30 s");
    for (pid, failures) in &failures_per_session {
        assert_eq!(*failures, 1, "session {pid} made {failures} queries fail");
    }
    let s = pool.status();
    assert!(s.total <= 4, "{s:?}");
    assert!(
        pool.stats().connections_opened > 4,
        "killed sessions were replaced"
    );
}

/// Awaits every future, concurrently, in order.
async fn futures_all<F: std::future::Future + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_gives_its_real_error_not_a_timeout() {
    // No server needed: nothing listens on port 1. A refused connection
    // is a network error (possibly overload): the checkout waits for the
    // server until its deadline, then names the cause.
    let pool: Pool<PgManager> = Pool::builder()
        .address("127.0.0.1:1")
        .wait_queue_timeout(Duration::from_millis(300))
        .build(PgManager::new(config_on(1, "cmap-refused"), NoTls))
        .unwrap();
    let t0 = Instant::now();
    let err = pool.get().await.unwrap_err();
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
        .build(PgManager::new(config_on(1, "cmap-refused"), NoTls))
        .unwrap();
    let t0 = Instant::now();
    let err = pool.get().await.unwrap_err();
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

/// A PostgreSQL run with its sessions killed midway, recorded by the
/// flight recorder, replays exactly: the core given the same inputs at the
/// same instants gives every output as it did against the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_postgresql_run_replays_exactly() {
    if !server_tests_enabled("a_recorded_postgresql_run_replays_exactly") {
        return;
    }
    let app = app_name("replay");
    let pool = Pool::builder()
        .address("127.0.0.1:5432")
        .max_pool_size(4)
        .min_pool_size(1)
        .wait_queue_timeout(Duration::from_secs(20))
        .flight_recorder(100_000)
        .build(PgManager::new(config(&app), NoTls))
        .unwrap();
    let admin = admin().await;
    let mut tasks = Vec::new();
    for n in 0..16i32 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                // A killed session fails its query; the pool replaces it.
                let _ = query_retrying_once(&pool, n).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    kill_all(&admin, &app).await;
    for t in tasks {
        t.await.unwrap();
    }
    // Connections come back after their reset, on a task of their own:
    // waiting for them all makes the recording and the status final.
    assert_eq!(pool.close_gracefully(Duration::from_secs(10)).await, 0);
    let recording = pool.recording().expect("the recorder runs");
    assert!(recording.inputs() > 100, "{} inputs", recording.inputs());
    let mut file = Vec::new();
    recording.write_to(&mut file).unwrap();
    let replay = cmap_tokio::Recording::read_from(&file[..])
        .unwrap()
        .replay(Instant::now())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(replay.steps().len(), recording.inputs());
    assert_eq!(replay.steps().last().map(|s| s.status), Some(pool.status()));
}
