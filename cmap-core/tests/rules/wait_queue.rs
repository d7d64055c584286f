//! WaitQueue: the rules of docs/spec-compliance.md's "WaitQueue" section.
//!
//! Spec: "Connection Pool Members" › "WaitQueue".

use std::time::Duration;

use crate::support::Harness;
use crate::{one_connection_waiting_at_most, opts};
use cmap_core::{CheckOutFailedReason, Event};

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
    let mut h = one_connection_waiting_at_most(Duration::from_millis(50));
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
    let mut h = one_connection_waiting_at_most(Duration::from_millis(50));
    let held = h.take();
    let w = h.check_out();
    // The driver was late: the next input comes after the deadline.
    h.now += Duration::from_millis(51);
    h.check_in(held);
    assert!(h.delivered.is_empty());
    assert_eq!(h.failed[0].0, w);
}
