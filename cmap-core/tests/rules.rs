//! One test per rule of the CMAP spec (and of this crate's extensions).
//! Each test names the spec section it proves; docs/spec-compliance.md maps
//! every MUST and SHOULD to these names.

mod support;

use std::time::Duration;

use cmap_core::{
    Action, CheckInError, CheckOut, CheckOutError, CheckOutFailedReason, Clear, ClosedReason, EstablishError,
    EstablishFailure, Event, Output, Pool, PoolOptions, PoolState, Reconnect, ServiceId, UsageError,
};
use support::{Conn, Harness};

fn opts() -> cmap_core::PoolOptionsBuilder {
    PoolOptions::builder()
}

/// An establishment error without backpressure labels (such as an
/// authentication failure): SDAM's reaction clears the pool.
fn io_error(text: &str) -> EstablishError {
    EstablishError::other(std::io::Error::other(text.to_owned()))
}

fn failed_reasons(h: &Harness) -> Vec<CheckOutFailedReason> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::ConnectionCheckOutFailed { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

fn closed_reasons(h: &Harness) -> Vec<(u64, ClosedReason)> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::ConnectionClosed {
                connection_id,
                reason,
                ..
            } => Some((connection_id.0, *reason)),
            _ => None,
        })
        .collect()
}

// ----- Creating, readying and closing a pool ------------------------------

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
fn check_out_from_paused_pool_fails_retryably_with_connection_error() {
    let mut h = Harness::new(PoolOptions::default());
    let w = h.check_out();
    let (id, err) = &h.failed[0];
    assert_eq!(*id, w);
    assert!(matches!(err, CheckOutError::PoolCleared { .. }));
    assert!(err.is_retryable());
    assert_eq!(failed_reasons(&h), [CheckOutFailedReason::ConnectionError]);
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
    assert_eq!(closed_reasons(&h), [(2, ClosedReason::PoolClosed)]);
    assert_eq!(h.names().last(), Some(&"ConnectionPoolClosed"));
    assert_eq!(h.closed, [(cmap_core::ConnectionId(2), ClosedReason::PoolClosed)]);
    // In-use connections are closed when checked in.
    h.clear_events();
    h.check_in(a);
    assert_eq!(h.names(), ["ConnectionCheckedIn", "ConnectionClosed"]);
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::PoolClosed)]);
}

#[test]
fn check_out_from_closed_pool_fails_with_pool_closed_error() {
    let mut h = Harness::ready(PoolOptions::default());
    h.pool.handle_close(h.now);
    h.check_out();
    assert!(matches!(h.failed[0].1, CheckOutError::PoolClosed { .. }));
    assert_eq!(
        h.failed[0].1.to_string(),
        "Attempted to check out a Connection from closed connection pool"
    );
    assert_eq!(failed_reasons(&h), [CheckOutFailedReason::PoolClosed]);
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

// ----- Connection ids -----------------------------------------------------

#[test]
fn connection_ids_start_at_one_and_increase_by_one() {
    let mut h = Harness::ready(PoolOptions::default());
    let ids: Vec<u64> = (0..5).map(|_| h.take().id().0).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
}

// ----- Checking out -------------------------------------------------------

#[test]
fn check_out_reuses_the_most_recently_returned_connection() {
    let mut h = Harness::ready(PoolOptions::default());
    let a = h.take();
    let b = h.take();
    h.check_in(a);
    h.check_in(b);
    assert_eq!(h.take().id().0, 2);
    assert_eq!(h.pool.stats().connections_opened, 2);
}

#[test]
fn check_out_closes_idle_connections_it_meets_and_continues() {
    let mut h = Harness::ready(
        opts()
            .max_idle_time(Duration::from_millis(10))
            .maintenance_interval(None)
            .build()
            .unwrap(),
    );
    let a = h.take();
    h.check_in(a);
    h.now += Duration::from_millis(11);
    h.clear_events();
    let b = h.take();
    assert_eq!(b.id().0, 2);
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::Idle)]);
}

#[test]
fn idle_means_strictly_longer_than_max_idle_time() {
    let mut h = Harness::ready(
        opts()
            .max_idle_time(Duration::from_millis(10))
            .maintenance_interval(None)
            .build()
            .unwrap(),
    );
    let a = h.take();
    h.check_in(a);
    h.now += Duration::from_millis(10);
    assert_eq!(h.take().id().0, 1);
}

#[test]
fn check_out_closes_stale_connections_it_meets() {
    let mut h = Harness::ready(opts().maintenance_interval(None).build().unwrap());
    let a = h.take();
    h.check_in(a);
    h.pool.handle_clear(h.now, Clear::default()).unwrap();
    h.pool.handle_ready(h.now).unwrap();
    h.drain();
    h.clear_events();
    assert_eq!(h.take().id().0, 2);
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::Stale)]);
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
fn zero_max_pool_size_means_no_limit() {
    let mut h = Harness::ready(opts().max_pool_size(0).build().unwrap());
    let held: Vec<_> = (0..150).map(|_| h.take()).collect();
    assert_eq!(h.pool.status().in_use, 150);
    drop(held);
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
fn waiters_blocked_by_max_connecting_take_returned_connections() {
    let mut h = Harness::ready(opts().max_connecting(2).max_pool_size(10).build().unwrap());
    let conn0 = h.take();
    let w1 = h.check_out();
    let _w2 = h.check_out();
    let w3 = h.check_out();
    assert_eq!(h.establishing.len(), 2);
    h.check_in(conn0);
    // The oldest waiter gets the returned connection at once.
    assert_eq!(h.delivered.len(), 1);
    assert_eq!(h.delivered[0].0, w1);
    assert_ne!(h.delivered[0].0, w3);
}

#[test]
fn wait_queue_is_fifo() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    let mut held = h.take();
    let waiters: Vec<_> = (0..4).map(|_| h.check_out()).collect();
    for expected in waiters {
        h.check_in(held);
        let (w, c) = h.delivered.pop().unwrap();
        assert_eq!(w, expected);
        held = c;
    }
}

#[test]
fn wait_queue_timeout_fires_exactly_at_the_deadline() {
    let mut h = Harness::ready(
        opts()
            .max_pool_size(1)
            .wait_queue_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    h.advance(0); // the run that ready() scheduled
    let held = h.take();
    let w = h.check_out();
    let deadline = h.now + Duration::from_millis(50);
    assert_eq!(h.pool.poll_timeout(), Some(deadline));
    h.pool.handle_timeout(deadline - Duration::from_nanos(1));
    h.drain();
    assert!(h.failed.is_empty());
    h.pool.handle_timeout(deadline);
    h.drain();
    assert_eq!(h.failed.len(), 1);
    assert_eq!(h.failed[0].0, w);
    assert_eq!(
        h.failed[0].1.spec_message(),
        "Timed out while checking out a Connection from connection pool"
    );
    // The spec's message, then the pool's state, as HikariCP words it.
    assert_eq!(
        h.failed[0].1.to_string(),
        "Timed out while checking out a Connection from connection pool after 50 ms \
         (maxPoolSize 1, total 1, idle 0, in use 1, connecting 0, waiting 1)"
    );
    match h.events.last() {
        Some(Event::ConnectionCheckOutFailed { reason, duration, .. }) => {
            assert_eq!(*reason, CheckOutFailedReason::Timeout);
            assert_eq!(*duration, Duration::from_millis(50));
        }
        other => panic!("{other:?}"),
    }
    h.check_in(held);
    assert!(h.delivered.is_empty(), "the timed-out waiter is gone");
}

#[test]
fn no_waiter_is_served_after_its_deadline_even_without_a_timer_call() {
    let mut h = Harness::ready(
        opts()
            .max_pool_size(1)
            .wait_queue_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    let held = h.take();
    let w = h.check_out();
    // The driver was late: the next input comes after the deadline.
    h.now += Duration::from_millis(51);
    h.check_in(held);
    assert!(h.delivered.is_empty());
    assert_eq!(h.failed[0].0, w);
}

#[test]
fn a_deadline_already_passed_fails_at_once_when_nothing_is_available() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    let _held = h.take();
    let w = h.pool.handle_check_out_until(h.now, Some(h.now));
    h.drain();
    assert_eq!(h.failed[0].0, w);
    assert!(matches!(h.failed[0].1, CheckOutError::WaitQueueTimeout { .. }));
}

#[test]
fn durations_measure_from_check_out_started_and_from_creation() {
    let mut h = Harness::ready(PoolOptions::default());
    h.check_out();
    h.now += Duration::from_millis(30);
    h.establish_all();
    let ready = h.events.iter().find_map(|e| match e {
        Event::ConnectionReady { duration, .. } => Some(*duration),
        _ => None,
    });
    let out = h.events.iter().find_map(|e| match e {
        Event::ConnectionCheckedOut { duration, .. } => Some(*duration),
        _ => None,
    });
    assert_eq!(ready, Some(Duration::from_millis(30)));
    assert_eq!(out, Some(Duration::from_millis(30)));
}

#[test]
fn establishment_failure_in_check_out_clears_closes_and_fails_with_the_error() {
    let mut h = Harness::ready(PoolOptions::default());
    let w = h.check_out();
    let other = h.check_out();
    h.clear_events();
    let id = h.establishing[0];
    h.pool
        .handle_establish_failed(h.now, id, io_error("refused"))
        .unwrap();
    h.drain();
    // The SDAM reaction (clear) comes before the close and the failure.
    assert_eq!(
        h.names(),
        [
            "ConnectionPoolCleared",
            "ConnectionCheckOutFailed",
            "ConnectionClosed",
            "ConnectionCheckOutFailed"
        ]
    );
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::Error)]);
    let mine = h.failed.iter().find(|(x, _)| *x == w).unwrap();
    match &mine.1 {
        CheckOutError::ConnectionError {
            source,
            connection_id,
            ..
        } => {
            assert_eq!(source.to_string(), "refused");
            assert_eq!(connection_id.0, 1);
        }
        e => panic!("{e:?}"),
    }
    let theirs = h.failed.iter().find(|(x, _)| *x == other).unwrap();
    assert!(theirs.1.is_retryable());
    assert!(theirs.1.to_string().ends_with("failed with: refused"));
    assert_eq!(h.pool.state(), PoolState::Paused);
}

#[test]
fn keep_ready_policy_fails_only_the_requester() {
    let mut h = Harness::ready(
        opts()
            .establish_failure(EstablishFailure::KeepReady)
            .build()
            .unwrap(),
    );
    let w = h.check_out();
    let id = h.establishing.remove(0);
    h.pool
        .handle_establish_failed(h.now, id, io_error("refused"))
        .unwrap();
    h.drain();
    assert_eq!(h.pool.state(), PoolState::Ready);
    assert_eq!(h.failed.len(), 1);
    assert_eq!(h.failed[0].0, w);
    assert_eq!(failed_reasons(&h), [CheckOutFailedReason::ConnectionError]);
}

#[test]
fn a_direct_check_out_returns_an_available_connection_with_the_same_events_and_no_deliver() {
    let mut h = Harness::ready(opts().max_pool_size(2).build().unwrap());
    let c = h.take();
    h.check_in(c);
    h.clear_events();
    let direct = h.pool.handle_check_out_direct(h.now, None);
    h.drain();
    let CheckOut::Ready(c) = direct else {
        panic!("an available connection is served at once, got {direct:?}");
    };
    assert!(h.delivered.is_empty(), "no Deliver follows a direct checkout");
    assert_eq!(h.names(), ["ConnectionCheckOutStarted", "ConnectionCheckedOut"]);
    assert_eq!(h.pool.status().in_use, 1);
    h.check_in(c);
    assert_eq!(h.pool.status().available, 1);
}

#[test]
fn a_direct_check_out_that_must_wait_gets_its_outcome_as_an_action() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    // Nothing available: a connection is started, and it comes by Deliver.
    let CheckOut::Later(first) = h.pool.handle_check_out_direct(h.now, None) else {
        panic!("nothing is available yet");
    };
    h.drain();
    h.establish_all();
    assert_eq!(h.delivered.len(), 1);
    assert_eq!(h.delivered[0].0, first);
    let c = h.delivered.remove(0).1;
    // At maxPoolSize: queued, served by the check-in.
    let CheckOut::Later(second) = h.pool.handle_check_out_direct(h.now, None) else {
        panic!("the only connection is in use");
    };
    h.drain();
    assert!(h.delivered.is_empty());
    h.check_in(c);
    assert_eq!(h.delivered.len(), 1);
    assert_eq!(h.delivered[0].0, second);
    // A paused pool fails it, by action, as `handle_check_out_until` would.
    let c = h.delivered.remove(0).1;
    h.check_in(c);
    h.pool.handle_clear(h.now, Clear::default()).unwrap();
    h.drain();
    let CheckOut::Later(third) = h.pool.handle_check_out_direct(h.now, None) else {
        panic!("a paused pool serves nothing");
    };
    h.drain();
    assert_eq!(h.failed.len(), 1);
    assert_eq!(h.failed[0].0, third);
}

// ----- Checking in --------------------------------------------------------

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
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::Stale)]);
}

#[test]
fn check_in_closes_errored_connections() {
    let mut h = Harness::ready(PoolOptions::default());
    let mut c = h.take();
    c.mark_errored();
    h.clear_events();
    h.check_in(c);
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::Error)]);
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

// ----- Clearing -----------------------------------------------------------

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
    let mut h = Harness::ready(
        opts()
            .max_pool_size(1)
            .wait_queue_timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
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
        closed_reasons(&h),
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

// ----- Load-balanced mode -------------------------------------------------

fn lb_harness() -> Harness {
    Harness::ready(
        opts()
            .load_balanced(true)
            .maintenance_interval(None)
            .build()
            .unwrap(),
    )
}

fn take_for_service(h: &mut Harness, service: ServiceId) -> cmap_core::Pooled<Conn> {
    let w = h.check_out();
    let id = h.establishing.remove(0);
    h.pool
        .handle_established(h.now, id, Conn(id.0), Some(service))
        .unwrap();
    h.drain();
    let pos = h.delivered.iter().position(|(x, _)| *x == w).unwrap();
    h.delivered.remove(pos).1
}

#[test]
fn load_balanced_pool_tracks_generation_and_count_per_service() {
    let mut h = lb_harness();
    let (s1, s2) = (ServiceId([1; 12]), ServiceId([2; 12]));
    let a = take_for_service(&mut h, s1);
    let b = take_for_service(&mut h, s1);
    let c = take_for_service(&mut h, s2);
    assert_eq!(h.pool.service_generation(s1), Some((0, 2)));
    assert_eq!(h.pool.service_generation(s2), Some((0, 1)));
    let mut c = c;
    c.mark_errored();
    h.check_in(c);
    assert_eq!(h.pool.service_generation(s2), None, "entry removed at count 0");
    h.check_in(a);
    h.check_in(b);
    assert_eq!(h.pool.service_generation(s1), Some((0, 2)));
}

#[test]
fn load_balanced_clear_moves_one_service_without_pausing() {
    let mut h = lb_harness();
    let (s1, s2) = (ServiceId([1; 12]), ServiceId([2; 12]));
    let a = take_for_service(&mut h, s1);
    let b = take_for_service(&mut h, s2);
    let keeps_s1_entry = take_for_service(&mut h, s1);
    assert!(matches!(
        h.pool.handle_clear(h.now, Clear::default()),
        Err(UsageError::ClearMode(_))
    ));
    h.clear_events();
    h.pool
        .handle_clear(
            h.now,
            Clear {
                service_id: Some(s1),
                ..Clear::default()
            },
        )
        .unwrap();
    h.drain();
    assert!(matches!(h.events[0], Event::PoolCleared { service_id: Some(s), .. } if s == s1));
    assert_eq!(h.pool.state(), PoolState::Ready);
    h.clear_events();
    h.check_in(a);
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::Stale)]);
    // s2's connection is not stale.
    h.check_in(b);
    assert_eq!(h.pool.status().available, 1);
    let b = h.take();
    assert_eq!(b.id().0, 2);
    // A new connection to s1 takes s1's new generation at handshake time.
    let fresh = take_for_service(&mut h, s1);
    assert_eq!(fresh.generation(), 1);
    assert_eq!(h.pool.service_generation(s1), Some((1, 2)));
    h.check_in(keeps_s1_entry);
}

#[test]
fn load_balanced_interrupting_clear_spares_other_services() {
    let mut h = lb_harness();
    let (s1, s2) = (ServiceId([1; 12]), ServiceId([2; 12]));
    let a = take_for_service(&mut h, s1);
    let _b = take_for_service(&mut h, s2);
    h.pool
        .handle_clear(
            h.now,
            Clear {
                interrupt_in_use: true,
                service_id: Some(s1),
                ..Clear::default()
            },
        )
        .unwrap();
    h.drain();
    assert_eq!(h.interrupted, [a.id()]);
    assert_eq!(h.pool.status().in_use, 1);
}

#[test]
fn load_balanced_clear_keeps_the_wait_queue() {
    let mut h = Harness::ready(
        opts()
            .load_balanced(true)
            .max_pool_size(1)
            .maintenance_interval(None)
            .build()
            .unwrap(),
    );
    let s = ServiceId([3; 12]);
    let held = take_for_service(&mut h, s);
    let w = h.check_out();
    h.pool
        .handle_clear(
            h.now,
            Clear {
                service_id: Some(s),
                ..Clear::default()
            },
        )
        .unwrap();
    h.drain();
    assert!(h.failed.is_empty());
    h.check_in(held); // stale: closed, and a new connection starts for w
    assert_eq!(h.establishing.len(), 1);
    let id = h.establishing.remove(0);
    h.pool.handle_established(h.now, id, Conn(id.0), Some(s)).unwrap();
    h.drain();
    assert_eq!(h.delivered[0].0, w);
}

// ----- Background runs ----------------------------------------------------

#[test]
fn background_run_populates_to_min_pool_size_within_max_connecting() {
    let mut h = Harness::ready(opts().min_pool_size(5).max_connecting(2).build().unwrap());
    h.advance(0);
    assert_eq!(h.establishing.len(), 2, "a run never waits for a connecting slot");
    h.establish_all();
    h.advance(1000);
    assert_eq!(h.establishing.len(), 2);
    h.establish_all();
    h.advance(1000);
    h.establish_all();
    assert_eq!(h.pool.status().available, 5);
    h.advance(1000);
    assert!(h.establishing.is_empty());
}

#[test]
fn background_run_closes_perished_available_connections() {
    let mut h = Harness::ready(
        opts()
            .max_idle_time(Duration::from_millis(100))
            .maintenance_interval(Some(Duration::from_millis(50)))
            .build()
            .unwrap(),
    );
    let a = h.take();
    h.check_in(a);
    h.clear_events();
    h.advance(100);
    assert!(closed_reasons(&h).is_empty());
    h.advance(50);
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::Idle)]);
}

#[test]
fn without_maintenance_interval_no_run_ever_happens() {
    let mut h = Harness::ready(
        opts()
            .min_pool_size(2)
            .maintenance_interval(None)
            .build()
            .unwrap(),
    );
    h.advance(100_000);
    assert!(h.establishing.is_empty());
    assert_eq!(h.pool.poll_timeout(), None);
}

#[test]
fn establishment_failure_while_populating_clears_the_pool() {
    let mut h = Harness::ready(opts().min_pool_size(1).build().unwrap());
    h.advance(0);
    h.clear_events();
    let id = h.establishing.remove(0);
    h.pool
        .handle_establish_failed(h.now, id, io_error("handshake failed"))
        .unwrap();
    h.drain();
    assert_eq!(h.names(), ["ConnectionPoolCleared", "ConnectionClosed"]);
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::Error)]);
    h.advance(5_000);
    assert!(h.establishing.is_empty(), "a paused pool is not populated");
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
    assert_eq!(closed_reasons(&h), []);
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
        closed_reasons(&h),
        [
            (1, ClosedReason::Stale),
            (3, ClosedReason::Stale),
            (2, ClosedReason::Stale)
        ]
    );
    h.check_in(lent);
    assert_eq!(h.pool.status().total, 0);
}

// ----- Extensions -----------------------------------------------------------

#[test]
fn max_lifetime_retires_connections_with_seeded_jitter() {
    let build = |seed| {
        opts()
            .max_lifetime(Duration::from_secs(10), 0.5)
            .seed(seed)
            .maintenance_interval(None)
            .build()
            .unwrap()
    };
    let expiry_of = |seed| {
        let mut h = Harness::ready(build(seed));
        let c = h.take();
        h.check_in(c);
        let mut ms = 0;
        loop {
            ms += 100;
            h.now += Duration::from_millis(100);
            let c = h.take();
            let retired = c.id().0 != 1;
            h.check_in(c);
            if retired {
                assert!(closed_reasons(&h).contains(&(1, ClosedReason::Lifetime)));
                return ms;
            }
        }
    };
    let (a, b) = (expiry_of(1), expiry_of(1));
    assert_eq!(a, b, "same seed, same lifetime");
    assert!((5_000..=10_000).contains(&a), "{a}");
}

#[test]
fn reconnect_backoff_re_readies_and_gives_up_loudly() {
    let policy = Reconnect {
        initial_delay: Duration::from_millis(100),
        max_delay: Duration::from_millis(400),
        give_up_after: Some(Duration::from_secs(2)),
        ..Reconnect::default()
    };
    let mut h = Harness::ready(opts().reconnect(Some(policy)).build().unwrap());
    h.pool.set_events_enabled(false); // giving up is reported even so
    let mut readies = 0;
    for _ in 0..40 {
        h.check_out();
        if let Some(id) = h.establishing.pop() {
            h.pool
                .handle_establish_failed(h.now, id, io_error("down"))
                .unwrap();
            h.drain();
        }
        if h.events
            .iter()
            .any(|e| matches!(e, Event::ReconnectGaveUp { .. }))
        {
            break;
        }
        let wake = h.pool.poll_timeout().expect("a re-ready is scheduled");
        h.now = wake.max(h.now);
        h.pool.handle_timeout(h.now);
        h.drain();
        if h.pool.state() == PoolState::Ready {
            readies += 1;
        }
    }
    assert!(readies >= 3, "re-readied {readies} times");
    assert!(h
        .events
        .iter()
        .any(|e| matches!(e, Event::ReconnectGaveUp { .. })));
    assert_eq!(h.pool.state(), PoolState::Paused);
}

#[test]
fn detach_takes_the_connection_out_of_the_pool() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    let c = h.take();
    let w = h.check_out();
    h.clear_events();
    let raw = h.pool.handle_detach(h.now, c).unwrap();
    h.drain();
    assert_eq!(raw, Conn(1));
    assert_eq!(closed_reasons(&h), [(1, ClosedReason::Detached)]);
    // The freed capacity serves the waiter with a new connection.
    h.establish_all();
    assert_eq!(h.delivered[0].0, w);
}

#[test]
fn cancel_withdraws_a_queued_checkout_and_refuses_unknown_ones() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    let held = h.take();
    let a = h.check_out();
    let b = h.check_out();
    h.pool.handle_cancel(h.now, a).unwrap();
    assert_eq!(h.pool.handle_cancel(h.now, a), Err(UsageError::UnknownWaiter(a)));
    h.check_in(held);
    assert_eq!(h.delivered[0].0, b);
    assert_eq!(h.pool.stats().requests_cancelled, 1);
}

#[test]
fn events_disabled_builds_no_event() {
    let mut h = Harness::ready(PoolOptions::default());
    h.pool.set_events_enabled(false);
    h.clear_events();
    let c = h.take();
    h.check_in(c);
    assert!(h.events.is_empty());
}

#[test]
fn time_never_runs_backwards() {
    let mut h = Harness::ready(
        opts()
            .max_pool_size(1)
            .wait_queue_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    let _held = h.take();
    h.check_out();
    h.pool.handle_timeout(h.now + Duration::from_millis(60));
    h.drain();
    assert_eq!(h.failed.len(), 1);
    // An older `now` afterwards changes nothing and breaks nothing.
    h.pool.handle_timeout(h.now);
    h.drain();
    h.pool.check_invariants().unwrap();
}

#[test]
fn unknown_connection_ids_are_misuse() {
    let mut h = Harness::ready(PoolOptions::default());
    let err = h
        .pool
        .handle_established(h.now, cmap_core::ConnectionId(9), Conn(9), None)
        .unwrap_err();
    assert_eq!(err, UsageError::UnknownConnection(cmap_core::ConnectionId(9)));
    let err = h
        .pool
        .handle_establish_failed(h.now, cmap_core::ConnectionId(0), io_error("x"))
        .unwrap_err();
    assert_eq!(err, UsageError::UnknownConnection(cmap_core::ConnectionId(0)));
}

#[test]
fn stats_count_requests_waits_and_connections() {
    let mut h = Harness::ready(
        opts()
            .max_pool_size(1)
            .wait_queue_timeout(Duration::from_millis(10))
            .build()
            .unwrap(),
    );
    let c = h.take();
    h.check_out();
    h.advance(10);
    h.now += Duration::from_millis(5);
    h.check_in(c);
    let s = h.pool.stats();
    assert_eq!(
        (
            s.requests,
            s.requests_queued,
            s.requests_timed_out,
            s.connections_opened
        ),
        (2, 2, 1, 1)
    );
    assert_eq!(s.usage_time, Duration::from_millis(15));
}

#[test]
fn outputs_come_in_one_ordered_stream() {
    let mut pool: Pool<Conn> = Pool::new(support::origin(), "a:1".parse().unwrap(), PoolOptions::default());
    let now = support::origin();
    pool.handle_ready(now).unwrap();
    pool.handle_check_out(now);
    let kinds: Vec<String> = std::iter::from_fn(|| pool.poll_output())
        .map(|o| match o {
            Output::Event(e) => e.name().to_owned(),
            Output::Action(Action::Establish { .. }) => "Establish".to_owned(),
            Output::Action(a) => format!("{a:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "ConnectionPoolCreated",
            "ConnectionPoolReady",
            "ConnectionCheckOutStarted",
            "ConnectionCreated",
            "Establish"
        ]
    );
}

/// Extension: events kept apart leave the stream to the actions, wait in
/// order for `take_events`, and move with every switch.
#[test]
fn events_kept_apart_are_taken_in_order_and_move_with_the_switch() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    // Pending in the stream when the switch comes: they move apart.
    let _first = h.pool.handle_check_out(h.now);
    h.pool.set_events_apart(true);
    assert_eq!(h.pool.pending_events(), 2);
    let actions: Vec<Output<Conn>> = std::iter::from_fn(|| h.pool.poll_output()).collect();
    assert!(
        matches!(actions[..], [Output::Action(Action::Establish { .. })]),
        "{actions:?}"
    );
    let mut events = Vec::new();
    h.pool.take_events(&mut events);
    let names: Vec<_> = events.iter().map(Event::name).collect();
    assert_eq!(names, ["ConnectionCheckOutStarted", "ConnectionCreated"]);
    assert_eq!(h.pool.pending_events(), 0);
    // Taken into a non-empty buffer, they come after what it holds.
    let _second = h.pool.handle_check_out(h.now);
    h.pool.take_events(&mut events);
    let names: Vec<_> = events.iter().map(Event::name).collect();
    assert_eq!(
        names,
        [
            "ConnectionCheckOutStarted",
            "ConnectionCreated",
            "ConnectionCheckOutStarted"
        ]
    );
    // Back in the stream: pending ones go back too, behind the actions.
    h.pool.handle_close(h.now);
    let pending = h.pool.pending_events();
    assert!(pending > 0);
    h.pool.set_events_apart(false);
    assert_eq!(h.pool.pending_events(), 0);
    h.clear_events();
    h.drain();
    assert_eq!(h.events.len(), pending);
    assert_eq!(h.names().last(), Some(&"ConnectionPoolClosed"));
    assert_eq!(h.failed.len(), 2, "both checkouts failed");
}
