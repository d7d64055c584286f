//! Checking out: the rules of docs/spec-compliance.md's "Checking out" section.
//!
//! Spec: "Connection Pool Behaviors" › "Checking Out a Connection",
//! "Populating the Pool with a Connection".

use std::time::Duration;

use crate::support::{Conn, Harness};
use crate::{failed_reasons, io_error, one_connection_checked_in, opts, quiet};
use cmap_core::{
    CheckOut, CheckOutError, CheckOutFailedReason, Clear, ClosedReason, EstablishFailure, PoolOptions,
    PoolState, Wait,
};

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
    let mut h = one_connection_checked_in(Duration::from_millis(10));
    h.now += Duration::from_millis(11);
    h.clear_events();
    let b = h.take();
    assert_eq!(b.id().0, 2);
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Idle)]);
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
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Stale)]);
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
fn a_deadline_already_passed_fails_at_once_when_nothing_is_available() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    let _held = h.take();
    let w = h.pool.handle_check_out_until(h.now, Some(h.now));
    h.drain();
    assert_eq!(h.failed[0].0, w);
    assert!(matches!(h.failed[0].1, CheckOutError::WaitQueueTimeout { .. }));
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
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Error)]);
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
    let direct = h.pool.handle_check_out_direct(h.now, Wait::Until(None));
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
    let CheckOut::Later(first) = h.pool.handle_check_out_direct(h.now, Wait::Until(None)) else {
        panic!("nothing is available yet");
    };
    h.drain();
    h.establish_all();
    assert_eq!(h.delivered.len(), 1);
    assert_eq!(h.delivered[0].0, first);
    let c = h.delivered.remove(0).1;
    // At maxPoolSize: queued, served by the check-in.
    let CheckOut::Later(second) = h.pool.handle_check_out_direct(h.now, Wait::Until(None)) else {
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
    let CheckOut::Later(third) = h.pool.handle_check_out_direct(h.now, Wait::Until(None)) else {
        panic!("a paused pool serves nothing");
    };
    h.drain();
    assert_eq!(h.failed.len(), 1);
    assert_eq!(h.failed[0].0, third);
}

/// `waitQueueTimeoutMS` of zero "does not wait (a checkout gets an
/// available connection or fails at once)" (`PoolOptionsBuilder::
/// wait_queue_timeout`): a deadline equal to the pool's clock still takes
/// an available connection; only one already behind it gets nothing.
///
/// Catches: in `check_out`, `deadline.is_some_and(|d| d < self.now)` with
/// `<=`.
#[test]
fn a_zero_wait_queue_timeout_still_takes_an_available_connection() {
    let mut h = Harness::ready(quiet().wait_queue_timeout(Duration::ZERO).build().unwrap());
    let w = h.check_out();
    assert_eq!(h.failed.len(), 1, "nothing available: fails at once");
    assert!(h.establishing.is_empty(), "and starts no connection");
    assert_eq!(h.failed[0].0, w);
    // Make one connection available through a checkout that may wait.
    let w = h.pool.handle_check_out_until(h.now, None);
    h.drain();
    h.establish_all();
    let (served, c) = h.delivered.pop().unwrap();
    assert_eq!(served, w);
    h.check_in(c);
    assert_eq!(h.pool.status().available, 1);
    let w = h.check_out();
    assert_eq!(
        h.failed.len(),
        1,
        "a checkout with zero timeout failed though a connection was available"
    );
    assert_eq!(h.delivered.len(), 1);
    assert_eq!(h.delivered[0].0, w);
}

/// CSOT ("Server Selection"): a connection a checkout started is bounded by
/// what is left of it; the core names that checkout's deadline for as long
/// as the checkout waits for that connection, and none for minPoolSize.
#[test]
fn an_establishment_knows_the_deadline_of_the_checkout_that_started_it() {
    let options = opts().max_pool_size(3).min_pool_size(3).max_connecting(3);
    let mut h = Harness::ready(options.build().unwrap());
    let until = h.now + Duration::from_millis(300);
    h.pool.handle_check_out_until(h.now, Some(until));
    h.pool.handle_check_out_until(h.now, None);
    h.drain();
    let [first, second] = h.establishing[..] else {
        panic!("{:?}", h.establishing)
    };
    assert_eq!(h.pool.establishment_deadline(first), Some(until));
    assert_eq!(h.pool.establishment_deadline(second), None, "no deadline");
    // The background run makes the third, for minPoolSize: no checkout.
    h.advance(0);
    let third = *h.establishing.last().unwrap();
    assert_ne!(third, second);
    assert_eq!(h.pool.establishment_deadline(third), None, "minPoolSize");
    // Its checkout served by another connection: the first no longer has one.
    h.pool
        .handle_established(h.now, second, Conn(second.0), None)
        .unwrap();
    h.drain();
    assert_eq!(h.pool.establishment_deadline(first), None, "served otherwise");
}
