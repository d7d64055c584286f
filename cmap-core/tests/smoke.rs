mod support;
use cmap_core::PoolOptions;
use support::Harness;

#[test]
fn check_out_establish_check_in_reuse() {
    let mut h = Harness::ready(PoolOptions::default());
    let c = h.take();
    assert_eq!(c.id().0, 1);
    h.check_in(c);
    let c2 = h.take();
    assert_eq!(c2.id().0, 1);
    assert_eq!(
        h.names(),
        [
            "ConnectionPoolCreated",
            "ConnectionPoolReady",
            "ConnectionCheckOutStarted",
            "ConnectionCreated",
            "ConnectionReady",
            "ConnectionCheckedOut",
            "ConnectionCheckedIn",
            "ConnectionCheckOutStarted",
            "ConnectionCheckedOut"
        ]
    );
}
