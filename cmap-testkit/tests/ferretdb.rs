//! Proves that the MongoDB-compatible servers of `.ci/ferretdb.sh` answer
//! MongoDB's wire protocol: a `hello` written by hand as an OP_MSG over a
//! plain TCP socket, with `bson` for the documents, and the reply checked.
//! Nothing of the pool takes part, so a failure here points at the server,
//! not at our code. Runs with `CMAP_MONGO_TESTS=1` (CI sets it).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bson::{doc, Document};
use cmap_testkit::mongo;

/// OP_MSG's opcode (the OP_MSG specification).
const OP_MSG: i32 = 2013;

/// Sends `command` to `addr` as an OP_MSG with one body section and
/// returns the body of the reply, checking its header on the way.
fn run_command(addr: &str, command: &Document) -> Document {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = command.to_vec().expect("a command that serializes");
    let request_id: i32 = 7;
    let length = 16 + 4 + 1 + body.len();
    let mut message = Vec::with_capacity(length);
    message.extend_from_slice(&i32::try_from(length).unwrap().to_le_bytes());
    message.extend_from_slice(&request_id.to_le_bytes());
    message.extend_from_slice(&0i32.to_le_bytes()); // responseTo
    message.extend_from_slice(&OP_MSG.to_le_bytes());
    message.extend_from_slice(&0u32.to_le_bytes()); // flagBits
    message.push(0); // section kind 0: the body
    message.extend_from_slice(&body);
    stream.write_all(&message).unwrap();

    let mut header = [0u8; 16];
    stream.read_exact(&mut header).expect("a reply header");
    let word = |i: usize| i32::from_le_bytes(header[i..i + 4].try_into().unwrap());
    let (length, response_to, opcode) = (word(0), word(8), word(12));
    assert_eq!(opcode, OP_MSG, "the reply is an OP_MSG");
    assert_eq!(response_to, request_id, "the reply answers our request");
    let mut rest = vec![0u8; usize::try_from(length).unwrap() - 16];
    stream.read_exact(&mut rest).expect("the reply's body");
    let flags = u32::from_le_bytes(rest[..4].try_into().unwrap());
    assert_eq!(flags & 1, 0, "no checksum was asked for");
    assert_eq!(rest[4], 0, "the reply's first section is its body");
    Document::from_reader(&rest[5..]).expect("a BSON body")
}

fn assert_hello(addr: &str) {
    let reply = run_command(addr, &doc! { "hello": 1, "helloOk": true, "$db": "admin" });
    assert_eq!(reply.get_f64("ok").ok(), Some(1.0), "{reply}");
    assert_eq!(reply.get_bool("isWritablePrimary").ok(), Some(true), "{reply}");
    let max_wire = reply.get_i32("maxWireVersion").expect("maxWireVersion");
    // The handshake specification's minimum: MongoDB 4.0's wire version.
    assert!(max_wire >= 7, "maxWireVersion {max_wire} in {reply}");
    assert!(
        reply.get_i32("maxMessageSizeBytes").is_ok_and(|n| n > 0),
        "{reply}"
    );
}

#[test]
fn both_servers_answer_hello() {
    if !mongo::server_tests_enabled("both_servers_answer_hello") {
        return;
    }
    assert_hello(mongo::AUTH_ADDR);
    assert_hello(mongo::OPEN_ADDR);
}

#[test]
fn the_authenticating_server_refuses_unauthenticated_writes() {
    if !mongo::server_tests_enabled("the_authenticating_server_refuses_unauthenticated_writes") {
        return;
    }
    let insert = doc! { "insert": "smoke", "documents": [{ "x": 1 }], "$db": "test" };
    let refused = run_command(mongo::AUTH_ADDR, &insert);
    assert_eq!(refused.get_f64("ok").ok(), Some(0.0), "{refused}");
    assert_eq!(
        refused.get_str("codeName").ok(),
        Some("Unauthorized"),
        "{refused}"
    );
    let accepted = run_command(mongo::OPEN_ADDR, &insert);
    assert_eq!(accepted.get_f64("ok").ok(), Some(1.0), "{accepted}");
}
