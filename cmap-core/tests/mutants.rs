//! Rules that mutation testing (`cargo mutants`, issue 17; see
//! docs/testing.md §7) found unguarded: each test here fails with the
//! mutant it names applied to `cmap-core/src`, and no other test noticed
//! that mutant when it was found. Each names the rule it proves and why
//! the rule matters.

mod support;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use cmap_core::{Address, ConnectionId, PoolOptions, ServiceId, WaiterId};
use support::Harness;

fn hash_of(a: &Address) -> u64 {
    let mut h = DefaultHasher::new();
    a.hash(&mut h);
    h.finish()
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
