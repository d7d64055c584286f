//! Monitoring and errors: the rules of docs/spec-compliance.md's "Monitoring and errors" section.
//!
//! Spec: "Connection Pool Monitoring" › "Events"; "Connection Pool Logging";
//! "Connection Pool Errors".

use std::time::Duration;

use crate::support::{self, fail_establish, Conn, Harness};
use crate::{opts, quiet};
use cmap_core::{Action, ConnectionId, Event, Output, Pool, PoolOptions};

/// Durations of the `ConnectionCheckedOut` events, in order.
fn checked_out_durations(h: &Harness) -> Vec<Duration> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::ConnectionCheckedOut { duration, .. } => Some(*duration),
            _ => None,
        })
        .collect()
}

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

/// An `EstablishError` leads to the manager's error: its `source()` is
/// that error, and `downcast_ref` finds it by type (and only by its
/// type), so that a driver can walk down a failed checkout's chain or
/// recover its own error. Two are equal when they are the same failure:
/// a clone equals its original, and another failure with the same text
/// does not.
///
/// Catches: `EstablishError::downcast_ref` returning `None`, its
/// `source()` returning `None`, and its `PartialEq` answering `true` or
/// `false` whatever the errors.
#[test]
fn an_establish_error_leads_to_the_managers_error_and_equals_only_itself() {
    use cmap_core::EstablishError;
    use std::error::Error as _;
    use std::io::{Error, ErrorKind};
    let error = EstablishError::network(Error::new(ErrorKind::ConnectionRefused, "refused by db"));
    let io = error.downcast_ref::<Error>().expect("the manager's io::Error");
    assert_eq!(io.kind(), ErrorKind::ConnectionRefused);
    assert!(error.downcast_ref::<std::fmt::Error>().is_none());
    let source = error.source().expect("the manager's error as source");
    assert_eq!(source.to_string(), "refused by db");
    assert!(source.downcast_ref::<Error>().is_some());
    assert_eq!(error, error.clone());
    let twin = EstablishError::network(Error::new(ErrorKind::ConnectionRefused, "refused by db"));
    assert_ne!(error, twin);
}

/// The spec's values of `ConnectionClosedEvent.reason` and
/// `ConnectionCheckOutFailedEvent.reason` ("Connection Pool Monitoring"),
/// and the texts the spec's log messages MUST use for each reason
/// ("Connection Pool Logging"), as event and log consumers read them;
/// this crate's own reasons beside them.
///
/// Catches: `as_str` and `log_message` of `ClosedReason` and of
/// `CheckOutFailedReason` returning `""` or `"xyzzy"`.
#[test]
fn reasons_read_as_the_specs_values_and_log_texts() {
    use cmap_core::{CheckOutFailedReason as F, ClosedReason as R};
    let closed = [
        (
            R::Stale,
            "stale",
            "Connection became stale because the pool was cleared",
        ),
        (
            R::Idle,
            "idle",
            "Connection has been available but unused for longer than the configured max idle time",
        ),
        (R::Error, "error", "An error occurred while using the connection"),
        (R::PoolClosed, "poolClosed", "Connection pool was closed"),
        (R::Lifetime, "lifetime", "Connection reached its maximum lifetime"),
        (R::Detached, "detached", "Connection was detached from the pool"),
        (R::Shrunk, "shrunk", "Connection pool was resized below its size"),
    ];
    for (reason, text, log) in closed {
        assert_eq!((reason.as_str(), reason.log_message()), (text, log));
    }
    let failed = [
        (F::PoolClosed, "poolClosed", "Connection pool was closed"),
        (
            F::Timeout,
            "timeout",
            "Wait queue timeout elapsed without a connection becoming available",
        ),
        (
            F::ConnectionError,
            "connectionError",
            "An error occurred while trying to establish a new connection",
        ),
    ];
    for (reason, text, log) in failed {
        assert_eq!((reason.as_str(), reason.log_message()), (text, log));
    }
}

/// `Event::connection_id` names the connection an event is about: every
/// connection event, and a checkout that failed because establishing its
/// connection failed (spec: the log messages' `driverConnectionId`);
/// pool events and other failures name none. `Event::duration` is the
/// duration of the events that carry one (`ConnectionReady`,
/// `ConnectionCheckedOut`, `ConnectionCheckOutFailed`), and none of the
/// others.
///
/// Catches: `Event::connection_id` returning `None` or without any one of
/// its arms, and `Event::duration` returning `None` or
/// `Some(Duration::ZERO)`.
#[test]
fn events_name_their_connection_and_duration() {
    let mut h = Harness::ready(quiet().build().unwrap());
    h.clear_events();
    let c = h.take();
    h.check_in(c);
    h.pool.handle_clear(h.now, Default::default()).unwrap();
    h.pool.handle_ready(h.now).unwrap();
    h.drain();
    h.clear_events();
    h.check_out();
    let id = h.establishing[0];
    h.advance(5);
    fail_establish(&mut h.pool, h.now, id).unwrap();
    h.drain();
    let ms = |n| Some(Duration::from_millis(n));
    let one = Some(ConnectionId(1));
    let named: Vec<_> = h
        .events
        .iter()
        .map(|e| (e.name(), e.connection_id(), e.duration()))
        .collect();
    assert_eq!(
        named,
        [
            ("ConnectionCheckOutStarted", None, None),
            ("ConnectionClosed", one, None),
            ("ConnectionCreated", Some(id), None),
            ("ConnectionPoolCleared", None, None),
            ("ConnectionClosed", Some(id), None),
            ("ConnectionCheckOutFailed", Some(id), ms(5)),
        ]
    );
}

/// Spec ("ConnectionCheckedOutEvent", `duration`): "the time elapsed
/// between emitting a ConnectionCheckOutStartedEvent and emitting this
/// event". The wait-time statistic adds up the same durations.
///
/// Catches: `hand_out` measuring the duration from the connection's
/// creation (`meta.created_at`) instead of the checkout's start.
#[test]
fn checked_out_duration_runs_from_the_start_of_the_checkout() {
    let mut h = Harness::ready(
        PoolOptions::builder()
            .max_pool_size(1)
            .maintenance_interval(None)
            .build()
            .unwrap(),
    );
    // Connection 1 is created and checked out at 0 s.
    let conn = h.take();
    h.advance(1000);
    h.check_in(conn);
    // Served at once at 2 s, 2 s after the connection's creation: 0 ms.
    h.advance(1000);
    let conn = h.take();
    // Queued at 2.5 s, served at 2.7 s by a check in: 200 ms.
    h.advance(500);
    let waiter = h.check_out();
    h.advance(200);
    h.check_in(conn);
    assert_eq!(h.delivered.last().map(|(w, _)| *w), Some(waiter));
    assert_eq!(
        checked_out_durations(&h),
        [Duration::ZERO, Duration::ZERO, Duration::from_millis(200)]
    );
    assert_eq!(h.pool.stats().wait_time, Duration::from_millis(200));
}
