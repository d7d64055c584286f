//! `timeoutMS` from checkout to reply, against servers on loopback ports
//! (the client-side operations timeout specification's rules for one
//! server's pool; docs/spec-compliance.md lists them): each stage that
//! can take the time ends the operation within a few milliseconds of its
//! deadline, with the stage named; the connection is closed when the
//! command went out, and the pool is never cleared.

use std::time::{Duration, Instant};

use bson::{doc, Document};
use cmap_core::PoolState;

use crate::error::{Error, Stage};
use crate::hostile_tests::{after_hello, header, pool, runtime, server, server_paced, Raw};
use crate::test_server::{hello_reply, op_msg_reply, serve};
use crate::wire::HEADER_LEN;
use crate::MongoPool;

/// How late past its deadline an operation may return: the timer's and
/// the scheduler's slack on a loaded test machine.
const SLACK: Duration = Duration::from_millis(100);

/// `command` run on `pool` fails, `timeout` after it began (give or take
/// [`SLACK`]).
async fn fails_by(pool: &impl MongoPool, command: &Document, timeout: Duration) -> Error {
    let started = Instant::now();
    let err = pool.run_command("db", command).await.unwrap_err();
    within(started, timeout);
    err
}

fn within(started: Instant, timeout: Duration) {
    let elapsed = started.elapsed();
    assert!(
        elapsed >= timeout.saturating_sub(Duration::from_millis(5)) && elapsed <= timeout + SLACK,
        "returned after {elapsed:?} for a {timeout:?} deadline"
    );
}

/// An operation of a pool of one connection against a server whose first
/// connection answers commands with `hostile` (after the hello) fails at
/// `stage` by its 300 ms deadline; the pool stays ready, closes the
/// connection, and serves the next operation on a new one.
fn times_out_at(stage: Stage, pace: Option<Duration>, hostile: impl FnMut(i32) -> Vec<u8> + Send + 'static) {
    let (address, _) = server_paced(pace, after_hello(hostile));
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?timeoutMS=300&"));
        let err = fails_by(&pool, &doc! { "find": "c" }, Duration::from_millis(300)).await;
        assert!(
            matches!(err, Error::TimedOut { during, .. } if during == stage),
            "{err:?}"
        );
        assert!(err.is_timeout() && err.is_network(), "{err:?}");
        let (status, stats) = (pool.status(), pool.stats());
        assert_eq!(
            (status.state, status.generation, status.total),
            (PoolState::Ready, 0, 0)
        );
        assert_eq!(stats.returns_bad, 1, "the connection is closed");
        // The slot serves again (with time to spare on a loaded machine).
        let deadline = Instant::now() + Duration::from_secs(10);
        pool.run_command_until("db", &doc! { "ping": 1 }, Some(deadline))
            .await
            .unwrap();
    });
}

#[test]
fn a_reply_that_never_comes_times_out_while_reading() {
    times_out_at(Stage::Reply, None, |_| Vec::new());
}

#[test]
fn half_a_header_then_silence_times_out_while_reading_and_closes_the_connection() {
    times_out_at(Stage::Reply, None, |id| header(64, id)[..HEADER_LEN / 2].to_vec());
}

#[test]
fn the_reads_of_a_reply_are_bounded_together_on_every_runtime() {
    // A byte every 20 ms: no read waits long, the reply takes a second.
    let dribble = |id| op_msg_reply(id, &doc! { "ok": 1.0, "pad": "x".repeat(20) });
    let timeout = Duration::from_millis(300);
    let uri = |address| format!("mongodb://{address}/?timeoutMS=300&maxPoolSize=1");
    let expect_reply_timeout = |err: Error| {
        assert!(
            matches!(
                err,
                Error::TimedOut {
                    during: Stage::Reply,
                    ..
                }
            ),
            "{err:?}"
        );
    };

    let (address, _) = server_paced(Some(Duration::from_millis(20)), after_hello(dribble));
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?timeoutMS=300&"));
        let err = fails_by(&pool, &doc! { "find": "c" }, timeout).await;
        expect_reply_timeout(err);
    });

    let (address, _) = server_paced(Some(Duration::from_millis(20)), after_hello(dribble));
    let uri_blocking = uri(address);
    let manager = crate::blocking::MongoManager::new(&uri_blocking).unwrap();
    let pool = cmap_blocking::Pool::builder()
        .connection_string(&uri_blocking)
        .build(manager)
        .unwrap();
    let started = Instant::now();
    let err = crate::blocking::MongoPool::run_command(&pool, "db", &doc! { "find": "c" }).unwrap_err();
    within(started, timeout);
    expect_reply_timeout(err);
    assert_eq!(pool.status().total, 0, "closed");

    let (address, _) = server_paced(Some(Duration::from_millis(20)), after_hello(dribble));
    let uri_smol = uri(address);
    smol::block_on(async {
        let pool = cmap_async_std::Pool::builder()
            .connection_string(&uri_smol)
            .build(crate::AsyncIoManager::new(&uri_smol).unwrap())
            .unwrap();
        let err = fails_by(&pool, &doc! { "find": "c" }, timeout).await;
        expect_reply_timeout(err);
    });
}

#[test]
fn a_write_the_server_does_not_take_times_out_while_sending() {
    // The server answers the hello, then reads nothing more: a 32 MB
    // command fills the socket buffers and the write waits.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut stream, _) = listener.accept().unwrap();
        let mut header = [0u8; HEADER_LEN];
        stream.read_exact(&mut header).unwrap();
        let length = i32::from_le_bytes(header[..4].try_into().unwrap());
        let mut body = vec![0; usize::try_from(length).unwrap() - HEADER_LEN];
        stream.read_exact(&mut body).unwrap();
        let id = i32::from_le_bytes(header[4..8].try_into().unwrap());
        stream.write_all(&op_msg_reply(id, &hello_reply())).unwrap();
        std::thread::sleep(Duration::from_secs(30));
    });
    runtime().block_on(async {
        // 1 s: a debug build encodes 32 MB slowly on a loaded machine.
        let pool = pool(&format!("mongodb://{address}/?timeoutMS=1000&"));
        let big = doc! { "insert": "c", "documents": [{ "x": "y".repeat(32 << 20) }] };
        let err = fails_by(&pool, &big, Duration::from_millis(1000)).await;
        assert!(
            matches!(
                err,
                Error::TimedOut {
                    during: Stage::Send,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!((pool.status().total, pool.status().state), (0, PoolState::Ready));
    });
}

#[test]
fn the_checkout_waits_only_what_is_left_and_says_so_with_the_pools_error() {
    let address = serve(crate::test_server::mongod);
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?timeoutMS=200&"));
        let held = pool.get().await.unwrap();
        let err = fails_by(&pool, &doc! { "ping": 1 }, Duration::from_millis(200)).await;
        let Error::TimedOut {
            during: Stage::CheckOut,
            cause: Some(cause),
        } = &err
        else {
            panic!("{err:?}");
        };
        assert!(matches!(**cause, Error::Pool(_)), "{cause:?}");
        assert!(err.to_string().contains(&cause.to_string()), "{err}");
        assert!(!err.is_network());
        drop(held);
        assert_eq!(pool.status().available, 1, "the held connection is untouched");
    });
}

#[test]
fn a_connect_the_checkout_started_is_waited_for_only_what_is_left() {
    // connectTimeoutMS is 5 s in `pool`; timeoutMS 150 ends the wait first.
    let (address, _) = server(|| -> Raw {
        Box::new(|_, _: &Document| {
            std::thread::sleep(Duration::from_secs(3));
            None
        })
    });
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?timeoutMS=150&"));
        let err = fails_by(&pool, &doc! { "ping": 1 }, Duration::from_millis(150)).await;
        assert!(
            matches!(
                err,
                Error::TimedOut {
                    during: Stage::CheckOut,
                    ..
                }
            ),
            "{err:?}"
        );
    });
}

#[test]
fn a_deadline_given_per_call_replaces_timeout_ms_and_none_keeps_todays_behaviour() {
    let address = serve(|| {
        |command: &Document| {
            let mut reply = hello_reply();
            reply.insert(
                "maxTimeMS",
                command.get("maxTimeMS").cloned().unwrap_or(bson::Bson::Null),
            );
            Some(reply)
        }
    });
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?timeoutMS=60000&"));
        let sent = |reply: Document| reply.get_i64("maxTimeMS").ok();
        let reply = pool.run_command("db", &doc! { "ping": 1 }).await.unwrap();
        assert!(sent(reply).is_some_and(|ms| (59_000..=60_000).contains(&ms)));
        let deadline = Instant::now() + Duration::from_secs(2);
        let reply = pool
            .run_command_until("db", &doc! { "ping": 1 }, Some(deadline))
            .await
            .unwrap();
        assert!(sent(reply).is_some_and(|ms| (1_000..=2_000).contains(&ms)));
        let reply = pool
            .run_command_until("db", &doc! { "ping": 1 }, None)
            .await
            .unwrap();
        assert_eq!(sent(reply), None, "no deadline: no maxTimeMS");

        let untimed = crate::hostile_tests::pool(&format!("mongodb://{address}/?"));
        let reply = untimed.run_command("db", &doc! { "ping": 1 }).await.unwrap();
        assert_eq!(sent(reply), None, "without timeoutMS nothing changes");
    });
}

/// A server that refuses the first `refusals` finds as overloaded (code
/// 462, both labels, `baseBackoffMS`), answers the rest, and notes when
/// each find arrived.
fn overloaded_server(
    refusals: usize,
    base_backoff_ms: i32,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<Instant>>>,
) {
    let arrivals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = arrivals.clone();
    let address = serve(move || {
        let seen = seen.clone();
        move |command: &Document| {
            if !command.contains_key("find") {
                return Some(hello_reply());
            }
            let mut seen = seen.lock().unwrap();
            seen.push(Instant::now());
            Some(if seen.len() <= refusals {
                doc! {
                    "ok": 0.0, "code": 462, "codeName": "IngressRequestRateLimitExceeded",
                    "errmsg": "rate exceeded", "baseBackoffMS": base_backoff_ms,
                    "errorLabels": ["SystemOverloadedError", "RetryableError"],
                }
            } else {
                doc! { "ok": 1.0 }
            })
        }
    });
    (address, arrivals)
}

#[test]
fn an_overloaded_server_is_retried_with_the_formulas_backoff_on_fresh_checkouts() {
    let (address, arrivals) = overloaded_server(usize::MAX, 20);
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?maxAdaptiveRetries=3&"));
        let err = pool.run_command("db", &doc! { "find": "c" }).await.unwrap_err();
        assert_eq!(err.command_error().map(|e| e.code), Some(462), "{err:?}");
        let arrivals = arrivals.lock().unwrap();
        assert_eq!(arrivals.len(), 4, "the attempt and maxAdaptiveRetries retries");
        for (retry, pair) in (1..).zip(arrivals.windows(2)) {
            // jitter * min(10 s, 20 ms * 2^retry), jitter < 1.
            let most = Duration::from_millis(20 << retry);
            let gap = pair[1] - pair[0];
            assert!(
                gap < most + SLACK,
                "retry {retry} after {gap:?}, formula < {most:?}"
            );
        }
        assert_eq!(pool.stats().requests, 4, "each attempt a fresh checkout");
        assert_eq!(pool.status().state, PoolState::Ready);
    });

    // Two refusals, then an answer; and no retry without maxAdaptiveRetries.
    let (address, arrivals) = overloaded_server(2, 1);
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?maxAdaptiveRetries=2&"));
        pool.run_command("db", &doc! { "find": "c" }).await.unwrap();
        assert_eq!(arrivals.lock().unwrap().len(), 3);
    });
    let (address, arrivals) = overloaded_server(1, 1);
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?"));
        assert!(pool.run_command("db", &doc! { "find": "c" }).await.is_err());
        assert_eq!(arrivals.lock().unwrap().len(), 1, "opt-in");
    });
}

/// Client backpressure, "Overload retry policy" 2.4: `runCommand` is
/// retried only with both `retryReads` and `retryWrites` on.
#[test]
fn a_command_is_retried_as_overloaded_only_with_both_retry_reads_and_retry_writes() {
    for (flags, attempts) in [
        ("retryReads=false&", 1),
        ("retryWrites=false&", 1),
        ("retryReads=true&retryWrites=true&", 2),
    ] {
        let (address, arrivals) = overloaded_server(1, 1);
        runtime().block_on(async {
            let pool = pool(&format!("mongodb://{address}/?maxAdaptiveRetries=2&{flags}"));
            let outcome = pool.run_command("db", &doc! { "find": "c" }).await;
            assert_eq!(arrivals.lock().unwrap().len(), attempts, "{flags}");
            assert_eq!(outcome.is_ok(), attempts == 2, "{flags}");
        });
    }
    let (address, arrivals) = overloaded_server(1, 1);
    let uri = format!("mongodb://{address}/?maxAdaptiveRetries=2&retryWrites=false&maxPoolSize=1");
    let pool = cmap_blocking::Pool::builder()
        .connection_string(&uri)
        .build(crate::blocking::MongoManager::new(&uri).unwrap())
        .unwrap();
    assert!(crate::blocking::MongoPool::run_command(&pool, "db", &doc! { "find": "c" }).is_err());
    assert_eq!(arrivals.lock().unwrap().len(), 1, "blocking: the same");
}

#[test]
fn overload_retries_end_within_timeout_ms() {
    // A base of 1 s: the backoff (up to 2 s, then 4 s) rarely fits in
    // 300 ms, and the operation gives up rather than overrun.
    let (address, arrivals) = overloaded_server(usize::MAX, 1000);
    runtime().block_on(async {
        let pool = pool(&format!(
            "mongodb://{address}/?maxAdaptiveRetries=5&timeoutMS=300&"
        ));
        let started = Instant::now();
        let err = pool.run_command("db", &doc! { "find": "c" }).await.unwrap_err();
        assert!(
            started.elapsed() <= Duration::from_millis(300) + SLACK,
            "{:?}",
            started.elapsed()
        );
        assert!(
            err.command_error().is_some_and(|e| e.code == 462) || err.is_timeout(),
            "{err:?}"
        );
        assert!((1..=6).contains(&arrivals.lock().unwrap().len()));
    });
}

/// The `maxTimeMS` of each handshake command (the `hello`, the SCRAM
/// steps) `sent` holds, emptying it.
fn handshake_max_time_ms(sent: &std::sync::Mutex<Vec<Document>>) -> Vec<Option<i64>> {
    let handshake = ["isMaster", "saslStart", "saslContinue"];
    std::mem::take(&mut *sent.lock().unwrap())
        .iter()
        .filter(|c| handshake.iter().any(|name| c.contains_key(name)))
        .map(|c| c.get_i64("maxTimeMS").ok())
        .collect()
}

#[test]
fn handshake_commands_carry_what_the_checkout_has_left_or_timeout_ms_for_min_pool_size() {
    let (address, sent) = crate::test_server::mongod_recorded(Duration::ZERO);
    let uri = format!("mongodb://app:secret@{address}/shop?timeoutMS=60000&");
    runtime().block_on(async {
        // A connection the checkout needs: what is left of its deadline.
        let pool = pool(&uri);
        let deadline = Instant::now() + Duration::from_secs(2);
        pool.run_command_until("db", &doc! { "ping": 1 }, Some(deadline))
            .await
            .unwrap();
        let sent_ms = handshake_max_time_ms(&sent);
        assert_eq!(
            sent_ms.len(),
            2,
            "hello (with saslStart), saslContinue: {sent_ms:?}"
        );
        assert!(
            sent_ms
                .iter()
                .all(|ms| ms.is_some_and(|ms| (1_000..=2_000).contains(&ms))),
            "{sent_ms:?}"
        );

        // One made for minPoolSize: timeoutMS for each command.
        let pool = pool_min_one(&uri);
        while pool.status().available == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let sent_ms = handshake_max_time_ms(&sent);
        assert!(
            sent_ms.len() == 2
                && sent_ms
                    .iter()
                    .all(|ms| ms.is_some_and(|ms| (59_000..=60_000).contains(&ms))),
            "{sent_ms:?}"
        );

        // Without timeoutMS, as before: no maxTimeMS.
        let pool = crate::hostile_tests::pool(&format!("mongodb://app:secret@{address}/shop?"));
        pool.run_command("db", &doc! { "ping": 1 }).await.unwrap();
        assert_eq!(handshake_max_time_ms(&sent), [None, None]);
    });
}

fn pool_min_one(uri: &str) -> cmap_tokio::Pool<crate::MongoManager> {
    crate::hostile_tests::pool(&format!("{uri}minPoolSize=1&"))
}

#[test]
fn a_hello_never_answered_ends_with_the_checkouts_time_or_timeout_ms_not_connect_timeout_ms() {
    use cmap_async::ManageConnection;
    let address = crate::test_server::silent();
    runtime().block_on(async {
        // connectTimeoutMS 5 s; the checkout that needs the connection
        // has 150 ms left.
        let manager = crate::MongoManager::new(&format!(
            "mongodb://{address}/?timeoutMS=60000&connectTimeoutMS=5000"
        ))
        .unwrap();
        let started = Instant::now();
        let err = manager
            .connect_until(Some(started + Duration::from_millis(150)))
            .await
            .unwrap_err();
        within(started, Duration::from_millis(150));
        assert!(
            matches!(err, Error::Timeout { during: Stage::Hello, after } if after <= Duration::from_millis(150)),
            "{err:?}"
        );
        assert_eq!(err.establish_kind(), cmap_core::EstablishErrorKind::Network, "labelled, no clear");

        // For minPoolSize: timeoutMS (200 ms) for the hello.
        let manager = crate::MongoManager::new(&format!(
            "mongodb://{address}/?timeoutMS=200&connectTimeoutMS=5000"
        ))
        .unwrap();
        let started = Instant::now();
        let err = manager.connect_until(None).await.unwrap_err();
        within(started, Duration::from_millis(200));
        assert!(
            matches!(err, Error::Timeout { during: Stage::Hello, after } if after == Duration::from_millis(200)),
            "{err:?}"
        );
    });
    // The blocking manager does the same: told of no checkout, and of
    // one with 150 ms left.
    let uri = format!("mongodb://{address}/?timeoutMS=200&connectTimeoutMS=5000");
    let manager = crate::blocking::MongoManager::new(&uri).unwrap();
    let started = Instant::now();
    let err = manager.open().unwrap_err();
    within(started, Duration::from_millis(200));
    assert!(
        matches!(err, Error::Timeout { during: Stage::Hello, after } if after == Duration::from_millis(200)),
        "{err:?}"
    );
    let uri = format!("mongodb://{address}/?timeoutMS=60000&connectTimeoutMS=5000");
    let manager = crate::blocking::MongoManager::new(&uri).unwrap();
    let started = Instant::now();
    let err =
        cmap_blocking::ManageConnection::connect_until(&manager, Some(started + Duration::from_millis(150)))
            .unwrap_err();
    within(started, Duration::from_millis(150));
    assert!(
        matches!(err, Error::Timeout { during: Stage::Hello, after } if after <= Duration::from_millis(150)),
        "{err:?}"
    );
}

#[test]
fn for_min_pool_size_each_handshake_command_gets_timeout_ms_afresh() {
    use cmap_async::ManageConnection;
    // Each reply 300 ms late: the hello and saslContinue take 600 ms
    // together, each within its own 500 ms.
    let (address, _) = crate::test_server::mongod_recorded(Duration::from_millis(300));
    let uri = format!("mongodb://app:secret@{address}/shop?timeoutMS=500&connectTimeoutMS=5000");
    runtime().block_on(async {
        let manager = crate::MongoManager::new(&uri).unwrap();
        let started = Instant::now();
        manager
            .connect_until(None)
            .await
            .expect("refreshed after each command");
        assert!(started.elapsed() >= Duration::from_millis(600));
        // For a checkout with 500 ms left, the same handshake does not fit.
        let started = Instant::now();
        let err = manager
            .connect_until(Some(started + Duration::from_millis(500)))
            .await
            .unwrap_err();
        within(started, Duration::from_millis(500));
        // The hello, or (as a rule) the SCRAM step after it, ran out.
        let cause = match &err {
            Error::Authentication { cause, .. } => cause,
            _ => &err,
        };
        assert!(matches!(cause, Error::Timeout { .. }), "{err:?}");
    });
}
