//! This crate's extensions beyond the spec: the connection lifetime, the
//! reconnect backoff, detach, cancel, time and misuse, stats.
//! Every rule here names what it proves; none is a MUST of the spec.

use std::time::Duration;

use crate::support::{Conn, Harness};
use crate::{io_error, one_connection_waiting_at_most, opts};
use cmap_core::{ClosedReason, Event, PoolOptions, PoolState, Reconnect, UsageError};

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
                assert!(h.closed_reasons().contains(&(1, ClosedReason::Lifetime)));
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

/// A pool paused by its own failure reaction (a non-network failure
/// clears it) marks itself ready at the end of the backoff, even when a
/// connection started before the failure succeeds meanwhile: the success
/// ends the backoff, not the scheduled return to ready, or the pool would
/// stay paused with nothing to wake it.
#[test]
fn a_success_after_a_clearing_failure_keeps_the_pools_return_to_ready() {
    let policy = Reconnect {
        initial_delay: Duration::from_millis(100),
        max_delay: Duration::from_secs(10),
        ..Reconnect::default()
    };
    let options = opts()
        .maintenance_interval(None)
        .reconnect(Some(policy))
        .max_connecting(2)
        .build()
        .unwrap();
    let mut h = Harness::ready(options);
    h.check_out();
    h.check_out();
    h.drain();
    let (failed, succeeded) = (h.establishing[0], h.establishing[1]);
    let refused = cmap_core::EstablishError::other(std::io::Error::other("terminating connection"));
    h.pool.handle_establish_failed(h.now, failed, refused).unwrap();
    h.drain();
    assert_eq!(h.pool.state(), PoolState::Paused, "cleared by the failure");
    h.pool
        .handle_established(h.now, succeeded, Conn(2), None)
        .unwrap();
    h.drain();
    let wake = h
        .pool
        .poll_timeout()
        .expect("the return to ready is still scheduled");
    assert!(wake - h.now <= Duration::from_millis(100), "{:?}", wake - h.now);
    h.now = wake;
    h.pool.handle_timeout(h.now);
    h.drain();
    assert_eq!(h.pool.state(), PoolState::Ready, "the pool readied itself");
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
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Detached)]);
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
fn time_never_runs_backwards() {
    let mut h = one_connection_waiting_at_most(Duration::from_millis(50));
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
    let mut h = one_connection_waiting_at_most(Duration::from_millis(10));
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
