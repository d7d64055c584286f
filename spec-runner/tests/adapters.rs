//! The official tests in real time against every runtime adapter
//! (`--adapter`: tokio, async-std, smol, blocking) and against cmap-local
//! (`--adapter local`, a driver of the kit's own): the CMAP-format files,
//! and the logging files (unified format). The folders are found as `tests/spec_suite.rs` finds them:
//! `CMAP_SPEC_TESTS`, or else `../shared/spec-tests/cmap-format` beside the
//! workspace; the logging folder is `CMAP_SPEC_LOGGING_TESTS`, or else the
//! sibling `logging`. Without them, a test fails when `CI` is set, and
//! otherwise passes without running after writing `SKIPPED <test>: <why>`
//! to stderr, visible in `cargo test`'s output (see `spec_files/mod.rs`);
//! `official_spec_files_found_or_tests_skipped` names the outcome in the
//! list of tests. No spec test may fail; a logging test may be skipped
//! (reported `SKIP`, counted), by the runner's one rule,
//! `logging_suite::DEPRECATED_POOL_OPTIONS`.
//!
//! A few small tests written for the real-time engine follow.

#[path = "../../cmap-cli/tests/spec_files/mod.rs"]
mod spec_files;

use std::path::Path;

use serde_json::{json, Value};
use spec_runner::adapter::{AsyncStdAdapter, SmolAdapter, TokioAdapter};
use spec_runner::blocking_driver::BlockingDriver;
use spec_runner::local_driver::LocalDriver;
use spec_runner::report::{self, Summary};
use spec_runner::Driver;
use spec_runner::{RunOptions, TestFile};

/// Found: both folders hold test files. Missing: fails under CI, else
/// says SKIPPED.
#[test]
fn official_spec_files_found_or_tests_skipped() {
    for dir in [spec_files::cmap_format(), spec_files::logging()]
        .into_iter()
        .flatten()
    {
        let files = spec_runner::test_files(&dir).unwrap();
        assert!(!files.is_empty(), "no test file in {}", dir.display());
    }
}

/// Runs every file of `dir` on `adapter`; returns the report lines, the
/// failures and the totals.
fn run_dir<D: Driver>(driver: &D, dir: &Path) -> (Vec<String>, Vec<String>, Summary) {
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    let mut summary = Summary::default();
    for path in spec_runner::test_files(dir).unwrap() {
        for (name, outcome) in spec_runner::run_file_on(driver, &path, &RunOptions::default()) {
            let line = report::named(&name, &outcome);
            println!("[{}] {line}", driver.driver_name());
            if outcome.is_failed() {
                failures.push(line.clone());
            }
            summary.add(&outcome);
            lines.push(line);
        }
    }
    println!("[{}] {summary}", driver.driver_name());
    (lines, failures, summary)
}

fn cmap_format_passes<D: Driver>(driver: &D) {
    let Some(dir) = spec_files::cmap_format() else {
        return;
    };
    let (lines, failures, summary) = run_dir(driver, &dir);
    assert!(!lines.is_empty());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(summary.skipped, 0, "{lines:#?}");
}

/// Every logging test passes or is skipped (the tests whose client sets a
/// pool option the CMAP spec deprecated and forbids, reported as `SKIP`);
/// none fails.
fn logging_passes<D: Driver>(driver: &D) {
    let Some(dir) = spec_files::logging() else {
        return;
    };
    let (lines, failures, summary) = run_dir(driver, &dir);
    assert!(summary.passed > 0, "{lines:#?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(summary.failed, 0);
    println!(
        "[{}] {} logging tests skipped",
        driver.driver_name(),
        summary.skipped
    );
}

#[test]
fn every_cmap_format_test_passes_on_tokio_in_real_time() {
    cmap_format_passes(&TokioAdapter::new().unwrap());
}

#[test]
fn every_cmap_format_test_passes_on_async_std_in_real_time() {
    cmap_format_passes(&AsyncStdAdapter);
}

#[test]
fn every_cmap_format_test_passes_on_smol_in_real_time() {
    cmap_format_passes(&SmolAdapter);
}

#[test]
fn every_cmap_format_test_passes_on_blocking_in_real_time() {
    cmap_format_passes(&BlockingDriver);
}

#[test]
fn every_cmap_format_test_passes_on_cmap_local_in_real_time() {
    cmap_format_passes(&LocalDriver);
}

#[test]
fn the_logging_tests_pass_on_tokio() {
    logging_passes(&TokioAdapter::new().unwrap());
}

#[test]
fn the_logging_tests_pass_on_async_std() {
    logging_passes(&AsyncStdAdapter);
}

#[test]
fn the_logging_tests_pass_on_smol() {
    logging_passes(&SmolAdapter);
}

#[test]
fn the_logging_tests_pass_on_blocking() {
    logging_passes(&BlockingDriver);
}

#[test]
fn the_logging_tests_pass_on_cmap_local() {
    logging_passes(&LocalDriver);
}

fn outcome(v: Value) -> spec_runner::TestOutcome {
    let adapter = TokioAdapter::new().unwrap();
    spec_runner::run_test_on(&adapter, &TestFile::from_json(&v).unwrap(), true)
}

#[test]
fn a_thread_begins_its_checkout_before_the_main_thread_goes_on() {
    // Without the hand-off rule the main thread's checkout could queue
    // first and take the only connection.
    let o = outcome(json!({
        "version": 1, "style": "unit",
        "poolOptions": {"maxPoolSize": 1, "waitQueueTimeoutMS": 2000},
        "operations": [
            {"name": "ready"},
            {"name": "checkOut", "label": "a"},
            {"name": "start", "target": "t1"},
            {"name": "checkOut", "thread": "t1", "label": "b"},
            {"name": "start", "target": "t2"},
            {"name": "checkOut", "thread": "t2", "label": "c"},
            {"name": "checkIn", "connection": "a"},
            {"name": "waitForThread", "target": "t1"},
            {"name": "waitForEvent", "event": "ConnectionCheckOutStarted", "count": 3}
        ],
        "events": [
            {"type": "ConnectionCheckedOut", "connectionId": 1},
            {"type": "ConnectionCheckedIn", "connectionId": 1},
            {"type": "ConnectionCheckedOut", "connectionId": 1}
        ],
        "ignore": ["ConnectionPoolCreated", "ConnectionPoolReady", "ConnectionCreated",
                   "ConnectionReady", "ConnectionCheckOutStarted"]
    }));
    assert_eq!(o.failure, None, "{}", o.trace.join("\n"));
}

#[test]
fn wait_for_thread_reraises_its_error_and_wait_for_event_times_out() {
    let o = outcome(json!({
        "version": 1, "style": "unit",
        "operations": [
            {"name": "start", "target": "t1"},
            {"name": "checkOut", "thread": "t1"},
            {"name": "waitForThread", "target": "t1"},
            {"name": "ready"}
        ],
        "error": {"type": "PoolClearedError"},
        "events": [{"type": "ConnectionCheckOutFailed", "reason": "connectionError"}],
        "ignore": ["ConnectionPoolCreated", "ConnectionCheckOutStarted"]
    }));
    assert_eq!(o.failure, None, "{}", o.trace.join("\n"));
    let o = outcome(json!({
        "version": 1, "style": "unit",
        "operations": [{"name": "waitForEvent", "event": "ConnectionCreated", "count": 1, "timeout": 20}],
        "error": {"type": "WaitForEventTimeout"}
    }));
    assert_eq!(o.failure, None);
}

#[test]
#[allow(clippy::disallowed_methods)] // measures real time
fn a_blocked_establishment_is_aborted_by_a_clear_not_waited_for() {
    let started = std::time::Instant::now();
    let o = outcome(json!({
        "version": 1, "style": "integration",
        "failPoint": {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                      "data": {"failCommands": ["hello"], "blockConnection": true, "blockTimeMS": 30000}},
        "operations": [
            {"name": "ready"},
            {"name": "start", "target": "t1"},
            {"name": "checkOut", "thread": "t1"},
            {"name": "waitForEvent", "event": "ConnectionCreated", "count": 1},
            {"name": "clear", "interruptInUseConnections": true},
            {"name": "waitForThread", "target": "t1"}
        ],
        "error": {"type": "PoolClearedError"}
    }));
    assert_eq!(o.failure, None, "{}", o.trace.join("\n"));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn unknown_labels_and_threads_fail_the_run_with_a_reason() {
    let o = outcome(json!({
        "version": 1, "style": "unit",
        "operations": [{"name": "ready"}, {"name": "checkIn", "connection": "nope"}]
    }));
    assert!(o.failure.unwrap().contains("labelled \"nope\""));
    let o = outcome(json!({
        "version": 1, "style": "unit",
        "operations": [{"name": "checkOut", "thread": "ghost"}]
    }));
    assert!(o.failure.unwrap().contains("thread ghost was not started"));
}

/// A unified-format file with one test whose client sets `uriOptions`.
fn logging_file_with(uri_options: Value) -> Value {
    json!({
        "description": "uriOptions", "schemaVersion": "1.13",
        "tests": [{
            "description": "a client with these options",
            "operations": [{
                "name": "createEntities", "object": "testRunner",
                "arguments": {"entities": [{"client": {"id": "client", "uriOptions": uri_options}}]}
            }]
        }]
    })
}

#[test]
fn a_deprecated_pool_option_skips_the_test_and_another_unknown_option_fails_it() {
    let adapter = TokioAdapter::new().unwrap();
    let run = |uri: Value| {
        let doc = logging_file_with(uri);
        let mut outcomes = spec_runner::logging_suite::run_file(&adapter, "f.json", &doc);
        assert_eq!(outcomes.len(), 1);
        outcomes.remove(0)
    };
    let (name, skipped) = run(json!({"maxPoolSize": 2, "waitQueueMultiple": 2}));
    assert!(skipped.is_skipped() && !skipped.passed(), "{skipped:?}");
    assert_eq!(
        report::named(&name, &skipped),
        "SKIP f.json: a client with these options: uses waitQueueMultiple, a deprecated pool \
         option the CMAP spec says MUST NOT be implemented (Deprecated Options)"
    );
    let (_, skipped) = run(json!({"WaitQueueSize": 100}));
    assert_eq!(
        skipped
            .skipped
            .as_deref()
            .map(|why| why.starts_with("uses WaitQueueSize,")),
        Some(true)
    );
    let (_, failed) = run(json!({"maxPoolSize": 2, "bogusPoolOption": 1}));
    assert!(failed.is_failed(), "{failed:?}");
    assert!(failed
        .failure
        .unwrap()
        .contains("uriOptions.bogusPoolOption: not a pool option"));
    let (_, passed) = run(json!({"maxPoolSize": 2}));
    assert!(passed.passed(), "{passed:?}");
}
