//! The CMAP logging tests (`logging/*.json`, unified test format), run in
//! real time against the async pool of an adapter, through this mapping
//! (also in `docs/spec-compliance.md`):
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

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error as StdError;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use cmap_async::{Address, GetError, Pool, PoolOptions, Runtime};
use serde_json::{Map, Value};

use crate::adapter::{Adapter, SharedEndpoint, SimManager};
use crate::endpoint::{Endpoint, EndpointError};
use crate::format::FailPoint;
use crate::log_capture::{next_port, LogRecord, LogSink};
use crate::observe::{event_json, RaisedError};
use crate::realtime::{after, now, WAIT_LIMIT};
use crate::unified_matcher::matches_root;
use crate::TestOutcome;

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

/// The format's CMAP event names and the core's.
const CMAP_EVENTS: &[(&str, &str)] = &[
    ("poolCreatedEvent", "ConnectionPoolCreated"),
    ("poolReadyEvent", "ConnectionPoolReady"),
    ("poolClearedEvent", "ConnectionPoolCleared"),
    ("poolClosedEvent", "ConnectionPoolClosed"),
    ("connectionCreatedEvent", "ConnectionCreated"),
    ("connectionReadyEvent", "ConnectionReady"),
    ("connectionClosedEvent", "ConnectionClosed"),
    ("connectionCheckOutStartedEvent", "ConnectionCheckOutStarted"),
    ("connectionCheckOutFailedEvent", "ConnectionCheckOutFailed"),
    ("connectionCheckedOutEvent", "ConnectionCheckedOut"),
    ("connectionCheckedInEvent", "ConnectionCheckedIn"),
];

/// Events a client may observe that this runner never publishes.
const UNPUBLISHED_EVENTS: &[&str] = &[
    "commandStartedEvent",
    "commandSucceededEvent",
    "commandFailedEvent",
    "serverDescriptionChangedEvent",
    "serverHeartbeatStartedEvent",
    "serverHeartbeatSucceededEvent",
    "serverHeartbeatFailedEvent",
    "topologyDescriptionChangedEvent",
];

/// Whether a test file is in the unified format (it has `schemaVersion`).
pub fn is_unified(value: &Value) -> bool {
    value.get("schemaVersion").is_some()
}

/// Runs every test of a unified-format file on `adapter`: one outcome per
/// test, named `<file>: <description>` (one for the file if it cannot be
/// read).
pub fn run_file<A: Adapter>(adapter: &A, file: &str, doc: &Value) -> Vec<(String, TestOutcome)> {
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
                None => match run_test(adapter, &parsed, test) {
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

fn run_test<A: Adapter>(adapter: &A, file: &TestFileU<'_>, test: &Value) -> Result<(), String> {
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
        adapter,
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

/// Whether the simulated deployment meets one of `requirements` (absent:
/// no requirement).
fn requirements(requirements: Option<&Value>) -> Result<(), String> {
    let Some(requirements) = requirements else {
        return Ok(());
    };
    let list = requirements
        .as_array()
        .ok_or("runOnRequirements must be an array")?;
    let mut unmet = Vec::new();
    for requirement in list {
        match requirement_unmet(requirement)? {
            None => return Ok(()),
            Some(why) => unmet.push(why),
        }
    }
    Err(format!(
        "runOnRequirements not met by the simulated deployment (a single server, any version, \
         authentication on, not serverless, no CSFLE): {}",
        unmet.join("; ")
    ))
}

/// Why the deployment does not meet `requirement`, if it does not.
fn requirement_unmet(requirement: &Value) -> Result<Option<String>, String> {
    let r = obj(requirement, "a runOnRequirement")?;
    for (key, value) in r {
        let unmet = match key.as_str() {
            // The simulated server is whatever version a test asks for.
            "minServerVersion" | "maxServerVersion" => None,
            "topologies" => {
                let single = value.as_array().is_some_and(|t| t.iter().any(|t| t == "single"));
                (!single).then(|| format!("topologies {value} (the deployment is single)"))
            }
            "auth" => (value != &Value::Bool(true)).then(|| format!("auth {value} (authentication is on)")),
            "authMechanism" => {
                let scram = value.as_str().is_some_and(|m| {
                    m.eq_ignore_ascii_case("SCRAM-SHA-1") || m.eq_ignore_ascii_case("SCRAM-SHA-256")
                });
                (!scram).then(|| format!("authMechanism {value} (SCRAM only)"))
            }
            "serverless" => (value == "require").then(|| "serverless require".to_owned()),
            "csfle" => (value != &Value::Bool(false)).then(|| format!("csfle {value}")),
            "serverParameters" => Some("serverParameters (not simulated)".to_owned()),
            other => return Err(format!("unknown runOnRequirement {other:?}")),
        };
        if unmet.is_some() {
            return Ok(unmet);
        }
    }
    Ok(None)
}

/// The events one client saw, for `waitForEvent`.
#[derive(Default)]
struct ClientEvents {
    list: Mutex<Vec<Value>>,
    changed: Condvar,
}

impl ClientEvents {
    fn lock(&self) -> MutexGuard<'_, Vec<Value>> {
        self.list.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Client<R: Runtime> {
    pool: Pool<SimManager<R>, R>,
    events: Arc<ClientEvents>,
    /// The core's names of the CMAP events it observes.
    observed: BTreeSet<&'static str>,
    /// Per log component, the least severe level it collects.
    observe_logs: Option<BTreeMap<String, u8>>,
    logs: LogSink,
    /// It ran a command: its close ends the implicit session.
    sessions_used: bool,
}

impl<R: Runtime> Client<R> {
    /// Its observed events matching `expected` (an expectedEvent).
    fn count(&self, expected: &Value) -> Result<usize, String> {
        self.count_in(&self.events.lock(), expected)
    }

    /// The events of `events` (its list, locked) that it observes and that
    /// match `expected`.
    fn count_in(&self, events: &[Value], expected: &Value) -> Result<usize, String> {
        let core = expected_type(expected)?;
        if !self.observed.contains(core) {
            return Err(format!(
                "{} is not among the client's observeEvents: it is never seen",
                first_key(expected).unwrap_or("?")
            ));
        }
        let mut n = 0;
        for event in events {
            if event_matches(expected, event)? {
                n += 1;
            }
        }
        Ok(n)
    }
}

struct TestRun<'a, A: Adapter> {
    adapter: &'a A,
    endpoint: SharedEndpoint,
    clients: BTreeMap<String, Client<A::Runtime>>,
    /// Database entities and their clients.
    databases: BTreeMap<String, String>,
}

/// A failed operation, as `expectError` looks at it.
#[derive(Debug)]
struct OpError {
    kind: String,
    message: String,
    code: Option<i64>,
    client_side: bool,
}

impl OpError {
    fn from_get(error: &GetError) -> OpError {
        let raised = RaisedError::from_get_error(error);
        let source: Option<&(dyn StdError + 'static)> = error.connection_error().map(|s| s as _);
        let code = match source.and_then(|s| s.downcast_ref::<EndpointError>()) {
            Some(EndpointError::Command { code, .. } | EndpointError::Authentication { code, .. }) => {
                Some(*code)
            }
            _ => None,
        };
        let message = match source {
            Some(source) if !raised.message.contains(&source.to_string()) => {
                format!("{}: {source}", raised.message)
            }
            _ => raised.message,
        };
        OpError {
            kind: raised.kind,
            message,
            code,
            client_side: code.is_none(),
        }
    }
}

impl<A: Adapter> TestRun<'_, A> {
    fn create_entities(&mut self, entities: &[Value]) -> Result<(), String> {
        for entity in entities {
            let e = obj(entity, "an entity")?;
            let (kind, spec) = match e.iter().next() {
                Some((kind, spec)) if e.len() == 1 => (kind.as_str(), obj(spec, "an entity")?),
                _ => return Err(format!("an entity has exactly one key: {entity}")),
            };
            let id = string(spec, "id", kind)?;
            if self.clients.contains_key(id) || self.databases.contains_key(id) {
                return Err(format!("entity {id} already exists"));
            }
            match kind {
                "client" => self.create_client(id, spec)?,
                "database" => {
                    only(
                        spec,
                        &["id", "client", "databaseName", "databaseOptions"],
                        "database",
                    )?;
                    let client = string(spec, "client", "database")?;
                    if !self.clients.contains_key(client) {
                        return Err(format!("database {id}: no client {client}"));
                    }
                    string(spec, "databaseName", "database")?;
                    self.databases.insert(id.to_owned(), client.to_owned());
                }
                other => return Err(format!("{other} entities are not supported by this runner")),
            }
        }
        Ok(())
    }

    fn create_client(&mut self, id: &str, spec: &Map<String, Value>) -> Result<(), String> {
        only(
            spec,
            &[
                "id",
                "uriOptions",
                "observeEvents",
                "observeLogMessages",
                "useMultipleMongoses",
                "ignoreCommandMonitoringEvents",
                "observeSensitiveCommands",
            ],
            "client",
        )?;
        let (options, connect_timeout) = uri_options(spec.get("uriOptions"))?;
        let mut observed = BTreeSet::new();
        for name in array(spec, "observeEvents", "client")?.into_iter().flatten() {
            let name = name.as_str().ok_or("observeEvents holds a non-string")?;
            match CMAP_EVENTS.iter().find(|(n, _)| *n == name) {
                Some((_, core)) => {
                    observed.insert(*core);
                }
                None if UNPUBLISHED_EVENTS.contains(&name) => {}
                None => return Err(format!("unknown event type {name:?} in observeEvents")),
            }
        }
        let observe_logs = match spec.get("observeLogMessages") {
            None => None,
            Some(v) => {
                let mut levels = BTreeMap::new();
                for (component, level) in obj(v, "observeLogMessages")? {
                    let level = level
                        .as_str()
                        .and_then(severity)
                        .ok_or_else(|| format!("observeLogMessages.{component}: unknown level {level}"))?;
                    levels.insert(component.clone(), level);
                }
                Some(levels)
            }
        };
        let port = next_port();
        let logs = LogSink::register(port)?;
        let events = Arc::new(ClientEvents::default());
        let sink = events.clone();
        let rt = self.adapter.runtime();
        let mut builder = Pool::builder()
            .address(Address::new("localhost", port))
            .options(options)
            .start_paused(true)
            .on_event(move |event| {
                sink.lock().push(event_json(event));
                sink.changed.notify_all();
            });
        if let Some(timeout) = connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        let pool = builder
            .build_on(SimManager::new(self.endpoint.clone(), rt.clone()), rt)
            .map_err(|e| format!("client {id}: {e}"))?;
        // The client's first server check marks its pool ready.
        pool.ready().map_err(|e| format!("client {id}: {e}"))?;
        self.clients.insert(
            id.to_owned(),
            Client {
                pool,
                events,
                observed,
                observe_logs,
                logs,
                sessions_used: false,
            },
        );
        Ok(())
    }

    fn client(&self, id: &str) -> Result<&Client<A::Runtime>, String> {
        self.clients
            .get(id)
            .ok_or_else(|| format!("no client entity {id}"))
    }

    fn operation(&mut self, op: &Value) -> Result<(), String> {
        let o = obj(op, "an operation")?;
        only(
            o,
            &[
                "name",
                "object",
                "arguments",
                "expectError",
                "expectResult",
                "ignoreResultAndError",
                "saveResultAsEntity",
            ],
            "an operation",
        )?;
        let name = string(o, "name", "an operation")?;
        let object = string(o, "object", "an operation")?;
        let empty = Map::new();
        let args = match o.get("arguments") {
            Some(args) => obj(args, "arguments")?,
            None => &empty,
        };
        if o.contains_key("expectResult") {
            return Err("expectResult: operation results are not simulated".into());
        }
        if o.contains_key("saveResultAsEntity") {
            return Err("saveResultAsEntity is not supported by this runner".into());
        }
        if object == "testRunner" {
            if o.contains_key("expectError") || o.contains_key("ignoreResultAndError") {
                return Err("expectError and ignoreResultAndError are not for testRunner operations".into());
            }
            return self.special(name, args);
        }
        let result = self.entity_operation(object, name, args)?;
        if o.get("ignoreResultAndError") == Some(&Value::Bool(true)) {
            return Ok(());
        }
        match (o.get("expectError"), result) {
            (Some(expected), Err(error)) => expect_error(expected, &error),
            (Some(expected), Ok(())) => Err(format!("expected an error {expected}, but it succeeded")),
            (None, Err(error)) => Err(format!("unexpected {}: {}", error.kind, error.message)),
            (None, Ok(())) => Ok(()),
        }
    }

    fn special(&mut self, name: &str, args: &Map<String, Value>) -> Result<(), String> {
        match name {
            "createEntities" => {
                only(args, &["entities"], name)?;
                let entities = array(args, "entities", name)?.ok_or("createEntities needs entities")?;
                self.create_entities(entities)
            }
            "failPoint" => {
                only(args, &["client", "failPoint"], name)?;
                self.client(string(args, "client", name)?)?;
                let fail_point =
                    FailPoint::from_json(args.get("failPoint").ok_or("failPoint needs failPoint")?)?;
                lock(&self.endpoint).set_fail_point(Some(fail_point));
                Ok(())
            }
            "waitForEvent" => {
                only(args, &["client", "event", "count"], name)?;
                let client = self.client(string(args, "client", name)?)?;
                let event = args.get("event").ok_or("waitForEvent needs event")?;
                let count = count(args, name)?;
                let deadline = after(WAIT_LIMIT);
                // Counted and waited for under the list's lock, so no event
                // slips in between.
                let mut events = client.events.lock();
                loop {
                    let seen = client.count_in(&events, event)?;
                    if seen >= count {
                        return Ok(());
                    }
                    let left = deadline.saturating_duration_since(now());
                    if left.is_zero() {
                        return Err(format!(
                            "waitForEvent {event}: saw {seen} of {count} after {} s",
                            WAIT_LIMIT.as_secs()
                        ));
                    }
                    events = client
                        .events
                        .changed
                        .wait_timeout(events, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
            "assertEventCount" => {
                only(args, &["client", "event", "count"], name)?;
                let client = self.client(string(args, "client", name)?)?;
                let event = args.get("event").ok_or("assertEventCount needs event")?;
                let (expected, seen) = (count(args, name)?, client.count(event)?);
                match seen == expected {
                    true => Ok(()),
                    false => Err(format!(
                        "assertEventCount {event}: expected {expected}, saw {seen}"
                    )),
                }
            }
            "wait" => {
                only(args, &["ms"], name)?;
                let ms = args.get("ms").and_then(Value::as_u64).ok_or("wait needs ms")?;
                sleep(Duration::from_millis(ms));
                Ok(())
            }
            "assertNumberConnectionsCheckedOut" => {
                only(args, &["client", "connections"], name)?;
                let client = self.client(string(args, "client", name)?)?;
                let expected = args
                    .get("connections")
                    .and_then(Value::as_u64)
                    .ok_or("assertNumberConnectionsCheckedOut needs connections")?;
                let in_use = client.pool.status().in_use as u64;
                match in_use == expected {
                    true => Ok(()),
                    false => Err(format!(
                        "expected {expected} connections checked out, found {in_use}"
                    )),
                }
            }
            other => Err(format!(
                "the special operation {other} is not supported by this runner"
            )),
        }
    }

    /// An operation on an entity: `Err` fails the test, `Ok(Err)` is the
    /// operation's own error.
    fn entity_operation(
        &mut self,
        object: &str,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<Result<(), OpError>, String> {
        if self.clients.contains_key(object) {
            return match name {
                "listDatabases" | "listDatabaseNames" => {
                    only(
                        args,
                        &["filter", "nameOnly", "authorizedDatabases", "comment"],
                        name,
                    )?;
                    self.command(object, "listDatabases")
                }
                "close" => {
                    only(args, &[], name)?;
                    self.close_client(object)?;
                    Ok(Ok(()))
                }
                other => Err(format!(
                    "the client operation {other} is not supported by this runner"
                )),
            };
        }
        if let Some(client) = self.databases.get(object).cloned() {
            return match name {
                "runCommand" => {
                    only(
                        args,
                        &["command", "commandName", "readPreference", "comment"],
                        name,
                    )?;
                    let command = obj(args.get("command").ok_or("runCommand needs command")?, "command")?;
                    let command_name = match args.get("commandName") {
                        Some(n) => n.as_str().ok_or("commandName must be a string")?,
                        None => command
                            .keys()
                            .next()
                            .map(String::as_str)
                            .ok_or("runCommand needs a command document")?,
                    };
                    self.command(&client, command_name)
                }
                other => Err(format!(
                    "the database operation {other} is not supported by this runner"
                )),
            };
        }
        Err(format!("no entity {object}"))
    }

    /// A command on `client`: check out, use, check in.
    fn command(&mut self, client: &str, command: &str) -> Result<Result<(), OpError>, String> {
        if !Endpoint::is_handshake(command) && lock(&self.endpoint).would_fire(command) {
            return Err(format!(
                "the failPoint targets {command}, a command sent after the handshake: the \
                 simulated endpoint answers handshakes only"
            ));
        }
        let adapter = self.adapter;
        let c = self
            .clients
            .get_mut(client)
            .ok_or_else(|| format!("no client entity {client}"))?;
        c.sessions_used = true;
        Ok(match adapter.block_on(c.pool.get()) {
            Ok(conn) => {
                drop(conn);
                Ok(())
            }
            Err(e) => Err(OpError::from_get(&e)),
        })
    }

    /// `close`: ends the implicit sessions (one more command), then closes
    /// the pool.
    fn close_client(&mut self, id: &str) -> Result<(), String> {
        let used = self.client(id)?.sessions_used;
        if used {
            // A driver ignores the outcome of endSessions.
            let _ = self.command(id, "endSessions")?;
        }
        let client = self.clients.get_mut(id).expect("checked above");
        client.sessions_used = false;
        client.pool.close();
        Ok(())
    }

    fn expect_events(&self, expect: Option<&Value>) -> Result<(), String> {
        let Some(expect) = expect else { return Ok(()) };
        for entry in expect.as_array().ok_or("expectEvents must be an array")? {
            let e = obj(entry, "expectEvents")?;
            only(
                e,
                &["client", "eventType", "events", "ignoreExtraEvents"],
                "expectEvents",
            )?;
            let id = string(e, "client", "expectEvents")?;
            let client = self.client(id)?;
            let kind = e.get("eventType").and_then(Value::as_str).unwrap_or("command");
            if kind != "cmap" {
                return Err(format!(
                    "expectEvents for {id}: eventType {kind}: only CMAP events are published here"
                ));
            }
            let expected = array(e, "events", "expectEvents")?.ok_or("expectEvents needs events")?;
            let seen: Vec<Value> = client
                .events
                .lock()
                .iter()
                .filter(|ev| ev["type"].as_str().is_some_and(|t| client.observed.contains(t)))
                .cloned()
                .collect();
            let names = || type_list(&seen, "type");
            for (i, exp) in expected.iter().enumerate() {
                let Some(actual) = seen.get(i) else {
                    return Err(format!(
                        "{id}: expected event {i} {exp}, but only {} were seen: {}",
                        seen.len(),
                        names()
                    ));
                };
                if !event_matches(exp, actual)? {
                    return Err(format!(
                        "{id}: event {i}: expected {exp}, got {actual}; seen: {}",
                        names()
                    ));
                }
            }
            let extra_ok = e.get("ignoreExtraEvents") == Some(&Value::Bool(true));
            if !extra_ok && seen.len() > expected.len() {
                return Err(format!(
                    "{id}: {} events expected, {} seen: {}",
                    expected.len(),
                    seen.len(),
                    names()
                ));
            }
        }
        Ok(())
    }

    fn expect_log_messages(&self, expect: Option<&Value>) -> Result<(), String> {
        let Some(expect) = expect else { return Ok(()) };
        for entry in expect.as_array().ok_or("expectLogMessages must be an array")? {
            let e = obj(entry, "expectLogMessages")?;
            only(
                e,
                &["client", "messages", "ignoreMessages", "ignoreExtraMessages"],
                "expectLogMessages",
            )?;
            let id = string(e, "client", "expectLogMessages")?;
            let client = self.client(id)?;
            let levels = client
                .observe_logs
                .as_ref()
                .ok_or_else(|| format!("client {id} does not observe log messages"))?;
            let ignore = array(e, "ignoreMessages", "expectLogMessages")?
                .cloned()
                .unwrap_or_default();
            let mut seen = Vec::new();
            for record in client.logs.records() {
                if !collected(levels, &record) {
                    continue;
                }
                let message = log_json(&record);
                let mut ignored = false;
                for pattern in &ignore {
                    ignored |= log_matches(pattern, &message).is_ok();
                }
                if !ignored {
                    seen.push(message);
                }
            }
            let expected =
                array(e, "messages", "expectLogMessages")?.ok_or("expectLogMessages needs messages")?;
            let names = || {
                let list: Vec<&str> = seen
                    .iter()
                    .map(|m| m["data"]["message"].as_str().unwrap_or("?"))
                    .collect();
                format!("[{}]", list.join(", "))
            };
            for (i, exp) in expected.iter().enumerate() {
                let Some(actual) = seen.get(i) else {
                    return Err(format!(
                        "{id}: expected log message {i} {}, but only {} were logged: {}",
                        exp["data"]["message"],
                        seen.len(),
                        names()
                    ));
                };
                log_matches(exp, actual).map_err(|why| {
                    format!("{id}: log message {i}: {why}; got {actual}; logged: {}", names())
                })?;
            }
            let extra_ok = e.get("ignoreExtraMessages") == Some(&Value::Bool(true));
            if !extra_ok && seen.len() > expected.len() {
                return Err(format!(
                    "{id}: {} log messages expected, {} logged: {}",
                    expected.len(),
                    seen.len(),
                    names()
                ));
            }
        }
        Ok(())
    }

    fn close_all(&mut self) {
        for client in self.clients.values() {
            client.pool.close();
        }
        self.clients.clear();
    }
}

/// `uriOptions` as pool options (on the core's defaults) and the connect
/// timeout (`None`: the builder's default).
fn uri_options(uri: Option<&Value>) -> Result<(PoolOptions, Option<Option<Duration>>), String> {
    let mut builder = PoolOptions::builder();
    let mut connect_timeout = None;
    let empty = Map::new();
    let options = match uri {
        Some(uri) => obj(uri, "uriOptions")?,
        None => &empty,
    };
    for (name, value) in options {
        if IGNORED_URI_OPTIONS.iter().any(|o| o.eq_ignore_ascii_case(name)) {
            continue;
        }
        if name.eq_ignore_ascii_case("connectTimeoutMS") {
            let ms = value
                .as_u64()
                .ok_or_else(|| format!("uriOptions.connectTimeoutMS: invalid {value}"))?;
            // The URI spec: 0 means no timeout.
            connect_timeout = Some((ms > 0).then(|| Duration::from_millis(ms)));
            continue;
        }
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) => value.to_string(),
            other => return Err(format!("uriOptions.{name}: unsupported value {other}")),
        };
        match builder.set(name, &text) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "uriOptions.{name}: not a pool option of this implementation \
                     (PoolOptionsBuilder::set does not know it) nor one the mapping ignores, \
                     so the client cannot be created as the test asks"
                ))
            }
            Err(e) => return Err(format!("uriOptions.{name}: {e}")),
        }
    }
    let options = builder.build().map_err(|e| format!("uriOptions: {e}"))?;
    Ok((options, connect_timeout))
}

/// The logging spec's severity of a level name (lower is more severe).
fn severity(level: &str) -> Option<u8> {
    Some(match level.to_ascii_lowercase().as_str() {
        "emergency" => 0,
        "alert" => 1,
        "critical" => 2,
        "error" => 3,
        "warning" | "warn" => 4,
        "notice" => 5,
        "informational" | "info" => 6,
        "debug" => 7,
        "trace" => 8,
        _ => return None,
    })
}

/// Whether a client observing `levels` collects `record` (component
/// `connection`).
fn collected(levels: &BTreeMap<String, u8>, record: &LogRecord) -> bool {
    let level = severity(record.level_name()).expect("a known level");
    levels.get("connection").is_some_and(|max| level <= *max)
}

/// A captured record in the shape `expectedLogMessage` describes.
fn log_json(record: &LogRecord) -> Value {
    serde_json::json!({
        "level": record.level_name(),
        "component": "connection",
        "data": Value::Object(record.data.clone()),
    })
}

/// Matches one captured message against an `expectedLogMessage`.
fn log_matches(expected: &Value, actual: &Value) -> Result<(), String> {
    let e = obj(expected, "an expected log message")?;
    only(
        e,
        &["level", "component", "data", "failureIsRedacted"],
        "an expected log message",
    )?;
    if e.contains_key("failureIsRedacted") {
        return Err("failureIsRedacted is not supported: the pool's messages carry no `failure`".into());
    }
    let level = string(e, "level", "an expected log message")?;
    let want = severity(level).ok_or_else(|| format!("unknown level {level}"))?;
    if severity(actual["level"].as_str().unwrap_or("")) != Some(want) {
        return Err(format!("level: expected {level}, found {}", actual["level"]));
    }
    let component = string(e, "component", "an expected log message")?;
    if actual["component"] != component {
        return Err(format!(
            "component: expected {component}, found {}",
            actual["component"]
        ));
    }
    let data = e.get("data").ok_or("an expected log message needs data")?;
    matches_root(data, &actual["data"]).map_err(|why| format!("data {why}"))
}

/// The core's event type an expectedEvent names.
fn expected_type(expected: &Value) -> Result<&'static str, String> {
    let name = match expected.as_object() {
        Some(map) if map.len() == 1 => first_key(expected).expect("one key"),
        _ => return Err(format!("an expected event has exactly one key: {expected}")),
    };
    CMAP_EVENTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, core)| *core)
        .ok_or_else(|| format!("{name}: only CMAP events are published here"))
}

/// Whether `actual` (an event as `event_json` gives it) matches an
/// expectedEvent, with the assertions the format defines for it.
fn event_matches(expected: &Value, actual: &Value) -> Result<bool, String> {
    let core = expected_type(expected)?;
    if actual["type"] != core {
        return Ok(false);
    }
    let name = first_key(expected).expect("checked");
    for (key, value) in obj(&expected[name], name)? {
        let holds = match (name, key.as_str()) {
            ("connectionClosedEvent" | "connectionCheckOutFailedEvent", "reason") => {
                actual.get("reason") == Some(value)
            }
            ("poolClearedEvent", "interruptInUseConnections") => {
                actual.get("interruptInUseConnections") == Some(value)
            }
            ("poolClearedEvent", "hasServiceId") => {
                value.as_bool() == Some(actual.get("serviceId").is_some())
            }
            _ => return Err(format!("{name}.{key} is not an assertion the format defines")),
        };
        if !holds {
            return Ok(false);
        }
    }
    Ok(true)
}

fn expect_error(expected: &Value, error: &OpError) -> Result<(), String> {
    let e = obj(expected, "expectError")?;
    if e.is_empty() {
        return Err("expectError needs at least one assertion".into());
    }
    let fail = |what: String| {
        Err(format!(
            "{what}; the error was {} ({})",
            error.kind, error.message
        ))
    };
    for (key, value) in e {
        match key.as_str() {
            "isError" => {
                if value != &Value::Bool(true) {
                    return Err("isError must be true".into());
                }
            }
            "isClientError" => {
                let want = value.as_bool().ok_or("isClientError must be a boolean")?;
                if want != error.client_side {
                    return fail(format!("expected isClientError {want}"));
                }
            }
            "isTimeoutError" => match value.as_bool() {
                Some(false) => {}
                _ => return Err("isTimeoutError: true is not supported (no timeoutMS here)".into()),
            },
            "errorContains" => {
                let text = value.as_str().ok_or("errorContains must be a string")?;
                if !error.message.to_lowercase().contains(&text.to_lowercase()) {
                    return fail(format!("expected the message to contain {text:?}"));
                }
            }
            "errorCode" => {
                let want = value.as_i64().ok_or("errorCode must be an integer")?;
                if error.code != Some(want) {
                    return fail(format!("expected error code {want}, found {:?}", error.code));
                }
            }
            other => return Err(format!("expectError.{other} is not supported by this runner")),
        }
    }
    Ok(())
}

fn type_list(events: &[Value], key: &str) -> String {
    let names: Vec<&str> = events.iter().map(|e| e[key].as_str().unwrap_or("?")).collect();
    format!("[{}]", names.join(", "))
}

#[allow(clippy::disallowed_methods)] // a test's `wait` sleeps for real
fn sleep(d: Duration) {
    std::thread::sleep(d);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn first_key(value: &Value) -> Option<&str> {
    value.as_object()?.keys().next().map(String::as_str)
}

fn obj<'v>(value: &'v Value, what: &str) -> Result<&'v Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("{what} must be an object, not {value}"))
}

fn only(map: &Map<String, Value>, known: &[&str], what: &str) -> Result<(), String> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(format!("{key:?} in {what} is not supported by this runner")),
        None => Ok(()),
    }
}

fn string<'v>(map: &'v Map<String, Value>, key: &str, what: &str) -> Result<&'v str, String> {
    map.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what} needs {key} (a string)"))
}

fn array<'v>(map: &'v Map<String, Value>, key: &str, what: &str) -> Result<Option<&'v Vec<Value>>, String> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Array(list)) => Ok(Some(list)),
        Some(other) => Err(format!("{key} in {what} must be an array, not {other}")),
    }
}

fn count(args: &Map<String, Value>, what: &str) -> Result<usize, String> {
    args.get("count")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("{what} needs count (a non-negative integer)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requirements_follow_the_simulated_deployment() {
        assert!(requirements(Some(&json!([{"topologies": ["single"]}]))).is_ok());
        assert!(requirements(Some(&json!([{"auth": true, "minServerVersion": "4.0"}]))).is_ok());
        let err = requirements(Some(&json!([{"topologies": ["replicaset"]}, {"auth": false}]))).unwrap_err();
        assert!(err.contains("replicaset") && err.contains("auth false"), "{err}");
        assert!(requirements(Some(&json!([{"serverless": "require"}]))).is_err());
        assert!(requirements(Some(&json!([{"bogus": 1}])))
            .unwrap_err()
            .contains("bogus"));
        assert!(requirements(None).is_ok());
    }

    #[test]
    fn uri_options_set_pool_options_and_ignore_the_listed_others() {
        let (o, timeout) = uri_options(Some(&json!({
            "minPoolSize": 1, "maxPoolSize": 5, "appname": "x", "retryReads": false,
            "heartbeatFrequencyMS": 10000, "connectTimeoutMS": 0
        })))
        .unwrap();
        assert_eq!((o.min_pool_size(), o.max_pool_size()), (1, 5));
        assert_eq!(o.explicit_options().len(), 2);
        assert_eq!(o.reconnect(), None, "the core's defaults, no backoff");
        assert_eq!(timeout, Some(None));
        let err = uri_options(Some(&json!({"bogusPoolOption": 100}))).unwrap_err();
        assert!(
            err.starts_with("uriOptions.bogusPoolOption: not a pool option"),
            "{err}"
        );
        assert!(uri_options(Some(&json!({"maxPoolSize": -1}))).is_err());
    }

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

    #[test]
    fn events_match_by_type_and_the_formats_fields() {
        let closed = json!({"type": "ConnectionClosed", "reason": "error", "connectionId": 1});
        assert!(event_matches(&json!({"connectionClosedEvent": {}}), &closed).unwrap());
        assert!(event_matches(&json!({"connectionClosedEvent": {"reason": "error"}}), &closed).unwrap());
        assert!(!event_matches(&json!({"connectionClosedEvent": {"reason": "stale"}}), &closed).unwrap());
        assert!(!event_matches(&json!({"poolReadyEvent": {}}), &closed).unwrap());
        assert!(event_matches(&json!({"connectionClosedEvent": {"connectionId": 1}}), &closed).is_err());
        let cleared = json!({"type": "ConnectionPoolCleared", "interruptInUseConnections": false});
        assert!(event_matches(&json!({"poolClearedEvent": {"hasServiceId": false}}), &cleared).unwrap());
        assert!(event_matches(&json!({"commandStartedEvent": {}}), &cleared).is_err());
    }

    #[test]
    fn log_messages_match_level_component_and_data_as_root() {
        let actual = json!({"level": "debug", "component": "connection",
            "data": {"message": "Connection ready", "serverPort": 27017, "durationMS": 0.5}});
        let expected = json!({"level": "debug", "component": "connection",
            "data": {"message": "Connection ready", "durationMS": {"$$type": ["double", "int", "long"]}}});
        log_matches(&expected, &actual).unwrap();
        let mut wrong = expected.clone();
        wrong["level"] = json!("info");
        assert!(log_matches(&wrong, &actual).unwrap_err().contains("level"));
        let mut wrong = expected;
        wrong["data"]["message"] = json!("Connection created");
        assert!(log_matches(&wrong, &actual).unwrap_err().contains("/message"));
    }

    #[test]
    fn expect_error_checks_the_supported_keys_only() {
        let network = OpError {
            kind: "Network".into(),
            message: "connection closed by the server during saslContinue".into(),
            code: None,
            client_side: true,
        };
        expect_error(
            &json!({"isClientError": true, "errorContains": "SASLCONTINUE"}),
            &network,
        )
        .unwrap();
        assert!(expect_error(&json!({"isClientError": false}), &network).is_err());
        assert!(expect_error(&json!({"errorCode": 18}), &network).is_err());
        let err = expect_error(&json!({"errorLabelsContain": ["x"]}), &network).unwrap_err();
        assert!(err.contains("not supported"), "{err}");
    }
}
