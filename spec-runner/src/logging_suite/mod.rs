//! The CMAP logging tests (`logging/*.json`, unified test format), run in
//! real time against the async pool of an adapter, through this mapping
//! (`docs/spec-compliance.md` links here rather than repeating it):
//!
//! | unified format | here |
//! | --- | --- |
//! | the deployment | one simulated server (`endpoint.rs`): topology `single`; it satisfies any `minServerVersion`/`maxServerVersion`; authentication is on (every handshake runs `saslStart` and `saslContinue` after `hello`, so `auth: true` holds and `auth: false` does not; `authMechanism` holds for `SCRAM-SHA-1`/`SCRAM-SHA-256`); not serverless; no CSFLE; `serverParameters` cannot be read. An unmet `runOnRequirements` is a FAIL naming it, never a skip |
//! | a `client` entity | one pool (`cmap_async::Pool` on the adapter's runtime), with its own address `localhost:<port>` (a port per client, so each client's log messages are told apart by `serverPort`) and the simulated endpoint as its connection manager. Built paused, then readied at once: a client's first server check marks its pool ready |
//! | `uriOptions` | pool options through `PoolOptionsBuilder::set` on the core's defaults (the adapter's default reconnect backoff is not added); `connectTimeoutMS` is the builder's connect timeout; `appname`, `retryReads`, `retryWrites`, `heartbeatFrequencyMS`, `serverSelectionTimeoutMS` and `directConnection` do not concern a pool and are ignored (so is the failPoint's `appName`: the endpoint serves the test's clients only). A test whose client sets one of [`DEPRECATED_POOL_OPTIONS`] (`waitQueueSize`, `waitQueueMultiple`: the CMAP spec's "Deprecated Options", which a driver without them MUST NOT implement) is skipped, with that reason. Any other option the core does not know fails the test |
//! | `observeEvents` | CMAP events, from an `on_event` callback given to the builder (so `ConnectionPoolCreated` is seen); command and SDAM events are accepted but never published |
//! | `observeLogMessages` | the `tracing` records of target `cmap::connection` (component `connection`), captured by a global subscriber (`log_capture.rs`); levels map `DEBUG`→`debug`, `INFO`→`informational`, `WARN`→`warning`, `ERROR`→`error` |
//! | `database` entity | a name for its client |
//! | a command (`listDatabases`, `listDatabaseNames`, `runCommand`) | check out a connection, use it, check it in; an error is the checkout's. No retries (`retryReads`/`retryWrites` are ignored). A failPoint aimed at the command itself (not at the handshake) fails the test: the endpoint simulates handshakes only |
//! | `close` on a client | if the client ran a command, end its implicit sessions first (one more command, `endSessions`, as a driver's close does), then close the pool |
//! | `failPoint` (`testRunner`) | replaces the endpoint's failPoint (`times` counts from zero) |
//! | `waitForEvent`, `assertEventCount` | count the client's observed events matching the expected one (10 s limit for the wait) |
//! | `wait`, `assertNumberConnectionsCheckedOut` | sleep; the pool's `in_use` count |
//! | `expectError` | `isError`; `isClientError` (network and pool errors are the client's, an error code from the server is not); `errorContains` (case-insensitive, in the message and its source); `errorCode`; `isTimeoutError: false` (no `timeoutMS` here). Other keys fail the test |
//! | `expectEvents` | `eventType: cmap` only, matched in order, the count exact unless `ignoreExtraEvents` |
//! | `expectLogMessages` | the client's captured messages at or above its level, minus those matching `ignoreMessages`, matched in order (`level`, `component`, `data` as a root-level document with the format's operators, see `unified_matcher.rs`); the count exact unless `ignoreExtraMessages` |
//!
//! Anything else (other entities, operations, `initialData`, `outcome`,
//! `expectResult`, `skipReason`...) fails the test with the reason. The
//! one skip is the rule of [`DEPRECATED_POOL_OPTIONS`], keyed on option
//! names from the spec, and it is reported (`SKIP <test>: <reason>`): a
//! test is never skipped in silence.
//!
//! This file reads a file and runs its tests; the rest of the mapping is
//! in `requirements.rs` (the deployment), `entities.rs` (clients and
//! databases), `operations.rs` (operations and `expectError`),
//! `events.rs` (`expectEvents`), `log_messages.rs` (`expectLogMessages`)
//! and `json.rs` (reading the file's JSON).

mod entities;
mod events;
mod json;
mod log_messages;
mod operations;
mod requirements;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::driver::Driver;
use crate::endpoint::Endpoint;
use crate::TestOutcome;

use entities::TestRun;
use json::{array, obj, only, string};
use requirements::requirements;

/// The newest schema version this runner reads (files of major version 1
/// up to this minor version).
pub const SCHEMA_VERSION: (u64, u64) = (1, 19);

/// URI options that do not concern a pool, ignored by the mapping.
pub const IGNORED_URI_OPTIONS: &[&str] = &[
    "appname",
    "retryReads",
    "retryWrites",
    "heartbeatFrequencyMS",
    "serverSelectionTimeoutMS",
    "directConnection",
];

/// Pool options the CMAP spec deprecates and forbids to new
/// implementations: its "Deprecated Options" section says `waitQueueSize`
/// and `waitQueueMultiple` MUST NOT be implemented by a driver that does
/// not already have them, and its pool-created log message includes each
/// only "if the driver supports this option". This pool does not have
/// them, so a test whose client `uriOptions` set one (matched
/// case-insensitively, as URI options are) cannot run as written and is
/// reported as skipped, with the option named. Any other option the core
/// does not know still fails the test.
pub const DEPRECATED_POOL_OPTIONS: &[&str] = &["waitQueueSize", "waitQueueMultiple"];

pub use cmap_cli::is_unified;

/// Runs every test of a unified-format file on `adapter`: one outcome per
/// test, named `<file>: <description>` (one for the file if it cannot be
/// read).
pub fn run_file<D: Driver>(driver: &D, file: &str, doc: &Value) -> Vec<(String, TestOutcome)> {
    let parsed = match TestFileU::parse(doc) {
        Ok(parsed) => parsed,
        Err(e) => return vec![(file.to_owned(), TestOutcome::failed(e))],
    };
    parsed
        .tests
        .iter()
        .enumerate()
        .map(|(i, test)| {
            let description = test
                .get("description")
                .and_then(Value::as_str)
                .map_or_else(|| format!("test {i}"), str::to_owned);
            let outcome = match deprecated_option_used(&parsed, test) {
                Some(option) => TestOutcome::skipped(format!(
                    "uses {option}, a deprecated pool option the CMAP spec says MUST NOT be \
                     implemented (Deprecated Options)"
                )),
                None => match run_test(driver, &parsed, test) {
                    Ok(()) => TestOutcome::pass(),
                    Err(why) => TestOutcome::failed(why),
                },
            };
            (format!("{file}: {description}"), outcome)
        })
        .collect()
}

/// The first of [`DEPRECATED_POOL_OPTIONS`] (as the test spells it) that
/// a client of `test` sets in its `uriOptions`: a client of the file's
/// `createEntities`, or of a `createEntities` operation of the test.
/// `None` if there is none (anything malformed is left to `run_test`).
fn deprecated_option_used(file: &TestFileU<'_>, test: &Value) -> Option<String> {
    let created_by_test = test
        .get("operations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|op| op.get("object").and_then(Value::as_str) == Some("testRunner"))
        .filter(|op| op.get("name").and_then(Value::as_str) == Some("createEntities"))
        .filter_map(|op| op.get("arguments")?.get("entities")?.as_array())
        .flatten();
    file.entities
        .iter()
        .chain(created_by_test)
        .filter_map(|entity| entity.get("client")?.get("uriOptions")?.as_object())
        .flat_map(|options| options.keys())
        .find(|name| {
            DEPRECATED_POOL_OPTIONS
                .iter()
                .any(|deprecated| deprecated.eq_ignore_ascii_case(name))
        })
        .cloned()
}

/// The file-level parts of a unified test file.
struct TestFileU<'v> {
    requirements: Option<&'v Value>,
    entities: Vec<Value>,
    initial_data: bool,
    tests: &'v Vec<Value>,
}

impl<'v> TestFileU<'v> {
    fn parse(doc: &'v Value) -> Result<TestFileU<'v>, String> {
        let top = obj(doc, "the test file")?;
        only(
            top,
            &[
                "description",
                "schemaVersion",
                "runOnRequirements",
                "createEntities",
                "initialData",
                "tests",
                "_yamlAnchors",
            ],
            "the test file",
        )?;
        let version = string(top, "schemaVersion", "the test file")?;
        let mut parts = version.split('.').map(str::parse::<u64>);
        let (major, minor) = match (parts.next(), parts.next()) {
            (Some(Ok(major)), Some(Ok(minor))) => (major, minor),
            (Some(Ok(major)), None) => (major, 0),
            _ => return Err(format!("invalid schemaVersion {version:?}")),
        };
        if major != SCHEMA_VERSION.0 || minor > SCHEMA_VERSION.1 {
            return Err(format!(
                "schemaVersion {version} is not supported (this runner reads {}.0 to {}.{})",
                SCHEMA_VERSION.0, SCHEMA_VERSION.0, SCHEMA_VERSION.1
            ));
        }
        Ok(TestFileU {
            requirements: top.get("runOnRequirements"),
            entities: array(top, "createEntities", "the test file")?
                .cloned()
                .unwrap_or_default(),
            initial_data: top.contains_key("initialData"),
            tests: array(top, "tests", "the test file")?.ok_or("the test file has no tests")?,
        })
    }
}

fn run_test<D: Driver>(driver: &D, file: &TestFileU<'_>, test: &Value) -> Result<(), String> {
    let t = obj(test, "a test")?;
    only(
        t,
        &[
            "description",
            "runOnRequirements",
            "skipReason",
            "operations",
            "expectEvents",
            "expectLogMessages",
            "outcome",
        ],
        "a test",
    )?;
    if let Some(reason) = t.get("skipReason") {
        return Err(format!(
            "the file marks this test skipped ({reason}); this runner does not skip tests"
        ));
    }
    requirements(file.requirements)?;
    requirements(t.get("runOnRequirements"))?;
    if file.initial_data {
        return Err("initialData: collections are not simulated".into());
    }
    if t.contains_key("outcome") {
        return Err("outcome: collections are not simulated".into());
    }
    let operations = array(t, "operations", "a test")?.ok_or("a test needs operations")?;
    let mut run = TestRun {
        driver,
        endpoint: Arc::new(Mutex::new(Endpoint::new(None))),
        clients: BTreeMap::new(),
        databases: BTreeMap::new(),
    };
    let result = run
        .create_entities(&file.entities)
        .and_then(|()| {
            operations.iter().enumerate().try_for_each(|(i, op)| {
                run.operation(op)
                    .map_err(|e| format!("operation {i} ({}): {e}", op.get("name").unwrap_or(&Value::Null)))
            })
        })
        .and_then(|()| run.expect_events(t.get("expectEvents")))
        .and_then(|()| run.expect_log_messages(t.get("expectLogMessages")));
    run.close_all();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_client_with_a_deprecated_pool_option_is_found_wherever_it_is_created() {
        let client = |uri: Value| json!({"client": {"id": "c", "uriOptions": uri}});
        let doc = json!({"schemaVersion": "1.13", "createEntities": [client(json!({"maxPoolSize": 1}))],
            "tests": []});
        let file = TestFileU::parse(&doc).unwrap();
        let by_test = |uri: Value| {
            json!({"operations": [
                {"name": "createEntities", "object": "testRunner",
                 "arguments": {"entities": [{"database": {"id": "d"}}, client(uri)]}}
            ]})
        };
        assert_eq!(
            deprecated_option_used(&file, &by_test(json!({"minPoolSize": 1, "waitQueueSize": 5}))),
            Some("waitQueueSize".to_owned())
        );
        assert_eq!(
            deprecated_option_used(&file, &by_test(json!({"WAITQUEUEMULTIPLE": 2}))),
            Some("WAITQUEUEMULTIPLE".to_owned())
        );
        // Other unknown options are not skipped: they fail when the client
        // is created.
        assert_eq!(deprecated_option_used(&file, &by_test(json!({"bogus": 1}))), None);
        assert_eq!(deprecated_option_used(&file, &json!({"operations": []})), None);
        let doc = json!({"schemaVersion": "1.13", "tests": [],
            "createEntities": [client(json!({"waitQueueMultiple": 2}))]});
        let file = TestFileU::parse(&doc).unwrap();
        assert_eq!(
            deprecated_option_used(&file, &json!({"operations": []})),
            Some("waitQueueMultiple".to_owned())
        );
    }
}
