//! Monitoring and errors: the rules of docs/spec-compliance.md's "Monitoring and errors" section.
//!
//! Spec: "Connection Pool Monitoring" › "Events"; "Connection Pool Logging";
//! "Connection Pool Errors".

use std::time::Duration;

use crate::opts;
use crate::support::{self, Conn, Harness};
use cmap_core::{Action, Event, Output, Pool, PoolOptions};

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

#[test]
fn events_disabled_builds_no_event() {
    let mut h = Harness::ready(PoolOptions::default());
    h.pool.set_events_enabled(false);
    h.clear_events();
    let c = h.take();
    h.check_in(c);
    assert!(h.events.is_empty());
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
