//! Checking in: the rules of docs/spec-compliance.md's "Checking in" section.
//!
//! Spec: "Connection Pool Behaviors" › "Checking In a Connection", "Marking a
//! Connection as Available".

use crate::quiet;
use crate::support::Harness;
use cmap_core::{CheckInError, Clear, ClosedReason, HandOver, PoolOptions};

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

/// `handle_check_in_direct`: a connection checked in while checkouts wait
/// goes to the oldest one, returned instead of sent as `Deliver`, with the
/// events a check-in by action emits; with nobody waiting it is pooled.
#[test]
fn a_direct_check_in_hands_its_connection_to_the_oldest_waiter_without_a_deliver() {
    let mut h = Harness::ready(PoolOptions::builder().max_pool_size(1).build().unwrap());
    let c = h.take();
    let first = h.check_out();
    let second = h.check_out();
    h.clear_events();
    let handed = h.pool.handle_check_in_direct(h.now, c).unwrap();
    h.drain();
    let Some(HandOver { waiter, connection }) = handed else {
        panic!("a check-in while checkouts wait hands the connection over");
    };
    assert_eq!(waiter, first, "the oldest waiter");
    assert!(h.delivered.is_empty(), "no Deliver follows a hand-over");
    assert_eq!(h.names(), ["ConnectionCheckedIn", "ConnectionCheckedOut"]);
    assert_eq!(h.pool.status().in_use, 1);
    assert_eq!(h.pool.status().waiting, 1);
    // The next waiter, then nobody: pooled.
    let handed = h.pool.handle_check_in_direct(h.now, connection).unwrap();
    let connection = handed.expect("the second waiter").connection;
    assert_eq!(h.pool.status().waiting, 0);
    assert!(h
        .pool
        .handle_check_in_direct(h.now, connection)
        .unwrap()
        .is_none());
    h.drain();
    assert!(h.delivered.is_empty());
    assert_eq!(h.pool.status().available, 1);
    let _ = second;
}

/// A connection from another pool is refused by the direct check-in too,
/// handed back in the error, and nothing changes.
#[test]
fn a_direct_check_in_refuses_a_connection_of_another_pool() {
    let mut h = Harness::ready(PoolOptions::default());
    let mut other = Harness::ready(PoolOptions::default());
    let c = other.take();
    let id = c.id();
    let Err(CheckInError::WrongPool(back)) = h.pool.handle_check_in_direct(h.now, c) else {
        panic!("another pool's connection is refused");
    };
    assert_eq!(back.id(), id);
    assert!(h.pool.poll_output().is_none());
}

/// A connection refused at check-in because another pool made it comes
/// back in the error, whose `Debug` names it (without requiring the
/// connection type to be `Debug`).
///
/// Catches: the `Debug` of `CheckInError` writing nothing.
#[test]
fn a_check_in_error_debugs_the_connection_it_hands_back() {
    let mut a = Harness::ready(quiet().build().unwrap());
    let mut b = Harness::ready(quiet().build().unwrap());
    let c = a.take();
    let err = b.pool.handle_check_in(b.now, c).unwrap_err();
    assert_eq!(format!("{err:?}"), "WrongPool(ConnectionId(1))");
    a.check_in(err.into_connection());
}
