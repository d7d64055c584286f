//! The checks, one `async fn` each: `M` the client and its manager, `R`
//! the pool's runtime, `T` the runtime of the test's own tasks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_async::{CheckOutError, ClosedReason, Event, GetError, Pool, PoolState, Recording, Runtime};
use cmap_postgres::PgError;

use super::{
    admin, app_name, config, config_on, kill_all, server_tests_enabled, session_exists, sessions, PgClient,
};
use crate::rt::{sleep, spawn};

/// The runtime of a check's tasks and its sessions' `application_name`,
/// or `None` when the server checks do not run (said why).
fn with_server<T: Default>(test: &str, tag: &str) -> Option<(T, String)> {
    server_tests_enabled(test).then(|| (T::default(), app_name::<T>(tag)))
}

/// A pool of at most `max` sessions named `app`, waiting up to 20 s.
fn pool<M: PgClient, R: Runtime + Default>(app: &str, max: u32) -> Pool<M, R> {
    Pool::builder()
        .address("127.0.0.1:5432")
        .max_pool_size(max)
        .wait_queue_timeout(Duration::from_secs(20))
        .build(M::with_config(config(app)))
        .unwrap()
}

/// Two hundred tasks, three queries each, on a pool of maxPoolSize 10:
/// the server never sees more than 10 of its sessions (watched in
/// `pg_stat_activity`), at most 10 are opened, and closing the pool
/// closes them.
pub async fn two_hundred_tasks_never_open_more_than_max_pool_size_sessions<
    M: PgClient,
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let Some((t, app)) = with_server::<T>(
        "two_hundred_tasks_never_open_more_than_max_pool_size_sessions",
        "max",
    ) else {
        return;
    };
    let pool = pool::<M, R>(&app, 10);
    let admin = admin().await;
    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicI64::new(0));
    let watcher = {
        let (done, most, app, t2) = (done.clone(), most.clone(), app.clone(), t.clone());
        spawn(&t, async move {
            while !done.load(Ordering::SeqCst) {
                let now = sessions(&admin, &app).await;
                most.fetch_max(now, Ordering::SeqCst);
                sleep(&t2, Duration::from_millis(2)).await;
            }
            admin
        })
    };
    let mut tasks = Vec::new();
    for n in 0..200i32 {
        let pool = pool.clone();
        tasks.push(spawn(&t, async move {
            for round in 0..3i32 {
                let mut conn = pool.get().await.unwrap();
                let row = M::query_one(
                    &mut conn,
                    "SELECT $1::int4 + $2::int4, pg_sleep(0.002)::text",
                    &[&n, &round],
                )
                .await
                .unwrap();
                assert_eq!(row.get::<_, i32>(0), n + round);
            }
        }));
    }
    for task in tasks {
        task.await;
    }
    done.store(true, Ordering::SeqCst);
    let admin = watcher.await;
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
        sleep(&t, Duration::from_millis(10)).await;
    }
}

/// Runs one query, retrying once on another connection if it fails, as
/// an application would. Returns the server process ids of the sessions it
/// failed on. A checkout that fails because a connect failed (the killer
/// hit a session being established: the pool cleared itself) is retried
/// too: that is no query lost to a dead session. `retrying`, if given,
/// counts the queries between their first failure and their outcome.
pub async fn query_retrying_once<M: PgClient, R: Runtime>(
    pool: &Pool<M, R>,
    t: &impl Runtime,
    n: i32,
    retrying: Option<&AtomicUsize>,
) -> Result<Vec<i32>, String> {
    let mut failed_on = Vec::new();
    let give_up = Instant::now() + Duration::from_secs(20);
    let outcome = loop {
        if failed_on.len() == 2 {
            break Err(format!("query {n} failed twice, on sessions {failed_on:?}"));
        }
        let mut conn = match pool.get().await {
            Ok(conn) => conn,
            Err(GetError::CheckOut(
                CheckOutError::PoolCleared { .. } | CheckOutError::ConnectionError { .. },
            )) if Instant::now() < give_up => {
                sleep(t, Duration::from_millis(5)).await;
                continue;
            }
            Err(e) => break Err(e.to_string()),
        };
        match M::query_one(&mut conn, "SELECT $1::int4", &[&n]).await {
            Ok(row) => {
                assert_eq!(row.get::<_, i32>(0), n);
                break Ok(());
            }
            Err(_) => {
                if failed_on.is_empty() {
                    retrying.map(|r| r.fetch_add(1, Ordering::SeqCst));
                }
                failed_on.push(M::backend_pid(&conn));
                // Its session is gone or in an unknown state: never reuse it.
                conn.mark_broken();
            }
        }
    };
    if !failed_on.is_empty() {
        retrying.map(|r| r.fetch_sub(1, Ordering::SeqCst));
    }
    outcome.map(|()| failed_on)
}

/// Sessions killed with `pg_terminate_backend` while idle, while checked
/// out, and at random under load: dead idle sessions are never handed out,
/// dead ones come back closed (reason `error`), they are replaced, and
/// each costs at most one failed query.
pub async fn killed_sessions_are_detected_replaced_and_cost_at_most_one_query_each<
    M: PgClient,
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let Some((t, app)) = with_server::<T>(
        "killed_sessions_are_detected_replaced_and_cost_at_most_one_query_each",
        "kill",
    ) else {
        return;
    };
    let pool = pool::<M, R>(&app, 4);
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
    let admin = admin().await;

    // 1. Idle sessions killed: the check on checkout refuses them (a
    //    client that reads while idle has seen its socket close; another
    //    is asked with a round trip), so no query even fails.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(pool.get().await.unwrap());
    }
    let first_pids: Vec<i32> = held.iter().map(|c| M::backend_pid(c)).collect();
    drop(held);
    assert_eq!(kill_all(&admin, &app).await, 4);
    while sessions(&admin, &app).await > 0 {
        sleep(&t, Duration::from_millis(5)).await;
    }
    // Let the clients read the server's goodbye.
    sleep(&t, Duration::from_millis(100)).await;
    for n in 0..20 {
        let failed_on = query_retrying_once(&pool, &t, n, None).await.unwrap();
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
        !first_pids.contains(&M::backend_pid(&conn)),
        "a killed session came back"
    );
    drop(conn);

    // 2. A session killed while checked out: the query on it fails, the
    //    guard marked broken closes it (reason `error`).
    let mut conn = pool.get().await.unwrap();
    let victim = M::backend_pid(&conn);
    admin
        .query_one("SELECT pg_terminate_backend($1)", &[&victim])
        .await
        .unwrap();
    let err = M::query_one(&mut conn, "SELECT 1", &[]).await.unwrap_err();
    eprintln!("the query on the killed session failed with: {err}");
    conn.mark_broken();
    drop(conn);
    assert_eq!(closed_by_error.load(Ordering::SeqCst), 5);
    //    Not marked and not used after the kill, it is still closed as an
    //    error on return: found broken (`is_broken`) by a client that saw
    //    its socket close, once it has; by another, which has not read its
    //    socket since, the reset's round trip fails. No query fails.
    let conn = pool.get().await.unwrap();
    let victim2 = M::backend_pid(&conn);
    admin
        .query_one("SELECT pg_terminate_backend($1)", &[&victim2])
        .await
        .unwrap();
    let t0 = Instant::now();
    while session_exists(&admin, victim2).await || (M::READS_WHILE_IDLE && !M::is_closed(&conn)) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the session outlived its kill, or the client never noticed"
        );
        sleep(&t, Duration::from_millis(2)).await;
    }
    drop(conn);
    assert_eq!(closed_by_error.load(Ordering::SeqCst), 6);
    let failed_on = query_retrying_once(&pool, &t, 7, None).await.unwrap();
    assert!(failed_on.is_empty(), "a killed session was reused: {failed_on:?}");
    assert_eq!(closed_by_error.load(Ordering::SeqCst), 6);
    let conn = pool.get().await.unwrap();
    assert!(![victim, victim2].contains(&M::backend_pid(&conn)));
    drop(conn);

    // 3. Sessions killed at random under load: every query succeeds with at
    //    most one retry, and no dead session makes more than one query fail.
    //    The load runs until the killer has killed KILLS sessions, however
    //    fast or slow the machine: a fixed amount of work can end before
    //    any session is old enough to be a victim.
    const KILLS: usize = 3;
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicUsize::new(0));
    let retrying = Arc::new(AtomicUsize::new(0));
    // One kill at a time, 20 ms apart, each seen through before the next:
    // the session gone, the pool done with it (closed as an error), and no
    // query still retrying. So a retry never meets a second fresh corpse
    // (a retry can take longer than 20 ms behind forty tasks on a small
    // machine), and any second failure of a query is a dead session
    // handed out again.
    let killer = {
        let (stop, kills, retrying, closed) = (
            stop.clone(),
            kills.clone(),
            retrying.clone(),
            closed_by_error.clone(),
        );
        let (app, t2) = (app.clone(), t.clone());
        spawn(&t, async move {
            while !stop.load(Ordering::SeqCst) {
                sleep(&t2, Duration::from_millis(20)).await;
                while retrying.load(Ordering::SeqCst) > 0 && !stop.load(Ordering::SeqCst) {
                    sleep(&t2, Duration::from_millis(1)).await;
                }
                // Stopped while waiting: the wait above ended without the
                // retries being over, so a kill now could meet one.
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let closed_before = closed.load(Ordering::SeqCst);
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
                    while session_exists(&admin, pid).await
                        || closed.load(Ordering::SeqCst) == closed_before && !stop.load(Ordering::SeqCst)
                    {
                        sleep(&t2, Duration::from_millis(1)).await;
                    }
                    kills.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    let mut tasks = Vec::new();
    for task in 0..40 {
        let (pool, stop, retrying, t2) = (pool.clone(), stop.clone(), retrying.clone(), t.clone());
        tasks.push(spawn(&t, async move {
            let mut failures = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let n = task * 100_000 + i;
                failures.extend(query_retrying_once(&pool, &t2, n, Some(&retrying)).await?);
                sleep(&t2, Duration::from_millis(2)).await;
                i += 1;
            }
            Ok::<_, String>(failures)
        }));
    }
    let t0 = Instant::now();
    while kills.load(Ordering::SeqCst) < KILLS && t0.elapsed() < Duration::from_secs(30) {
        sleep(&t, Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut failures_per_session: BTreeMap<i32, usize> = BTreeMap::new();
    for task in tasks {
        for pid in task.await.unwrap() {
            *failures_per_session.entry(pid).or_default() += 1;
        }
    }
    killer.await;
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

/// No server needed: nothing listens on port 1. A refused connection is a
/// network error (possibly overload): the checkout waits for the server
/// until its deadline, then names the cause; told not to wait, it fails at
/// once with the manager's own error, and the pool is not cleared.
pub async fn a_refused_connection_gives_its_real_error_not_a_timeout<
    M: PgClient,
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let app = app_name::<T>("refused");
    let pool: Pool<M, R> = Pool::builder()
        .address("127.0.0.1:1")
        .wait_queue_timeout(Duration::from_millis(300))
        .build(M::with_config(config_on(1, &app)))
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
    let pool: Pool<M, R> = Pool::builder()
        .address("127.0.0.1:1")
        .configure(|o| o.keep_waiting_on_overload(false))
        .wait_queue_timeout(Duration::from_secs(10))
        .build(M::with_config(config_on(1, &app)))
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
        crate::caused_by_io(&err, std::io::ErrorKind::ConnectionRefused),
        "the chain of {err:?} ends in ConnectionRefused"
    );
    assert_eq!(pool.status().state, PoolState::Ready, "not cleared");
}

/// A PostgreSQL run with its sessions killed midway, recorded by the
/// flight recorder, replays exactly: the core given the same inputs at the
/// same instants gives every output as it did against the server.
pub async fn a_recorded_postgresql_run_replays_exactly<
    M: PgClient,
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let Some((t, app)) = with_server::<T>("a_recorded_postgresql_run_replays_exactly", "replay") else {
        return;
    };
    let pool: Pool<M, R> = Pool::builder()
        .address("127.0.0.1:5432")
        .max_pool_size(4)
        .min_pool_size(1)
        .wait_queue_timeout(Duration::from_secs(20))
        .flight_recorder(100_000)
        .build(M::with_config(config(&app)))
        .unwrap();
    let admin = admin().await;
    let mut tasks = Vec::new();
    for n in 0..16i32 {
        let (pool, t2) = (pool.clone(), t.clone());
        tasks.push(spawn(&t, async move {
            for _ in 0..5 {
                // A killed session fails its query; the pool replaces it.
                let _ = query_retrying_once(&pool, &t2, n, None).await;
            }
        }));
    }
    sleep(&t, Duration::from_millis(20)).await;
    kill_all(&admin, &app).await;
    for task in tasks {
        task.await;
    }
    // Connections come back after their reset, on a task of their own:
    // waiting for them all makes the recording and the status final.
    assert_eq!(pool.close_gracefully(Duration::from_secs(10)).await, 0);
    let recording = pool.recording().expect("the recorder runs");
    assert!(recording.inputs() > 100, "{} inputs", recording.inputs());
    let mut file = Vec::new();
    recording.write_to(&mut file).unwrap();
    let replay = Recording::read_from(&file[..])
        .unwrap()
        .replay(Instant::now())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(replay.steps().len(), recording.inputs());
    assert_eq!(replay.steps().last().map(|s| s.status), Some(pool.status()));
}
