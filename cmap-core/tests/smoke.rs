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

/// `ConnectionCheckedIn` says how long the connection was out, on the
/// driver's clock: what a metrics exporter records as the use time.
#[test]
fn a_check_in_event_says_how_long_the_connection_was_held() {
    let mut h = Harness::ready(PoolOptions::default());
    let c = h.take();
    h.advance(250);
    h.check_in(c);
    let held: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| match e {
            cmap_core::Event::ConnectionCheckedIn { held, .. } => Some(*held),
            _ => None,
        })
        .collect();
    assert_eq!(held, [std::time::Duration::from_millis(250)]);
}
