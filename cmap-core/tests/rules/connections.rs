//! Connections: the rules of docs/spec-compliance.md's "Connections" section.
//!
//! Spec: "Connection Pool Members" › "Connection"; "Connection Pool Behaviors"
//! › "Creating a Connection", "Establishing a Connection", "Closing a
//! Connection".

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use crate::support::{fail_establish, Conn, Harness};
use crate::{one_connection_checked_in, quiet};
use cmap_core::{Address, ClosedReason, ConnectionId, PoolOptions, PoolState, ServiceId, WaiterId};

fn hash_of(a: &Address) -> u64 {
    let mut h = DefaultHasher::new();
    a.hash(&mut h);
    h.finish()
}

#[test]
fn connection_ids_start_at_one_and_increase_by_one() {
    let mut h = Harness::ready(PoolOptions::default());
    let ids: Vec<u64> = (0..5).map(|_| h.take().id().0).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
}

#[test]
fn idle_means_strictly_longer_than_max_idle_time() {
    let mut h = one_connection_checked_in(Duration::from_millis(10));
    h.now += Duration::from_millis(10);
    assert_eq!(h.take().id().0, 1);
}

/// An address is a key of the drivers' per-server pool maps: its hash
/// depends on the host and the port, so that different servers spread over
/// a map's buckets instead of all colliding in one.
///
/// Catches: `<impl Hash for Address>::hash` hashing nothing.
#[test]
fn address_hash_tells_hosts_and_ports_apart() {
    let a = Address::new("db", 5432);
    assert_eq!(hash_of(&a), hash_of(&"db:5432".parse().unwrap()));
    assert_ne!(hash_of(&a), hash_of(&Address::new("db", 5433)));
    assert_ne!(hash_of(&a), hash_of(&Address::new("dc", 5432)));
    assert_ne!(hash_of(&a), hash_of(&Address::unix("db")));
}

/// An address prints as its host and port in `{:?}` (the drivers' debug
/// logs and the pool's own `Debug`), not as an empty struct.
///
/// Catches: `<impl fmt::Debug for Address>::fmt` writing nothing.
#[test]
fn address_debug_shows_host_and_port() {
    assert_eq!(
        format!("{:?}", Address::new("db", 5432)),
        r#"Address { host: "db", port: Some(5432) }"#
    );
    assert_eq!(
        format!("{:?}", Address::unix("/tmp/s.sock")),
        r#"Address { host: "/tmp/s.sock", port: None }"#
    );
}

/// `Address::from_str`: a bare host gets the MongoDB default port 27017,
/// and a bare IPv6 literal is such a host: in `::1` the text after the
/// last colon is part of the address, not a port.
///
/// Catches: the guard `!host.ends_with(':')` of `from_str` replaced by
/// `true` (`::1` would be host `:`, port 1).
#[test]
fn address_bare_ipv6_literal_gets_the_default_port() {
    let a: Address = "::1".parse().unwrap();
    assert_eq!((a.host(), a.port()), ("::1", Some(27017)));
    let b: Address = "fe80::1".parse().unwrap();
    assert_eq!((b.host(), b.port()), ("fe80::1", Some(27017)));
}

/// Ids print as their number and a service id as its 24 hex digits (the
/// ObjectId's usual text): error messages and logs name connections,
/// checkouts and services this way (`establishing connection 7 failed`).
///
/// Catches: the `Display` of `ConnectionId`, `WaiterId` and `ServiceId`
/// writing nothing.
#[test]
fn ids_display_as_their_number_and_service_ids_as_hex() {
    assert_eq!(ConnectionId(7).to_string(), "7");
    assert_eq!(WaiterId(42).to_string(), "42");
    let bytes = [
        0x00, 0x01, 0x0a, 0xff, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80,
    ];
    assert_eq!(ServiceId(bytes).to_string(), "00010aff1020304050607080");
}

/// `Pooled::is_errored` says whether `mark_errored` was called: a driver
/// decides by it whether the connection it hands back is closed with
/// reason `error`, and its `Debug` shows the same fields.
///
/// Catches: `Pooled::is_errored` returning `false`, and the `Debug` of
/// `Pooled` writing nothing.
#[test]
fn pooled_reports_its_error_mark_and_debugs_its_fields() {
    let mut h = Harness::ready(PoolOptions::default());
    let mut c = h.take();
    assert!(!c.is_errored());
    assert_eq!(
        format!("{c:?}"),
        "Pooled { id: ConnectionId(1), generation: 0, service_id: None, errored: false, .. }"
    );
    c.mark_errored();
    assert!(c.is_errored());
    assert!(format!("{c:?}").contains("errored: true"));
    h.check_in(c);
}

/// Spec ("Connection", `generation`): "the generation of the pool when this
/// Connection was created". A connection whose establishment started before
/// a clear and ended after it belongs to the cleared generation: it is
/// stale, closed when found, and never handed out.
///
/// Catches: `handle_established` taking the pool's generation at the end of
/// the handshake (`self.generation`) instead of the pending connection's
/// (`pending.generation`).
#[test]
fn connection_keeps_the_generation_of_its_creation_across_a_clear() {
    let mut h = Harness::ready(quiet().build().unwrap());
    let first = h.check_out();
    assert_eq!(h.establishing, [ConnectionId(1)]);
    h.pool.handle_clear(h.now, Default::default()).unwrap();
    h.drain();
    assert!(
        h.failed.iter().any(|(w, _)| *w == first),
        "the clear fails the waiter"
    );
    h.pool.handle_ready(h.now).unwrap();
    h.drain();
    // A new checkout waits for the connection already being established.
    let second = h.check_out();
    assert_eq!(h.establishing, [ConnectionId(1)], "no second connection yet");
    h.clear_events();
    h.pool
        .handle_established(h.now, ConnectionId(1), Conn(1), None)
        .unwrap();
    h.drain();
    assert_eq!(
        h.closed_reasons(),
        [(1, ClosedReason::Stale)],
        "connection 1, created in generation 0, is stale in generation 1"
    );
    assert!(h.delivered.is_empty(), "a stale connection was handed out");
    // The waiter is served by a connection of the new generation.
    assert_eq!(h.establishing, [ConnectionId(1), ConnectionId(2)]);
    h.pool
        .handle_established(h.now, ConnectionId(2), Conn(2), None)
        .unwrap();
    h.drain();
    let (waiter, conn) = &h.delivered[0];
    assert_eq!(
        (*waiter, conn.id(), conn.generation()),
        (second, ConnectionId(2), 1)
    );
}

/// Spec ("Establishing a Connection" and SDAM's error handling): an
/// establishment error clears the pool only when the connection belongs to
/// the pool's current generation; one started before the last clear must
/// not clear (and pause) the pool that was readied since.
///
/// Catches: `handle_establish_failed` clearing whatever the failed
/// connection's generation (the `pending.generation == self.generation`
/// condition dropped).
#[test]
fn establishment_error_of_an_older_generation_does_not_clear_again() {
    let mut h = Harness::ready(quiet().build().unwrap());
    h.check_out();
    assert_eq!(h.establishing, [ConnectionId(1)]);
    h.pool.handle_clear(h.now, Default::default()).unwrap();
    h.drain();
    h.pool.handle_ready(h.now).unwrap();
    h.drain();
    assert_eq!(h.pool.generation(), 1);
    h.clear_events();
    fail_establish(&mut h.pool, h.now, ConnectionId(1)).unwrap();
    h.drain();
    assert_eq!(h.names(), ["ConnectionClosed"], "no ConnectionPoolCleared");
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Error)]);
    assert_eq!(h.pool.state(), PoolState::Ready);
    assert_eq!(h.pool.generation(), 1);
    // The pool still serves.
    let conn = h.take();
    assert_eq!((conn.id(), conn.generation()), (ConnectionId(2), 1));
}

/// The same connection failing in the current generation does clear: the
/// test above is not passing because failures never clear.
#[test]
fn establishment_error_of_the_current_generation_clears() {
    let mut h = Harness::ready(quiet().build().unwrap());
    h.check_out();
    h.clear_events();
    fail_establish(&mut h.pool, h.now, ConnectionId(1)).unwrap();
    h.drain();
    assert_eq!(h.pool.state(), PoolState::Paused);
    assert_eq!(h.pool.generation(), 1);
    assert_eq!(h.names()[0], "ConnectionPoolCleared");
}
