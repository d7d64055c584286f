//! Clearing: the rules of docs/spec-compliance.md's "Clearing" section.
//!
//! Spec: "Connection Pool Behaviors" › "Clearing a Connection Pool"; "Design
//! Rationale" › "Why does the pool need to support interrupting in use
//! connections".

use std::time::Duration;

use crate::support::Harness;
use crate::{failed_reasons, one_connection_waiting_at_most, opts};
use cmap_core::{
    Address, CheckOutFailedReason, Clear, ClosedReason, Event, PoolOptions, PoolState, ServiceId, UsageError,
};

#[test]
fn clear_bumps_generation_pauses_and_emits_cleared() {
    let mut h = Harness::ready(PoolOptions::default());
    h.clear_events();
    h.pool.handle_clear(h.now, Clear::default()).unwrap();
    h.drain();
    assert_eq!(h.pool.generation(), 1);
    assert_eq!(h.pool.state(), PoolState::Paused);
    assert_eq!(h.names(), ["ConnectionPoolCleared"]);
}

#[test]
fn clearing_a_paused_pool_emits_nothing_but_bumps_generation() {
    let mut h = Harness::new(PoolOptions::default());
    h.pool.handle_clear(h.now, Clear::default()).unwrap();
    h.drain();
    assert_eq!(h.names(), ["ConnectionPoolCreated"]);
    assert_eq!(h.pool.generation(), 1);
}

#[test]
fn clear_fails_every_waiter_eagerly_with_a_retryable_error() {
    let mut h = one_connection_waiting_at_most(Duration::from_secs(30));
    let _held = h.take();
    let waiters: Vec<_> = (0..3).map(|_| h.check_out()).collect();
    h.pool
        .handle_clear(
            h.now,
            Clear {
                cause: Some("monitor saw a network error".into()),
                ..Clear::default()
            },
        )
        .unwrap();
    h.drain();
    let failed: Vec<_> = h.failed.iter().map(|(w, _)| *w).collect();
    assert_eq!(failed, waiters);
    for (_, e) in &h.failed {
        assert!(e.is_retryable());
        assert_eq!(
            e.to_string(),
            "Connection pool for test:27017 was cleared because another operation failed with: monitor saw a network error"
        );
    }
    assert_eq!(failed_reasons(&h), [CheckOutFailedReason::ConnectionError; 3]);
}

#[test]
fn clear_schedules_the_next_background_run_at_once() {
    let mut h = Harness::ready(
        opts()
            .maintenance_interval(Some(Duration::from_secs(10)))
            .build()
            .unwrap(),
    );
    h.advance(1);
    assert!(h.pool.poll_timeout().unwrap() > h.now);
    h.pool.handle_clear(h.now, Clear::default()).unwrap();
    assert_eq!(h.pool.poll_timeout(), Some(h.now));
}

#[test]
fn clear_with_interrupt_closes_in_use_and_pending_of_the_cleared_generation() {
    let mut h = Harness::ready(PoolOptions::default());
    let a = h.take();
    let _pending = h.check_out();
    h.clear_events();
    h.pool
        .handle_clear(
            h.now,
            Clear {
                interrupt_in_use: true,
                ..Clear::default()
            },
        )
        .unwrap();
    h.drain();
    assert!(matches!(
        h.events[0],
        Event::PoolCleared {
            interrupt_in_use_connections: true,
            ..
        }
    ));
    assert_eq!(
        h.closed_reasons(),
        [(1, ClosedReason::Stale), (2, ClosedReason::Stale)]
    );
    assert_eq!(h.interrupted, [cmap_core::ConnectionId(1)]);
    assert_eq!(h.aborted, [cmap_core::ConnectionId(2)]);
    assert_eq!(h.pool.status().total, 0);
    // The interrupted connection is disposed of at check-in, closed once.
    h.clear_events();
    h.check_in(a);
    assert_eq!(h.names(), ["ConnectionCheckedIn"]);
    assert_eq!(
        h.closed.last(),
        Some(&(cmap_core::ConnectionId(1), ClosedReason::Stale))
    );
}

#[test]
fn non_load_balanced_clear_refuses_a_service_id() {
    let mut h = Harness::ready(PoolOptions::default());
    let err = h
        .pool
        .handle_clear(
            h.now,
            Clear {
                service_id: Some(ServiceId([1; 12])),
                ..Clear::default()
            },
        )
        .unwrap_err();
    assert!(matches!(err, UsageError::ClearMode(_)));
    assert_eq!(h.pool.state(), PoolState::Ready);
}

#[test]
fn clear_then_ready_replaces_stale_min_pool_connections() {
    let mut h = Harness::ready(opts().min_pool_size(1).build().unwrap());
    h.advance(0);
    h.establish_all();
    h.pool.handle_clear(h.now, Clear::default()).unwrap();
    h.drain();
    h.advance(200);
    h.pool.handle_ready(h.now).unwrap();
    h.drain();
    h.clear_events();
    h.advance(0);
    assert_eq!(h.names(), ["ConnectionCreated"]);
    assert_eq!(h.closed_reasons(), []);
}

/// An operation on a connection an interrupting clear took fails with a
/// retryable error (spec: "MUST fail with a retryable error"), of the
/// spec's type `PoolClearedError`, with the spec's message.
///
/// Catches: `InterruptedError::is_retryable` returning `false`, and
/// `InterruptedError::spec_name` returning `""` or `"xyzzy"`.
#[test]
fn an_interrupted_error_is_a_retryable_pool_cleared_error() {
    let e = cmap_core::InterruptedError {
        address: Address::new("db", 27017),
    };
    assert!(e.is_retryable());
    assert_eq!(e.spec_name(), "PoolClearedError");
    assert_eq!(
        e.to_string(),
        "Connection to db:27017 interrupted due to server monitor timeout"
    );
}
