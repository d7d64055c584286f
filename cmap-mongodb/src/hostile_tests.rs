//! A hostile server behind a real pool (`cmap_tokio::Pool`, one slot):
//! for each kind of bad answer, the checkout or the command gets a typed
//! error, the connection is closed, and the one slot serves the next
//! checkout. The server is hostile on its first connection only.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Document};
use cmap_tokio::{GetError, Pool};

use crate::error::{Error, ProtocolError, Stage};
use crate::scram::ScramError;
use crate::test_server::{hello_reply, mongod, op_msg_reply, serve_raw, ScramServer};
use crate::wire::{HEADER_LEN, OP_MSG};
use crate::MongoManager;

pub(crate) type Raw = Box<dyn FnMut(i32, &Document) -> Option<Vec<u8>> + Send>;

/// A server whose first connection is served by `hostile`, and every
/// later one by [`mongod`]; and how many connections it accepted.
pub(crate) fn server(
    hostile: impl FnOnce() -> Raw + Send + 'static,
) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    server_paced(None, hostile)
}

/// [`server`], whose replies after the hello go one byte per `pace`.
pub(crate) fn server_paced(
    pace: Option<Duration>,
    hostile: impl FnOnce() -> Raw + Send + 'static,
) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let mut hostile = Some(hostile);
    let address = serve_raw(pace, move || -> Raw {
        count.fetch_add(1, Ordering::SeqCst);
        match hostile.take() {
            Some(make) => make(),
            None => {
                let mut good = mongod();
                Box::new(move |id, command| good(command).map(|reply| op_msg_reply(id, &reply)))
            }
        }
    });
    (address, accepted)
}

/// Answers the hello as a mongod does and `hostile` for anything else.
pub(crate) fn after_hello(
    mut hostile: impl FnMut(i32) -> Vec<u8> + Send + 'static,
) -> impl FnOnce() -> Raw + Send + 'static {
    move || {
        Box::new(move |id, command: &Document| {
            Some(if command.contains_key("isMaster") {
                op_msg_reply(id, &hello_reply())
            } else {
                hostile(id)
            })
        })
    }
}

pub(crate) fn header(length: i32, response_to: i32) -> Vec<u8> {
    [length, 99, response_to, OP_MSG]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

pub(crate) fn pool(uri: &str) -> Pool<MongoManager> {
    // A connect timeout loose enough for a debug build's SCRAM on a loaded
    // machine, unless the test sets its own.
    let connect = if uri.contains("connectTimeoutMS") {
        ""
    } else {
        "&connectTimeoutMS=5000"
    };
    let uri = format!("{uri}maxPoolSize=1&waitQueueTimeoutMS=20000{connect}");
    Pool::builder()
        .connection_string(&uri)
        .build(MongoManager::new(&uri).unwrap())
        .unwrap()
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The pool's one slot serves a checkout, on a new connection.
async fn serves_again(pool: &Pool<MongoManager>, accepted: &AtomicUsize) {
    let mut conn = pool.get().await.expect("the slot serves again");
    conn.run_command("db", &doc! { "ping": 1 }).await.unwrap();
    assert!(accepted.load(Ordering::SeqCst) >= 2, "on a new connection");
}

/// A command answered with `bad` fails with the error `expected` accepts,
/// breaks its connection, which the pool closes; the one slot then
/// serves a new connection.
fn a_command_answered_so_fails(
    bad: impl FnMut(i32) -> Vec<u8> + Send + 'static,
    expected: fn(&Error) -> bool,
) {
    let (address, accepted) = server(after_hello(bad));
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?"));
        let mut conn = pool.get().await.unwrap();
        let err = conn.run_command("db", &doc! { "find": "c" }).await.unwrap_err();
        assert!(expected(&err), "{err:?}");
        assert!(err.is_network() && conn.is_broken());
        drop(conn);
        assert_eq!(pool.status().total, 0, "the broken connection is closed");
        assert_eq!(pool.stats().returns_bad, 1);
        serves_again(&pool, &accepted).await;
    });
}

#[test]
fn a_reply_announcing_2_gb_is_refused_before_it_is_read() {
    a_command_answered_so_fails(
        |id| header(2_000_000_000, id),
        |e| matches!(e, Error::Protocol(ProtocolError::Length(2_000_000_000))),
    );
}

#[test]
fn a_reply_to_another_request_is_refused() {
    a_command_answered_so_fails(
        |id| op_msg_reply(id.wrapping_add(7), &doc! { "ok": 1.0 }),
        |e| matches!(e, Error::Protocol(ProtocolError::ResponseTo { expected, got }) if *got == expected.wrapping_add(7)),
    );
}

/// A checkout whose new connection meets `hostile` fails with the
/// manager's error, which `expected` accepts; the pool is cleared (the
/// failure is not a network one), holds no connection, and once ready
/// again its one slot serves a checkout.
fn a_connection_so_refused(
    uri: &str,
    hostile: impl FnOnce() -> Raw + Send + 'static,
    expected: fn(&Error) -> bool,
) {
    let (address, accepted) = server(hostile);
    runtime().block_on(async {
        let pool = pool(&uri.replace("{address}", &address.to_string()));
        let err: GetError = pool.get().await.unwrap_err();
        let cause = err
            .connection_error()
            .and_then(|e| e.downcast_ref::<Error>())
            .unwrap_or_else(|| panic!("the manager's error in {err:?}"));
        assert!(expected(cause), "{cause:?}");
        assert_eq!(pool.status().total, 0);
        assert_eq!(pool.stats().connections_failed, 1);
        pool.ready().unwrap();
        serves_again(&pool, &accepted).await;
    });
}

#[test]
fn a_hello_below_the_minimum_wire_version_is_refused() {
    a_connection_so_refused(
        "mongodb://{address}/?",
        || {
            Box::new(|id, _: &Document| {
                let mut hello = hello_reply();
                hello.insert("maxWireVersion", 5);
                Some(op_msg_reply(id, &hello))
            })
        },
        |e| matches!(e, Error::Handshake { reason, .. } if reason.contains("up to 5")),
    );
}

#[test]
fn a_scram_server_signature_that_does_not_verify_is_refused() {
    a_connection_so_refused(
        "mongodb://app:secret@{address}/shop?",
        || {
            let mut scram = ScramServer::new("SCRAM-SHA-256", "app", "secret");
            scram.forged_signature = Some(vec![7; 32]);
            Box::new(move |id, command: &Document| {
                let reply = if command.contains_key("isMaster") {
                    let mut reply = hello_reply();
                    if let Ok(start) = command.get_document("speculativeAuthenticate") {
                        reply.insert("speculativeAuthenticate", scram.start(start));
                    }
                    reply
                } else {
                    scram.handle(command)
                };
                Some(op_msg_reply(id, &reply))
            })
        },
        |e| {
            matches!(e, Error::Authentication { cause, .. }
                if matches!(**cause, Error::Scram(ScramError::ServerSignatureMismatch)))
        },
    );
}

#[test]
fn half_a_header_then_silence_times_out_the_hello_and_the_pool_connects_again() {
    // A network failure of the handshake: the pool is not cleared and
    // retries; the checkout gets the second connection.
    // Its thread then waits for a request that never comes: a stall.
    let half = || -> Raw { Box::new(|id, _: &Document| Some(header(64, id)[..HEADER_LEN / 2].to_vec())) };
    let (address, accepted) = server(half);
    runtime().block_on(async {
        let pool = pool(&format!("mongodb://{address}/?connectTimeoutMS=300&"));
        let started = std::time::Instant::now();
        let mut conn = pool.get().await.expect("the pool's retry serves the checkout");
        assert!(started.elapsed() >= Duration::from_millis(300));
        conn.run_command("db", &doc! { "ping": 1 }).await.unwrap();
        let stats = pool.stats();
        // More than one failure only if the good server was too slow too.
        assert!(stats.connections_failed >= 1 && stats.connections_opened == 1);
        assert!(accepted.load(Ordering::SeqCst) >= 2);
        assert_eq!(pool.status().total, 1);
    });
    // What the pool saw, on a connection opened by hand.
    let (address, _) = server(half);
    let manager = MongoManager::new(&format!("mongodb://{address}/?connectTimeoutMS=300")).unwrap();
    let err = runtime().block_on(manager.open()).unwrap_err();
    assert!(
        matches!(err, Error::Timeout { during: Stage::Hello, after } if after == Duration::from_millis(300)),
        "{err:?}"
    );
}
