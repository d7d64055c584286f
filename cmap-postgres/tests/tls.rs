//! TLS through the tokio-postgres manager, against the local PostgreSQL
//! with the project's certificate for `localhost` (`.ci/postgres.sh` and
//! `.ci/tls.sh`), with the rustls connector: a verified connection works;
//! an unknown CA and a host name the certificate does not carry fail as
//! `Other`, at once, after one connect attempt, naming the certificate
//! error; a TLS handshake cut by the fault proxy is `Network`. Runs with
//! `CMAP_PG_TESTS=1`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_postgres::{PgError, PgManager};
use cmap_testkit::proxy::Proxy;
use cmap_tokio::{EstablishErrorKind, ManageConnection, Pool};
use common::server_tests_enabled;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// A connector trusting the project's CA, or nothing (`trust_ca`
/// false: the certificate is then from an unknown CA).
fn connector(trust_ca: bool) -> MakeRustlsConnect {
    let mut roots = rustls::RootCertStore::empty();
    if trust_ca {
        let ca = cmap_testkit::mongo::tls_dir().join("ca.pem");
        for cert in CertificateDer::pem_file_iter(&ca).expect("the test CA (.ci/tls.sh)") {
            roots.add(cert.unwrap()).unwrap();
        }
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    MakeRustlsConnect::new(config)
}

fn config(host: &str, port: u16) -> tokio_postgres::Config {
    let mut config = common::config(port, "postgres", "test");
    config.host(host).ssl_mode(SslMode::Require);
    config
}

fn pool(manager: PgManager<MakeRustlsConnect>) -> Pool<PgManager<MakeRustlsConnect>> {
    Pool::builder()
        .address(manager.address())
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(5))
        .build(manager)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_tls_session_runs_queries() {
    if !server_tests_enabled("a_verified_tls_session_runs_queries") {
        return;
    }
    let pool = pool(PgManager::new(config("localhost", 5432), connector(true)));
    let conn = pool.get().await.unwrap();
    let row = conn
        .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0), "the session is encrypted");
}

/// A checkout refused by TLS: its error, how long it took, and the
/// connect attempts the pool made (waiting a while to see none follow).
async fn refused(manager: PgManager<MakeRustlsConnect>) -> (String, EstablishErrorKind, Duration, u64) {
    let pool = pool(manager);
    let started = Instant::now();
    let err = pool.get().await.unwrap_err();
    let took = started.elapsed();
    let pg = err
        .connection_error()
        .and_then(|e| e.downcast_ref::<PgError>())
        .unwrap_or_else(|| panic!("the manager's error: {err:?}"));
    let kind = pool.manager().classify(pg);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = pool.stats();
    (
        err.to_string(),
        kind,
        took,
        stats.connections_opened + stats.connections_failed,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_ca_and_a_wrong_host_name_are_other_with_one_attempt() {
    if !server_tests_enabled("an_unknown_ca_and_a_wrong_host_name_are_other_with_one_attempt") {
        return;
    }
    let (text, kind, took, attempts) =
        refused(PgManager::new(config("localhost", 5432), connector(false))).await;
    assert_eq!(kind, EstablishErrorKind::Other, "{text}");
    assert!(
        text.contains("UnknownIssuer"),
        "the certificate error is named: {text}"
    );
    assert!(!text.contains("SystemOverloadedError"), "{text}");
    assert!(took < Duration::from_secs(2), "failed at once: {took:?}");
    assert_eq!(attempts, 1, "{text}");

    let (text, kind, took, attempts) =
        refused(PgManager::new(config("127.0.0.1", 5432), connector(true))).await;
    assert_eq!(kind, EstablishErrorKind::Other, "{text}");
    assert!(text.contains("not valid for name"), "{text}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(attempts, 1, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_handshake_cut_by_the_proxy_is_a_network_error() {
    if !server_tests_enabled("a_tls_handshake_cut_by_the_proxy_is_a_network_error") {
        return;
    }
    let proxy = Proxy::start(([127, 0, 0, 1], 5432).into()).unwrap();
    let manager = PgManager::new(config("localhost", proxy.port()), connector(true));
    manager.connect().await.expect("through the proxy, TLS verifies");
    // Each new connection waits 300 ms before the proxy connects it
    // upstream, and every 50 ms the proxy cuts what it holds.
    let cut = proxy
        .cutting_handshakes(
            Duration::from_millis(300),
            Duration::from_millis(50),
            manager.connect(),
        )
        .await;
    let err = cut.expect_err("the handshake was cut");
    assert_eq!(manager.classify(&err), EstablishErrorKind::Network, "{err}");
}
