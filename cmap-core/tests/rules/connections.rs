//! Connections: the rules of docs/spec-compliance.md's "Connections" section.
//!
//! Spec: "Connection Pool Members" › "Connection"; "Connection Pool Behaviors"
//! › "Creating a Connection", "Establishing a Connection", "Closing a
//! Connection".

use std::time::Duration;

use crate::one_connection_checked_in;
use crate::support::Harness;
use cmap_core::PoolOptions;

#[test]
fn connection_ids_start_at_one_and_increase_by_one() {
    let mut h = Harness::ready(PoolOptions::default());
    let ids: Vec<u64> = (0..5).map(|_| h.take().id().0).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
}

#[test]
fn idle_means_strictly_longer_than_max_idle_time() {
    let mut h = one_connection_checked_in(Duration::from_millis(10));
    h.now += Duration::from_millis(10);
    assert_eq!(h.take().id().0, 1);
}
