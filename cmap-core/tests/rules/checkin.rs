//! Checking in: the rules of docs/spec-compliance.md's "Checking in" section.
//!
//! Spec: "Connection Pool Behaviors" › "Checking In a Connection", "Marking a
//! Connection as Available".

use crate::support::Harness;
use cmap_core::{CheckInError, Clear, ClosedReason, PoolOptions};

#[test]
fn check_in_makes_the_connection_available() {
    let mut h = Harness::ready(PoolOptions::default());
    let c = h.take();
    h.clear_events();
    h.check_in(c);
    assert_eq!(h.names(), ["ConnectionCheckedIn"]);
    assert_eq!(h.pool.status().available, 1);
}

#[test]
fn check_in_closes_stale_connections() {
    let mut h = Harness::ready(PoolOptions::default());
    let c = h.take();
    h.pool.handle_clear(h.now, Clear::default()).unwrap();
    h.drain();
    h.clear_events();
    h.check_in(c);
    assert_eq!(h.names(), ["ConnectionCheckedIn", "ConnectionClosed"]);
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Stale)]);
}

#[test]
fn check_in_closes_errored_connections() {
    let mut h = Harness::ready(PoolOptions::default());
    let mut c = h.take();
    c.mark_errored();
    h.clear_events();
    h.check_in(c);
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Error)]);
    assert_eq!(h.pool.stats().returns_bad, 1);
    assert_eq!(h.pool.status().total, 0);
}

#[test]
fn check_in_to_another_pool_is_refused_and_loses_nothing() {
    let mut a = Harness::ready(PoolOptions::default());
    let mut b = Harness::ready(PoolOptions::default());
    let c = a.take();
    let before = b.pool.status();
    let err = b.pool.handle_check_in(b.now, c).unwrap_err();
    assert!(err.to_string().contains("did not create it"));
    assert_eq!(b.pool.status(), before);
    assert!(b.pool.poll_output().is_none());
    let CheckInError::WrongPool(c) = err else {
        unreachable!()
    };
    a.check_in(c);
    assert_eq!(a.pool.status().available, 1);
}
