//! TLS against FerretDB's TLS listener (`.ci/ferretdb.sh`, with the
//! project's own CA from `.ci/tls.sh`): a verified connection works; an
//! unknown CA and a host name the certificate does not carry fail as
//! `Other`, at once, with one connect attempt and the certificate error
//! named; a TLS handshake cut by the fault proxy is `Network`. Runs with
//! `CMAP_MONGO_TESTS=1`.

use std::time::{Duration, Instant};

use cmap_mongodb::bson::doc;
use cmap_mongodb::{Error, EstablishErrorKind, MongoManager, Stage};
use cmap_testkit::mongo;
use cmap_testkit::proxy::Proxy;
use cmap_tokio::Pool;

fn ca_file() -> String {
    mongo::tls_dir().join("ca.pem").display().to_string()
}

#[tokio::test]
async fn a_verified_tls_connection_runs_commands() {
    if !mongo::server_tests_enabled("a_verified_tls_connection_runs_commands") {
        return;
    }
    let uri = format!(
        "mongodb://{}/?tls=true&tlsCAFile={}",
        mongo::TLS_HOST_PORT,
        ca_file()
    );
    let pool = Pool::builder()
        .connection_string(&uri)
        .build(MongoManager::new(&uri).unwrap())
        .unwrap();
    let mut conn = pool.get().await.unwrap();
    let reply = conn.run_command("admin", &doc! { "ping": 1 }).await.unwrap();
    assert_eq!(reply.get_f64("ok").ok(), Some(1.0));
    assert!(
        !conn.is_broken(),
        "an idle TLS connection is not taken for a closed one"
    );
    drop(conn);
    let mut again = pool.get().await.unwrap();
    again.run_command("admin", &doc! { "ping": 1 }).await.unwrap();
    assert_eq!(pool.stats().connections_opened, 1);
}

/// A checkout against a server whose certificate is refused: the error,
/// how long it took, and how many connect attempts the pool made.
async fn refused(uri: &str) -> (Error, Duration, u64) {
    let pool = Pool::builder()
        .connection_string(uri)
        .wait_queue_timeout(Duration::from_secs(5))
        .build(MongoManager::new(uri).unwrap())
        .unwrap();
    let started = Instant::now();
    let err = pool.get().await.unwrap_err();
    let took = started.elapsed();
    assert!(!err.has_label("SystemOverloadedError"), "{err}");
    let mongo = err
        .connection_error()
        .and_then(|e| e.downcast_ref::<Error>())
        .unwrap_or_else(|| panic!("the manager's error: {err:?}"));
    let described = format!("{mongo}");
    assert!(err.to_string().contains(&described), "{err}");
    // No storm: nothing retries a certificate the server will keep showing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = pool.stats();
    let attempts = stats.connections_opened + stats.connections_failed;
    let owned = match mongo {
        Error::Tls(e) => Error::Tls(e.clone()),
        other => panic!("not a TLS refusal: {other:?}"),
    };
    (owned, took, attempts)
}

#[tokio::test]
async fn an_unknown_ca_and_a_wrong_host_name_are_other_with_one_attempt() {
    if !mongo::server_tests_enabled("an_unknown_ca_and_a_wrong_host_name_are_other_with_one_attempt") {
        return;
    }
    // The Mozilla roots do not know the project's CA.
    let (unknown_ca, took, attempts) =
        refused(&format!("mongodb://{}/?tls=true", mongo::TLS_HOST_PORT)).await;
    assert_eq!(unknown_ca.establish_kind(), EstablishErrorKind::Other);
    assert!(unknown_ca.to_string().contains("UnknownIssuer"), "{unknown_ca}");
    assert!(
        took < Duration::from_secs(2),
        "failed at once, not at the deadline: {took:?}"
    );
    assert_eq!(attempts, 1);

    // The certificate is for `localhost`, not for the address 127.0.0.1.
    let (wrong_name, took, attempts) = refused(&format!(
        "mongodb://127.0.0.1:27019/?tls=true&tlsCAFile={}",
        ca_file()
    ))
    .await;
    assert_eq!(wrong_name.establish_kind(), EstablishErrorKind::Other);
    assert!(
        wrong_name.to_string().contains("not valid for name"),
        "{wrong_name}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(attempts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_handshake_cut_by_the_proxy_is_a_network_error() {
    if !mongo::server_tests_enabled("a_tls_handshake_cut_by_the_proxy_is_a_network_error") {
        return;
    }
    let proxy = Proxy::start(([127, 0, 0, 1], 27019).into()).unwrap();
    // The proxy listens on 127.0.0.1: reach it by the certificate's name.
    let uri = format!(
        "mongodb://localhost:{}/?tls=true&tlsCAFile={}",
        proxy.port(),
        ca_file()
    );
    let manager = MongoManager::new(&uri).unwrap();
    manager.open().await.expect("through the proxy, TLS verifies");
    // Each new connection waits 300 ms before the proxy connects it
    // upstream, and every 50 ms the proxy cuts what it holds.
    let cut = proxy
        .cutting_handshakes(
            Duration::from_millis(300),
            Duration::from_millis(50),
            manager.open(),
        )
        .await;
    let cut = cut.unwrap_err();
    assert!(
        matches!(
            cut,
            Error::Network {
                during: Stage::Tls,
                ..
            }
        ),
        "{cut:?}"
    );
    assert_eq!(cut.establish_kind(), EstablishErrorKind::Network);
}
