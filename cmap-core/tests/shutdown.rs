//! Rule tests for closing gracefully (`Pool::handle_force_close`, beyond
//! the spec): after close, connections in use are left to come back; the
//! driver may then force the rest, which interrupts each once.

mod support;

use cmap_core::{ClosedReason, Event, PoolOptions, UsageError};
use support::Harness;

#[test]
fn forcing_needs_a_closed_pool() {
    let mut h = Harness::ready(PoolOptions::builder().build().unwrap());
    let held = h.take();
    h.clear_events();
    assert_eq!(h.pool.handle_force_close(h.now), Err(UsageError::NotClosed));
    h.drain();
    assert!(
        h.events.is_empty() && h.interrupted.is_empty(),
        "nothing happened"
    );
    assert_eq!(h.pool.status().in_use, 1);
    h.check_in(held);
}

#[test]
fn forcing_interrupts_each_connection_in_use_once_and_counts_it() {
    let mut h = Harness::ready(PoolOptions::builder().build().unwrap());
    let a = h.take();
    let b = h.take();
    let c = h.take();
    h.check_in(c); // back before the close: closed with the pool
    h.pool.handle_close(h.now);
    h.drain();
    h.clear_events();
    let closed_before = h.closed.len();
    assert_eq!(h.pool.handle_force_close(h.now), Ok(2));
    h.drain();
    let mut ids = vec![a.id(), b.id()];
    ids.sort();
    assert_eq!(h.interrupted, ids);
    let reasons: Vec<_> = h
        .events
        .iter()
        .map(|e| match e {
            Event::ConnectionClosed { reason, .. } => *reason,
            other => panic!("only closes: {other:?}"),
        })
        .collect();
    assert_eq!(reasons, [ClosedReason::PoolClosed, ClosedReason::PoolClosed]);
    assert_eq!(h.pool.status().in_use, 0);
    assert_eq!(h.pool.stats().connections_lost, 2);
    assert_eq!(h.pool.handle_force_close(h.now), Ok(0), "nothing left to force");
    // Given back afterwards: disposed of (the action's reason is that of
    // every interrupted connection), without a second event.
    h.clear_events();
    h.check_in(a);
    h.check_in(b);
    assert_eq!(h.names(), ["ConnectionCheckedIn", "ConnectionCheckedIn"]);
    assert_eq!(h.closed.len(), closed_before + 2);
}
