//! The async-io manager (smol, async-std) against FerretDB: the same
//! protocol code as on tokio, on smol's sockets and timer. Runs with
//! `CMAP_MONGO_TESTS=1`.

mod common;

use std::time::Duration;

use cmap_async_std::Pool;
use cmap_mongodb::bson::doc;
use cmap_mongodb::{AsyncIoManager, Error, EstablishErrorKind, Stage};
use cmap_testkit::mongo;
use cmap_testkit::proxy::{Mode, Proxy};
use common::{establish_kind, unique};

fn pool(uri: &str) -> Pool<AsyncIoManager> {
    Pool::builder()
        .connection_string(uri)
        .build(AsyncIoManager::new(uri).expect("a valid connection string"))
        .expect("a pool")
}

#[test]
fn commands_round_trip_and_a_wrong_password_is_an_authentication_failure() {
    if !mongo::server_tests_enabled("smol commands_round_trip") {
        return;
    }
    smol::block_on(async {
        let pool = pool(mongo::AUTH_URI);
        let mut conn = pool.get().await.unwrap();
        let collection = unique("smol");
        conn.run_command("test", &doc! { "insert": &collection, "documents": [{ "x": 1 }] })
            .await
            .unwrap();
        let count = conn
            .run_command("test", &doc! { "count": &collection })
            .await
            .unwrap();
        assert_eq!(count.get_i32("n").ok(), Some(1), "{count}");
        conn.run_command("test", &doc! { "drop": &collection })
            .await
            .unwrap();

        let wrong = self::pool("mongodb://cmap:nope@127.0.0.1:27017/test");
        let err = wrong.get().await.unwrap_err();
        assert_eq!(
            establish_kind(&err),
            Some(EstablishErrorKind::Authentication),
            "{err}"
        );
    });
}

#[test]
fn refused_blackholed_and_cut_connections_on_smol() {
    if !mongo::server_tests_enabled("smol refused_blackholed_and_cut_connections") {
        return;
    }
    let proxy = Proxy::start(([127, 0, 0, 1], 27018).into()).unwrap();
    smol::block_on(async {
        let uri = format!(
            "mongodb://127.0.0.1:{}/?connectTimeoutMS=300&maxPoolSize=1",
            proxy.port()
        );
        let manager = AsyncIoManager::new(&uri).unwrap();
        proxy.set(Mode::Refuse);
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
        proxy.set(Mode::Blackhole);
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
        proxy.set(Mode::Pass);

        let pool = pool(&uri);
        let mut conn = pool.get().await.unwrap();
        conn.run_command("admin", &doc! { "ping": 1 }).await.unwrap();
        proxy.cut();
        assert!(conn
            .run_command("admin", &doc! { "ping": 1 })
            .await
            .unwrap_err()
            .is_network());
        assert!(conn.is_broken());
        drop(conn);
        // The broken one is closed on return; a closed idle socket is
        // refused by the check; either way the next checkout works.
        async_io::Timer::after(Duration::from_millis(50)).await;
        let mut conn = pool.get().await.unwrap();
        conn.run_command("admin", &doc! { "ping": 1 }).await.unwrap();
        assert_eq!(pool.stats().connections_opened, 2);
    });
}
