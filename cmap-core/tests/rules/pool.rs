//! Pool: the rules of docs/spec-compliance.md's "Pool" section.
//!
//! Spec: "Connection Pool Members" › "Connection Pool"; "Connection Pool
//! Behaviors" › "Creating a Connection Pool", "Closing a Connection Pool",
//! "Marking a Connection Pool as Ready".

use crate::opts;
use crate::support::{Conn, Harness};
use cmap_core::{CheckOutError, ClosedReason, Event, PoolOptions, PoolState, UsageError};

#[test]
fn creating_pool_starts_paused_and_emits_created_with_explicit_options() {
    let h = Harness::new(opts().max_pool_size(50).min_pool_size(5).build().unwrap());
    assert_eq!(h.pool.state(), PoolState::Paused);
    match &h.events[..] {
        [Event::PoolCreated { options, .. }] => {
            assert_eq!(
                options.explicit_options(),
                [("maxPoolSize", 50), ("minPoolSize", 5)]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn paused_pool_is_not_populated_even_with_min_pool_size() {
    let mut h = Harness::new(opts().min_pool_size(3).build().unwrap());
    h.advance(10_000);
    assert!(h.establishing.is_empty());
    assert_eq!(h.pool.status().total, 0);
}

#[test]
fn ready_emits_pool_ready_once() {
    let mut h = Harness::new(PoolOptions::default());
    for _ in 0..3 {
        h.pool.handle_ready(h.now).unwrap();
        h.drain();
    }
    assert_eq!(h.names(), ["ConnectionPoolCreated", "ConnectionPoolReady"]);
}

#[test]
fn pool_ready_event_precedes_background_population() {
    let mut h = Harness::ready(opts().min_pool_size(2).build().unwrap());
    h.advance(0);
    assert_eq!(
        h.names(),
        [
            "ConnectionPoolCreated",
            "ConnectionPoolReady",
            "ConnectionCreated",
            "ConnectionCreated"
        ]
    );
}

#[test]
fn closed_pool_cannot_be_readied() {
    let mut h = Harness::new(PoolOptions::default());
    h.pool.handle_close(h.now);
    assert_eq!(h.pool.handle_ready(h.now), Err(UsageError::PoolClosed));
}

#[test]
fn closing_closes_available_connections_first_then_emits_pool_closed() {
    let mut h = Harness::ready(PoolOptions::default());
    let a = h.take();
    let b = h.take();
    h.check_in(b);
    h.clear_events();
    h.pool.handle_close(h.now);
    h.drain();
    assert_eq!(h.closed_reasons(), [(2, ClosedReason::PoolClosed)]);
    assert_eq!(h.names().last(), Some(&"ConnectionPoolClosed"));
    assert_eq!(h.closed, [(cmap_core::ConnectionId(2), ClosedReason::PoolClosed)]);
    // In-use connections are closed when checked in.
    h.clear_events();
    h.check_in(a);
    assert_eq!(h.names(), ["ConnectionCheckedIn", "ConnectionClosed"]);
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::PoolClosed)]);
}

#[test]
fn closing_fails_waiters_and_abandons_pending_connections() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    let _first = h.check_out(); // pending connection 1, not established
    let second = h.check_out();
    h.pool.handle_close(h.now);
    h.drain();
    assert_eq!(h.aborted, [cmap_core::ConnectionId(1)]);
    assert!(h
        .failed
        .iter()
        .any(|(w, e)| *w == second && matches!(e, CheckOutError::PoolClosed { .. })));
    assert_eq!(h.pool.status().total, 0);
    // A late result for the abandoned connection is disposed of, no event.
    h.clear_events();
    h.pool
        .handle_established(h.now, cmap_core::ConnectionId(1), Conn(1), None)
        .unwrap();
    h.drain();
    assert!(h.events.is_empty());
    assert_eq!(
        h.closed.last(),
        Some(&(cmap_core::ConnectionId(1), ClosedReason::PoolClosed))
    );
}

#[test]
fn closing_twice_emits_one_pool_closed() {
    let mut h = Harness::new(PoolOptions::default());
    h.pool.handle_close(h.now);
    h.pool.handle_close(h.now);
    h.drain();
    assert_eq!(h.names(), ["ConnectionPoolCreated", "ConnectionPoolClosed"]);
}

#[test]
fn max_pool_size_caps_total_and_a_check_in_serves_the_waiter() {
    let mut h = Harness::ready(opts().max_pool_size(2).build().unwrap());
    let a = h.take();
    let _b = h.take();
    let w = h.check_out();
    assert!(h.establishing.is_empty(), "no third connection");
    assert_eq!(h.pool.status().waiting, 1);
    h.check_in(a);
    assert_eq!(h.delivered[0].0, w);
    assert_eq!(h.delivered[0].1.id().0, 1);
}

#[test]
fn max_connecting_limits_concurrent_establishment() {
    let mut h = Harness::ready(opts().max_connecting(2).build().unwrap());
    for _ in 0..5 {
        h.check_out();
    }
    assert_eq!(h.establishing.len(), 2);
    assert_eq!(h.pool.status().pending, 2);
    // One completes: it serves the head, and a third may start.
    let first = h.establishing.remove(0);
    h.pool
        .handle_established(h.now, first, Conn(first.0), None)
        .unwrap();
    h.drain();
    assert_eq!(h.delivered.len(), 1);
    assert_eq!(h.establishing.len(), 2);
    assert_eq!(h.pool.status().pending, 2);
}

#[test]
fn reset_after_fork_clears_and_closes_every_connection() {
    let mut h = Harness::ready(PoolOptions::default());
    let lent = h.take();
    let idle = h.take();
    h.check_out(); // starts connection 3 for a waiter...
    h.check_in(idle); // ...who is served by 2 instead,
    let (_, idle) = h.delivered.pop().unwrap();
    h.check_in(idle); // which comes back: 1 in use, 2 available, 3 pending.
    h.clear_events();
    h.pool.handle_reset_after_fork(h.now);
    h.drain();
    assert_eq!(h.pool.state(), PoolState::Paused);
    assert_eq!(h.pool.status().total, 0);
    assert_eq!(h.interrupted, [lent.id()]);
    assert_eq!(h.aborted, [cmap_core::ConnectionId(3)]);
    assert_eq!(
        h.closed_reasons(),
        [
            (1, ClosedReason::Stale),
            (3, ClosedReason::Stale),
            (2, ClosedReason::Stale)
        ]
    );
    h.check_in(lent);
    assert_eq!(h.pool.status().total, 0);
}

/// An I/O error that a refused, reset, aborted, timed-out or cut
/// connection gives is a network error (possibly overload: labelled, and
/// it never clears the pool); any other (a name that does not resolve, a
/// certificate refused as invalid data) is not (spec: "Backpressure-
/// enabled"). The doctest of `of_io` shows two kinds; the mutation runs
/// leave doctests out, so this test covers every kind.
///
/// Catches: `EstablishErrorKind::of_io` without its network arm.
#[test]
fn io_errors_of_a_cut_connection_are_network_errors_and_others_not() {
    use cmap_core::EstablishErrorKind;
    use std::io::{Error, ErrorKind as Io};
    for kind in [
        Io::ConnectionRefused,
        Io::ConnectionReset,
        Io::ConnectionAborted,
        Io::NotConnected,
        Io::TimedOut,
        Io::UnexpectedEof,
        Io::BrokenPipe,
        Io::WouldBlock,
        Io::Interrupted,
    ] {
        assert_eq!(
            EstablishErrorKind::of_io(&Error::from(kind)),
            EstablishErrorKind::Network,
            "{kind:?}"
        );
    }
    for kind in [Io::NotFound, Io::PermissionDenied, Io::InvalidData, Io::Other] {
        assert_eq!(
            EstablishErrorKind::of_io(&Error::from(kind)),
            EstablishErrorKind::Other,
            "{kind:?}"
        );
    }
}
