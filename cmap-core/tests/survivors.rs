//! Rules that an audit of planted one-line bugs found unguarded (issue 17):
//! each of these tests fails with the bug it names planted in the core, and
//! passed no other suite's notice at the time. They are kept apart from
//! the `rules` binary (`tests/rules/`) so that the audit's findings stay
//! together; each names the spec's words it proves.

mod support;

use std::time::Duration;

use cmap_core::{ClosedReason, ConnectionId, Event, PoolOptions, PoolState};
use support::{fail_establish, Conn, Harness};

/// Durations of the `ConnectionCheckedOut` events, in order.
fn checked_out_durations(h: &Harness) -> Vec<Duration> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::ConnectionCheckedOut { duration, .. } => Some(*duration),
            _ => None,
        })
        .collect()
}

/// A pool without background runs: only the inputs of the test move it.
fn quiet() -> PoolOptions {
    PoolOptions::builder().maintenance_interval(None).build().unwrap()
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
    let mut h = Harness::ready(quiet());
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

/// Spec ("ConnectionCheckedOutEvent", `duration`): "the time elapsed
/// between emitting a ConnectionCheckOutStartedEvent and emitting this
/// event". The wait-time statistic adds up the same durations.
///
/// Catches: `hand_out` measuring the duration from the connection's
/// creation (`meta.created_at`) instead of the checkout's start.
#[test]
fn checked_out_duration_runs_from_the_start_of_the_checkout() {
    let mut h = Harness::ready(
        PoolOptions::builder()
            .max_pool_size(1)
            .maintenance_interval(None)
            .build()
            .unwrap(),
    );
    // Connection 1 is created and checked out at 0 s.
    let conn = h.take();
    h.advance(1000);
    h.check_in(conn);
    // Served at once at 2 s, 2 s after the connection's creation: 0 ms.
    h.advance(1000);
    let conn = h.take();
    // Queued at 2.5 s, served at 2.7 s by a check in: 200 ms.
    h.advance(500);
    let waiter = h.check_out();
    h.advance(200);
    h.check_in(conn);
    assert_eq!(h.delivered.last().map(|(w, _)| *w), Some(waiter));
    assert_eq!(
        checked_out_durations(&h),
        [Duration::ZERO, Duration::ZERO, Duration::from_millis(200)]
    );
    assert_eq!(h.pool.stats().wait_time, Duration::from_millis(200));
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
    let mut h = Harness::ready(quiet());
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
    let mut h = Harness::ready(quiet());
    h.check_out();
    h.clear_events();
    fail_establish(&mut h.pool, h.now, ConnectionId(1)).unwrap();
    h.drain();
    assert_eq!(h.pool.state(), PoolState::Paused);
    assert_eq!(h.pool.generation(), 1);
    assert_eq!(h.names()[0], "ConnectionPoolCleared");
}
