//! Options: the rules of docs/spec-compliance.md's "Options" section.
//!
//! Spec: "Connection Pool Options" (Detailed Design), "Deprecated Options".

use std::time::Duration;

use crate::opts;
use crate::support::Harness;
use cmap_core::PoolOptions;

#[test]
fn zero_max_pool_size_means_no_limit() {
    let mut h = Harness::ready(opts().max_pool_size(0).build().unwrap());
    let held: Vec<_> = (0..150).map(|_| h.take()).collect();
    assert_eq!(h.pool.status().in_use, 150);
    drop(held);
}

/// Every getter of `PoolOptions` reads back what the builder set (a
/// driver reads its pool's options through them: cmap-async decides by
/// `load_balanced` whether a clear names a service), each to a value
/// other than its default.
///
/// Catches: the getters of `PoolOptions` returning a constant or a
/// default instead of the option.
#[test]
fn every_option_getter_reads_back_what_the_builder_set() {
    use cmap_core::{EstablishFailure, Reconnect};
    let reconnect = Reconnect {
        initial_delay: Duration::from_millis(7),
        ..Reconnect::default()
    };
    let o = PoolOptions::builder()
        .max_pool_size(9)
        .min_pool_size(3)
        .max_idle_time(Duration::from_millis(11))
        .max_connecting(4)
        .wait_queue_timeout(Duration::from_millis(13))
        .load_balanced(true)
        .maintenance_interval(Some(Duration::from_millis(17)))
        .max_lifetime(Duration::from_millis(19), 0.5)
        .establish_failure(EstablishFailure::KeepReady)
        .keep_waiting_on_overload(true)
        .reconnect(Some(reconnect))
        .seed(23)
        .build()
        .unwrap();
    assert_eq!(o.max_pool_size(), 9);
    assert_eq!(o.min_pool_size(), 3);
    assert_eq!(o.max_idle_time(), Some(Duration::from_millis(11)));
    assert_eq!(o.max_connecting(), 4);
    assert_eq!(o.wait_queue_timeout(), Some(Duration::from_millis(13)));
    assert!(o.load_balanced());
    assert_eq!(o.maintenance_interval(), Some(Duration::from_millis(17)));
    assert_eq!(o.max_lifetime(), Some(Duration::from_millis(19)));
    assert_eq!(o.establish_failure(), EstablishFailure::KeepReady);
    assert!(o.keep_waiting_on_overload());
    assert_eq!(o.reconnect(), Some(reconnect));
    assert_eq!(o.seed(), Some(23));
    assert_eq!(o.clone().with_seed(29).seed(), Some(29));
    assert_eq!(
        o.explicit_options(),
        [
            ("maxPoolSize", 9),
            ("minPoolSize", 3),
            ("maxIdleTimeMS", 11),
            ("maxConnecting", 4),
            ("waitQueueTimeoutMS", 13)
        ]
    );
    let d = PoolOptions::default();
    assert!(!d.load_balanced() && !d.keep_waiting_on_overload());
    assert_eq!((d.max_lifetime(), d.reconnect(), d.seed()), (None, None, None));
}
