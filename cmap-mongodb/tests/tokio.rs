//! The async manager against FerretDB (MongoDB's wire protocol, SCRAM):
//! the handshake the server sees, commands, and what the pool does with
//! each kind of establishment failure, the server refused, cut,
//! blackholed, killed and restarted. Runs with `CMAP_MONGO_TESTS=1`
//! (`.ci/services.sh` starts the servers); the tests that need no server
//! always run.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cmap_mongodb::bson::{doc, Document};
use cmap_mongodb::{Error, EstablishErrorKind, MongoManager, Stage};
use cmap_testkit::mongo::{self, OwnFerretDb};
use cmap_testkit::proxy::{Mode, Proxy};
use cmap_tokio::{GetError, Pool};
use common::{establish_kind, unique};

fn pool(uri: &str) -> Pool<MongoManager> {
    Pool::builder()
        .connection_string(uri)
        .build(MongoManager::new(uri).expect("a valid connection string"))
        .expect("a pool")
}

fn proxy_to(port: u16) -> Proxy {
    Proxy::start(([127, 0, 0, 1], port).into()).expect("a proxy")
}

#[tokio::test]
async fn commands_round_trip_on_an_authenticated_pool() {
    if !mongo::server_tests_enabled("commands_round_trip_on_an_authenticated_pool") {
        return;
    }
    let pool = pool(&format!("{}?maxPoolSize=2", mongo::AUTH_URI));
    let mut conn = pool.get().await.unwrap();
    assert_eq!(
        conn.run_command("admin", &doc! { "ping": 1 })
            .await
            .unwrap()
            .get_f64("ok")
            .ok(),
        Some(1.0)
    );
    let collection = unique("round_trip");
    let inserted = conn
        .run_command(
            "test",
            &doc! { "insert": &collection, "documents": [{ "_id": 1, "item": "tea" }] },
        )
        .await
        .unwrap();
    assert_eq!(inserted.get_i32("n").ok(), Some(1), "{inserted}");
    let found = conn
        .run_command("test", &doc! { "find": &collection, "filter": { "_id": 1 } })
        .await
        .unwrap();
    let batch = found
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1, "{found}");
    assert_eq!(batch[0].as_document().unwrap().get_str("item").ok(), Some("tea"));
    // A server error is typed, and leaves the connection usable.
    let err = conn
        .run_command(
            "test",
            &doc! { "insert": &collection, "documents": [{ "_id": 1 }] },
        )
        .await;
    // FerretDB reports a duplicate key as a write error inside an ok reply.
    if let Ok(reply) = &err {
        assert!(reply.get_array("writeErrors").is_ok(), "{reply}");
    }
    let unknown = conn
        .run_command("test", &doc! { "noSuchCommand": 1 })
        .await
        .unwrap_err();
    let server = unknown.command_error().expect("the server's error");
    assert_eq!(server.code_name, "CommandNotFound", "{unknown}");
    assert!(!conn.is_broken());
    conn.run_command("test", &doc! { "drop": &collection })
        .await
        .unwrap();
    assert_eq!(conn.server().max_wire_version, 21);
}

#[tokio::test]
async fn a_server_takes_the_max_time_ms_that_timeout_ms_adds() {
    if !mongo::server_tests_enabled("a_server_takes_the_max_time_ms_that_timeout_ms_adds") {
        return;
    }
    use cmap_mongodb::MongoPool;
    let pool = pool(&format!("{}?maxPoolSize=2&timeoutMS=5000", mongo::AUTH_URI));
    let collection = unique("timeout_ms");
    let find = doc! { "find": &collection, "filter": {} };
    let reply = pool.run_command("test", &find).await.unwrap();
    assert!(reply.get_document("cursor").is_ok(), "{reply}");
    // A deadline already past: nothing is sent, the connection is kept.
    let err = pool
        .run_command_until("test", &find, Some(Instant::now()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::TimedOut {
                during: Stage::BeforeSend,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(pool.status().available, 1);
}

#[tokio::test]
async fn the_server_sees_the_handshakes_metadata() {
    if !mongo::server_tests_enabled("the_server_sees_the_handshakes_metadata") {
        return;
    }
    // A server of the test's own logs every request it receives, as JSON
    // at DEBUG. It has no user: authentication fails after the hello,
    // which is what is looked at.
    let server = OwnFerretDb::start_logging_requests("metadata");
    let app = unique("app");
    let uri = format!(
        "mongodb://cmap:cmap-secret@127.0.0.1:{}/test?appName={app}",
        server.port()
    );
    let _ = MongoManager::new(&uri).unwrap().open().await;
    let log = server.log();
    let hello = log
        .lines()
        .find(|l| l.contains(&app))
        .unwrap_or_else(|| panic!("no request with {app} in the server's log"));
    for expected in [
        r#"\"isMaster\": 1"#,
        r#"\"helloOk\": true"#,
        r#"\"backpressure\": \"2\""#,
        r#"\"name\": \"cmap-mongodb\""#,
        r#"\"platform\": \"Rust, tokio\""#,
        r#"\"saslSupportedMechs\": \"test.cmap\""#,
        r#"\"speculativeAuthenticate\""#,
    ] {
        assert!(hello.contains(expected), "{expected} not in {hello}");
    }
    assert!(!hello.contains("cmap-secret"));
}

#[tokio::test]
async fn a_wrong_password_fails_the_checkout_with_the_servers_message_and_clears_the_pool() {
    if !mongo::server_tests_enabled("a_wrong_password_fails_the_checkout_with_the_servers_message") {
        return;
    }
    let uri = "mongodb://cmap:wrong-password@127.0.0.1:27017/test?waitQueueTimeoutMS=5000";
    let pool = pool(uri);
    let started = Instant::now();
    let err = pool.get().await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "failed at once, not at the deadline"
    );
    assert_eq!(
        establish_kind(&err),
        Some(EstablishErrorKind::Authentication),
        "{err}"
    );
    assert!(
        !err.has_label("SystemOverloadedError") && !err.is_retryable(),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("AuthenticationFailed") && message.contains("Authentication failed."),
        "{message}"
    );
    assert!(!message.contains("wrong-password"), "{message}");
    // The pool cleared: its generation moved on.
    assert!(pool.status().generation >= 1, "{:?}", pool.status());
}

#[tokio::test]
async fn refused_cut_and_blackholed_establishments_are_network_errors() {
    if !mongo::server_tests_enabled("refused_cut_and_blackholed_establishments_are_network_errors") {
        return;
    }
    let proxy = proxy_to(27017);
    let uri = |extra: &str| {
        format!(
            "mongodb://cmap:cmap-secret@127.0.0.1:{}/test?{extra}",
            proxy.port()
        )
    };

    proxy.set(Mode::Refuse);
    let manager = MongoManager::new(&uri("")).unwrap();
    let refused = manager.open().await.unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Network {
                during: Stage::Connect,
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(refused.establish_kind(), EstablishErrorKind::Network);

    // Accepted, then nothing: the hello times out.
    proxy.set(Mode::Blackhole);
    let manager = MongoManager::new(&uri("connectTimeoutMS=300")).unwrap();
    let blackholed = manager.open().await.unwrap_err();
    assert!(
        matches!(
            blackholed,
            Error::Timeout {
                during: Stage::Hello,
                ..
            }
        ),
        "{blackholed:?}"
    );
    assert_eq!(blackholed.establish_kind(), EstablishErrorKind::Network);
    assert!(blackholed.to_string().contains("300ms"), "{blackholed}");

    // The server's side cut while the hello waits for its reply.
    proxy.set(Mode::Delay(Duration::from_millis(200)));
    let manager = MongoManager::new(&uri("")).unwrap();
    let cutter = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        proxy.cut();
    };
    let (cut, ()) = tokio::join!(manager.open(), cutter);
    let cut = cut.unwrap_err();
    assert_eq!(cut.establish_kind(), EstablishErrorKind::Network, "{cut:?}");
    proxy.set(Mode::Pass);
    manager.open().await.unwrap();
}

#[tokio::test]
async fn a_dns_failure_is_other_and_a_stalled_tls_handshake_is_network() {
    let dns = MongoManager::new("mongodb://no-such-host.invalid/")
        .unwrap()
        .open()
        .await
        .unwrap_err();
    assert!(matches!(dns, Error::Dns { .. }), "{dns:?}");
    assert_eq!(dns.establish_kind(), EstablishErrorKind::Other);
    if !mongo::server_tests_enabled("a_dns_failure_is_other_and_a_stalled_tls_handshake_is_network") {
        return;
    }
    // The plain server reads our TLS ClientHello as a message still being
    // received and never answers: I/O during the TLS handshake, which may
    // be overload.
    let tls = MongoManager::new("mongodb://127.0.0.1:27018/?tls=true&connectTimeoutMS=500")
        .unwrap()
        .open()
        .await
        .unwrap_err();
    assert!(
        matches!(
            tls,
            Error::Timeout {
                during: Stage::Tls,
                ..
            }
        ),
        "{tls:?}"
    );
    assert_eq!(tls.establish_kind(), EstablishErrorKind::Network);
}

#[tokio::test]
async fn a_short_outage_fails_no_checkout_and_the_pool_is_not_cleared() {
    if !mongo::server_tests_enabled("a_short_outage_fails_no_checkout") {
        return;
    }
    let proxy = proxy_to(27018);
    let pool = pool(&format!(
        "mongodb://127.0.0.1:{}/?maxPoolSize=4&waitQueueTimeoutMS=5000",
        proxy.port()
    ));
    proxy.set(Mode::Refuse);
    let waiting: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut conn = pool.get().await?;
                conn.run_command("admin", &doc! { "ping": 1 })
                    .await
                    .map_err(|e| e.to_string())
                    .unwrap();
                Ok::<(), GetError>(())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        pool.status().generation,
        0,
        "a refused connect does not clear the pool"
    );
    proxy.set(Mode::Pass);
    for task in waiting {
        task.await.unwrap().expect("every checkout waited out the outage");
    }
    assert_eq!(pool.status().generation, 0);
}

#[tokio::test]
async fn a_connection_cut_mid_use_is_broken_and_replaced() {
    if !mongo::server_tests_enabled("a_connection_cut_mid_use_is_broken_and_replaced") {
        return;
    }
    let proxy = proxy_to(27018);
    let pool = pool(&format!("mongodb://127.0.0.1:{}/?maxPoolSize=1", proxy.port()));
    let mut conn = pool.get().await.unwrap();
    conn.run_command("admin", &doc! { "ping": 1 }).await.unwrap();
    proxy.cut();
    let err = conn.run_command("admin", &doc! { "ping": 1 }).await.unwrap_err();
    assert!(err.is_network(), "{err:?}");
    assert!(conn.is_broken());
    assert!(matches!(
        conn.run_command("admin", &doc! { "ping": 1 }).await,
        Err(Error::Broken)
    ));
    drop(conn);
    // The broken one was closed; the next checkout gets a new one.
    let mut conn = pool.get().await.unwrap();
    conn.run_command("admin", &doc! { "ping": 1 }).await.unwrap();
    assert_eq!(pool.stats().connections_opened, 2);
}

#[tokio::test]
async fn a_cancelled_command_leaves_its_connection_broken() {
    if !mongo::server_tests_enabled("a_cancelled_command_leaves_its_connection_broken") {
        return;
    }
    let proxy = proxy_to(27018);
    let pool = pool(&format!("mongodb://127.0.0.1:{}/?maxPoolSize=1", proxy.port()));
    let mut conn = pool.get().await.unwrap();
    conn.run_command("admin", &doc! { "ping": 1 }).await.unwrap();
    proxy.set(Mode::Blackhole);
    let cancelled = tokio::time::timeout(
        Duration::from_millis(100),
        conn.run_command("admin", &doc! { "ping": 1 }),
    )
    .await;
    assert!(cancelled.is_err(), "the command was cut short");
    assert!(
        conn.is_broken(),
        "its reply may still come: the connection is out of step"
    );
}

#[tokio::test]
async fn checkouts_waiting_through_a_server_restart_are_served() {
    if !mongo::server_tests_enabled("checkouts_waiting_through_a_server_restart_are_served") {
        return;
    }
    let mut server = OwnFerretDb::start("restart");
    let pool = pool(&format!(
        "mongodb://127.0.0.1:{}/?maxPoolSize=4&waitQueueTimeoutMS=10000",
        server.port()
    ));
    // Warm: four connections in the pool.
    let held = hold(&pool, 4).await;
    drop(held);
    server.kill();
    let waiting: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                loop {
                    let mut conn = pool.get().await.expect("the checkout waits out the restart");
                    match conn.run_command("admin", &doc! { "ping": 1 }).await {
                        Ok(_) => return,
                        // A connection from before the restart: broken,
                        // closed on return; the next one is new.
                        Err(e) => assert!(e.is_network(), "{e}"),
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart();
    for task in waiting {
        tokio::time::timeout(Duration::from_secs(15), task)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(
        pool.status().generation,
        0,
        "network errors do not clear the pool"
    );
}

async fn hold(pool: &Pool<MongoManager>, n: usize) -> Vec<cmap_tokio::PooledConnection<'_, MongoManager>> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(pool.get().await.unwrap());
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_tasks_ping_for_ten_seconds_with_no_error_and_no_leaked_connection() {
    if !mongo::server_tests_enabled("fifty_tasks_ping_for_ten_seconds") {
        return;
    }
    let server = OwnFerretDb::start("fifty");
    let before = server.open_connections();
    let pool = pool(&format!("mongodb://127.0.0.1:{}/?maxPoolSize=10", server.port()));
    let end = Instant::now() + Duration::from_secs(10);
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut pings = 0u64;
                while Instant::now() < end {
                    let mut conn = pool.get().await.expect("a checkout");
                    conn.run_command("admin", &doc! { "ping": 1 })
                        .await
                        .expect("a ping");
                    pings += 1;
                }
                pings
            })
        })
        .collect();
    let mut pings = 0;
    for task in tasks {
        pings += task.await.unwrap();
    }
    assert!(pings > 50, "{pings} pings");
    let stats = pool.stats();
    assert!(
        (1..=10).contains(&stats.connections_opened) && stats.connections_closed == 0,
        "the pool opened {} and closed {} connections with maxPoolSize 10",
        stats.connections_opened,
        stats.connections_closed
    );
    // The server counts what the pool opened; it may lag a little.
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.open_connections() - before != stats.connections_opened as i64 {
        assert!(
            Instant::now() < deadline,
            "the server counts {} connections open, the pool opened {}",
            server.open_connections() - before,
            stats.connections_opened
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pool.close();
    drop(pool);
    // Generous: on a loaded machine FerretDB may take a while to count a
    // closed connection as finished.
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.open_connections() != before {
        assert!(
            Instant::now() < deadline,
            "{} server connections left open",
            server.open_connections() - before
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every log line at TRACE, event and error text, with their fields.
#[derive(Clone, Default)]
struct Everything(Arc<Mutex<Vec<String>>>);

struct Text<'a>(&'a mut String);

impl tracing::field::Visit for Text<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl tracing::Subscriber for Everything {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut text = String::new();
        span.record(&mut Text(&mut text));
        self.0.lock().unwrap().push(text);
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut text = String::new();
        values.record(&mut Text(&mut text));
        self.0.lock().unwrap().push(text);
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = String::new();
        event.record(&mut Text(&mut text));
        self.0.lock().unwrap().push(text);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn no_credential_reaches_a_log_line_an_event_or_an_error() {
    if !mongo::server_tests_enabled("no_credential_reaches_a_log_line_an_event_or_an_error") {
        return;
    }
    let seen = Everything::default();
    let texts = seen.0.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(seen, || {
        runtime.block_on(async {
            for (password, works) in [("cmap-secret", true), ("Zq7-wrong-Qx9", false)] {
                let uri = format!("mongodb://cmap:{password}@127.0.0.1:27017/test?waitQueueTimeoutMS=3000");
                let manager = MongoManager::new(&uri).unwrap();
                texts.lock().unwrap().push(format!("{manager:?}"));
                let pool = Pool::builder()
                    .connection_string(&uri)
                    .on_event({
                        let texts = texts.clone();
                        move |event| texts.lock().unwrap().push(format!("{event:?}"))
                    })
                    .build(manager)
                    .unwrap();
                match pool.get().await {
                    Ok(mut conn) => {
                        assert!(works);
                        texts.lock().unwrap().push(format!("{conn:?}"));
                        let reply: Document = conn.run_command("admin", &doc! { "ping": 1 }).await.unwrap();
                        texts.lock().unwrap().push(format!("{reply:?}"));
                    }
                    Err(e) => {
                        assert!(!works, "{e}");
                        texts.lock().unwrap().push(format!("{e} {e:?}"));
                    }
                }
                pool.close();
            }
        });
    });
    let texts = texts.lock().unwrap();
    assert!(
        texts.len() > 10,
        "the pool logged and emitted events: {}",
        texts.len()
    );
    for text in texts.iter() {
        for secret in ["cmap-secret", "Zq7-wrong-Qx9"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
}

#[tokio::test]
async fn load_balanced_mode_refuses_a_server_without_a_service_id() {
    if !mongo::server_tests_enabled("load_balanced_mode_refuses_a_server_without_a_service_id") {
        return;
    }
    // FerretDB is no load balancer: its hello reply has no serviceId.
    let manager = MongoManager::new("mongodb://127.0.0.1:27018/?loadBalanced=true").unwrap();
    let err = manager.open().await.unwrap_err();
    assert!(matches!(err, Error::Handshake { .. }), "{err:?}");
    assert!(err.to_string().contains("serviceId"), "{err}");
    assert_eq!(err.establish_kind(), EstablishErrorKind::Other);
}

#[tokio::test]
async fn validate_idle_after_pings_only_connections_idle_that_long() {
    if !mongo::server_tests_enabled("validate_idle_after_pings_only_connections_idle_that_long") {
        return;
    }
    let server = OwnFerretDb::start("validate");
    let uri = format!("mongodb://127.0.0.1:{}/?maxPoolSize=1", server.port());
    for (idle, pings) in [(Duration::ZERO, 3), (Duration::from_secs(3600), 0)] {
        let manager = MongoManager::new(&uri).unwrap().validate_idle_after(idle);
        let pool = Pool::builder().connection_string(&uri).build(manager).unwrap();
        let before = server.requests("ping");
        for _ in 0..3 {
            drop(pool.get().await.unwrap());
        }
        assert_eq!(
            server.requests("ping") - before,
            pings,
            "validate_idle_after({idle:?})"
        );
        assert_eq!(pool.stats().connections_opened, 1);
    }
}
