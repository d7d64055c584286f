//! Options: the rules of docs/spec-compliance.md's "Options" section.
//!
//! Spec: "Connection Pool Options" (Detailed Design), "Deprecated Options".

use crate::opts;
use crate::support::Harness;

#[test]
fn zero_max_pool_size_means_no_limit() {
    let mut h = Harness::ready(opts().max_pool_size(0).build().unwrap());
    let held: Vec<_> = (0..150).map(|_| h.take()).collect();
    assert_eq!(h.pool.status().in_use, 150);
    drop(held);
}
