//! Background thread: the rules of docs/spec-compliance.md's "Background thread" section.
//!
//! Spec: "Connection Pool Members" › "Connection Pool" (background thread);
//! "Optional Behaviors".

use std::time::Duration;

use crate::support::Harness;
use crate::{io_error, opts, quiet};
use cmap_core::{ClosedReason, ConnectionId};

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
    assert!(h.closed_reasons().is_empty());
    h.advance(50);
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Idle)]);
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
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Error)]);
    h.advance(5_000);
    assert!(h.establishing.is_empty(), "a paused pool is not populated");
}

/// Without a maintenance interval the pool runs no background work
/// (`PoolOptionsBuilder::maintenance_interval`: "`None` never runs on a
/// timer"), so nothing populates it towards minPoolSize: a connection
/// established for a checkout does not start others for the minimum.
///
/// Catches: in `handle_established`, `self.state == PoolState::Ready &&
/// self.options.maintenance_interval.is_some()` with `||`.
#[test]
fn without_maintenance_an_established_connection_starts_none_for_min_pool_size() {
    let mut h = Harness::ready(quiet().min_pool_size(3).build().unwrap());
    assert!(h.establishing.is_empty());
    h.check_out();
    assert_eq!(h.establishing, [ConnectionId(1)]);
    h.establish_all();
    assert_eq!(h.delivered.len(), 1);
    assert!(
        h.establishing.is_empty(),
        "started {:?} for minPoolSize",
        h.establishing
    );
    assert_eq!(h.pool.status().total, 1);
}
