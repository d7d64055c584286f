//! The virtual-time engine on small tests written for it (not official
//! files): ordering, time-outs, failure messages, determinism.

use cmap_cli::{pool_options, sim, TestFile};
use serde_json::{json, Value};

fn test(v: Value) -> TestFile {
    TestFile::from_json(&v).unwrap()
}

fn outcome(v: Value) -> cmap_cli::TestOutcome {
    cmap_cli::run_test(&test(v), true)
}

/// The types of the events a test saw, in order.
fn event_types(v: Value) -> Vec<String> {
    let t = test(v);
    let options = pool_options::build(&t.pool_options).unwrap();
    let observed = sim::run(&t, options, false).0.unwrap();
    observed
        .events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_stalled_run_fails_with_what_each_thread_waits_for() {
    let o = outcome(json!({
        "version": 1, "style": "unit",
        "poolOptions": {"maxPoolSize": 1, "backgroundThreadIntervalMS": -1},
        "operations": [
            {"name": "ready"},
            {"name": "checkOut"},
            {"name": "start", "target": "t1"},
            {"name": "checkOut", "thread": "t1"},
            {"name": "waitForThread", "target": "t1"}
        ]
    }));
    let why = o.failure.unwrap();
    assert!(why.starts_with("stalled"), "{why}");
    assert!(why.contains("main blocked on `waitForThread t1`"), "{why}");
    assert!(why.contains("t1 blocked on `checkOut @t1`"), "{why}");
}

#[test]
fn waiting_for_an_event_that_never_comes_ends_in_virtual_time() {
    // The default background interval keeps the clock moving; the limit of
    // virtual time ends the run instead of the step cap or a hang.
    let o = outcome(json!({
        "version": 1, "style": "unit",
        "operations": [{"name": "waitForEvent", "event": "ConnectionCreated", "count": 1}]
    }));
    let why = o.failure.unwrap();
    assert!(why.contains("of virtual time"), "{why}");
}

#[test]
fn a_wait_for_event_timeout_is_an_error_of_its_thread() {
    let base = json!({
        "version": 1, "style": "unit",
        "operations": [{"name": "waitForEvent", "event": "ConnectionCreated", "count": 1, "timeout": 5}],
        "error": {"type": "WaitForEventTimeout"}
    });
    assert_eq!(outcome(base.clone()).failure, None);
    let mut no_error = base;
    no_error.as_object_mut().unwrap().remove("error");
    let why = outcome(no_error).failure.unwrap();
    assert!(why.contains("WaitForEventTimeout"), "{why}");
}

#[test]
fn wait_for_thread_reraises_the_first_error_and_the_main_thread_stops() {
    let o = outcome(json!({
        "version": 1, "style": "unit",
        "operations": [
            {"name": "start", "target": "t1"},
            {"name": "checkOut", "thread": "t1"},
            {"name": "waitForThread", "target": "t1"},
            {"name": "ready"}
        ],
        "error": {"type": "PoolClearedError"},
        "events": [{"type": "ConnectionPoolCreated"}, {"type": "ConnectionCheckOutStarted"},
                   {"type": "ConnectionCheckOutFailed", "reason": "connectionError"}]
    }));
    assert_eq!(o.failure, None);
    assert!(
        !o.trace.iter().any(|l| l.contains("op ready")),
        "main went on after its error"
    );
}

#[test]
fn handed_operations_run_before_the_main_threads_next_one() {
    let types = event_types(json!({
        "version": 1, "style": "unit",
        "operations": [
            {"name": "ready"},
            {"name": "start", "target": "t1"},
            {"name": "checkOut", "thread": "t1"},
            {"name": "clear"}
        ]
    }));
    let started = types
        .iter()
        .position(|t| t == "ConnectionCheckOutStarted")
        .unwrap();
    let cleared = types.iter().position(|t| t == "ConnectionPoolCleared").unwrap();
    assert!(started < cleared, "{types:?}");
}

#[test]
fn blocked_handshakes_take_virtual_time_and_checkouts_time_out_on_time() {
    let o = outcome(json!({
        "version": 1, "style": "integration",
        "failPoint": {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                      "data": {"failCommands": ["hello"], "blockConnection": true, "blockTimeMS": 300}},
        "poolOptions": {"waitQueueTimeoutMS": 100},
        "operations": [{"name": "ready"}, {"name": "checkOut"}],
        "error": {"type": "WaitQueueTimeoutError",
                  "message": "timed out while checking out a connection from connection pool"},
        "events": [{"type": "ConnectionCheckOutStarted"}, {"type": "ConnectionCreated"},
                   {"type": "ConnectionCheckOutFailed", "reason": "timeout", "duration": 100}],
        "ignore": ["ConnectionPoolCreated", "ConnectionPoolReady"]
    }));
    assert_eq!(o.failure, None, "{:#?}", o.trace);
    assert!(o
        .trace
        .iter()
        .any(|l| l.trim_start().starts_with("100.000ms ") && l.contains("ConnectionCheckOutFailed")));
}

#[test]
fn a_stale_establishment_error_does_not_clear_the_readied_pool_again() {
    // Two handshakes fail with a server error (no backpressure label: a
    // network error would not clear at all); the first clears the pool,
    // main readies it, then the second (of the old generation) fails: SDAM
    // ignores stale errors.
    let types = event_types(json!({
        "version": 1, "style": "integration",
        "failPoint": {"configureFailPoint": "failCommand", "mode": {"times": 2},
                      "data": {"failCommands": ["hello"], "errorCode": 91}},
        "operations": [
            {"name": "ready"},
            {"name": "start", "target": "t1"},
            {"name": "start", "target": "t2"},
            {"name": "checkOut", "thread": "t1"},
            {"name": "checkOut", "thread": "t2"},
            {"name": "waitForEvent", "event": "ConnectionCheckOutFailed", "count": 2},
            {"name": "ready"},
            {"name": "waitForEvent", "event": "ConnectionClosed", "count": 2}
        ]
    }));
    let cleared = types.iter().filter(|t| *t == "ConnectionPoolCleared").count();
    assert_eq!(cleared, 1, "{types:?}");
    assert_eq!(
        types.last().map(String::as_str),
        Some("ConnectionClosed"),
        "{types:?}"
    );
}

#[test]
fn runner_misuse_fails_the_test_clearly() {
    let unknown_label = outcome(json!({
        "version": 1, "style": "unit",
        "operations": [{"name": "ready"}, {"name": "checkIn", "connection": "nope"}]
    }));
    assert!(unknown_label.failure.unwrap().contains("\"nope\""));
    let unknown_thread = outcome(json!({
        "version": 1, "style": "unit",
        "operations": [{"name": "checkOut", "thread": "t9"}]
    }));
    assert!(unknown_thread.failure.unwrap().contains("t9 was not started"));
    let bad_option = outcome(json!({
        "version": 1, "style": "unit", "poolOptions": {"maxLifetimeMS": 5}, "operations": []
    }));
    assert!(bad_option.failure.unwrap().contains("maxLifetimeMS"));
}

#[test]
fn the_same_test_traces_identically() {
    let t = json!({
        "version": 1, "style": "integration",
        "failPoint": {"configureFailPoint": "failCommand", "mode": {"times": 1},
                      "data": {"failCommands": ["hello"], "blockConnection": true, "blockTimeMS": 40}},
        "poolOptions": {"maxPoolSize": 2, "minPoolSize": 1, "backgroundThreadIntervalMS": 25},
        "operations": [
            {"name": "ready"},
            {"name": "start", "target": "t1"},
            {"name": "start", "target": "t2"},
            {"name": "checkOut", "thread": "t1", "label": "a"},
            {"name": "checkOut", "thread": "t2", "label": "b"},
            {"name": "checkOut", "thread": "t2"},
            {"name": "waitForEvent", "event": "ConnectionCheckedOut", "count": 2},
            {"name": "checkIn", "connection": "a"},
            {"name": "wait", "ms": 60},
            {"name": "waitForThread", "target": "t2"}
        ]
    });
    let first = outcome(t.clone());
    assert_eq!(first.failure, None, "{:#?}", first.trace);
    assert!(first.trace.len() > 20);
    assert_eq!(first, outcome(t));
}
