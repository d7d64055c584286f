//! The CMAP test file format (version 1), parsed strictly.
//!
//! Every key of a file, an operation or a failPoint is either understood or
//! an error: a runner that skipped what it does not know would report a pass
//! for a test it never ran. Nothing here knows how a test is executed, so
//! the virtual-time engine and real-time adapters share it.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

/// `style`: whether the file needs a server (`integration`) or not. Both
/// run here, the simulated endpoint standing in for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Needs no server.
    Unit,
    /// Carries a `failPoint` or `runOn` for a real server.
    Integration,
}

/// One parsed test file.
#[derive(Debug, Clone)]
pub struct TestFile {
    /// `description`.
    pub description: String,
    /// `style`.
    pub style: Style,
    /// `poolOptions` as given, by name (see `pool_options.rs`).
    pub pool_options: Vec<(String, Value)>,
    /// `operations`, in order, for the main thread to process.
    pub operations: Vec<Operation>,
    /// `error`: what the main thread must raise, if anything.
    pub error: Option<Value>,
    /// `events`: what the events seen, minus `ignore`, must match.
    pub events: Vec<Value>,
    /// `ignore`: event types left out of the comparison.
    pub ignore: Vec<String>,
    /// `failPoint`: what the endpoint does to handshakes.
    pub fail_point: Option<FailPoint>,
}

/// One operation and the thread it names.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// `thread`: the named thread that runs it; `None` is the main thread.
    pub thread: Option<String>,
    /// What to do.
    pub kind: OpKind,
}

/// The operations of the format.
#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    /// `start {target}`.
    Start { target: String },
    /// `wait {ms}`.
    Wait { ms: u64 },
    /// `waitForThread {target}`.
    WaitForThread { target: String },
    /// `waitForEvent {event, count, timeout?}`.
    WaitForEvent {
        event: String,
        count: usize,
        timeout_ms: Option<u64>,
    },
    /// `checkOut {label?}`.
    CheckOut { label: Option<String> },
    /// `checkIn {connection}`.
    CheckIn { connection: String },
    /// `clear {interruptInUseConnections?}`.
    Clear { interrupt_in_use: bool },
    /// `close`.
    Close,
    /// `ready`.
    Ready,
}

/// A `configureFailPoint: failCommand` document.
#[derive(Debug, Clone, PartialEq)]
pub struct FailPoint {
    /// When it fires.
    pub mode: FailPointMode,
    /// `data.failCommands`.
    pub fail_commands: Vec<String>,
    /// `data.closeConnection`: fail with a network error.
    pub close_connection: bool,
    /// `data.blockConnection` with `data.blockTimeMS`: delay the command.
    pub block: Option<Duration>,
    /// `data.errorCode`: fail with a command error of this code.
    pub error_code: Option<i64>,
}

/// `mode` of a failPoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailPointMode {
    /// `"alwaysOn"`.
    AlwaysOn,
    /// `{"times": N}`: the first N matching commands.
    Times(u64),
    /// `"off"`.
    Off,
}

impl TestFile {
    /// Parses a file's text.
    pub fn parse(text: &str) -> Result<TestFile, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
        TestFile::from_json(&value)
    }

    /// Parses a file already read as JSON.
    pub fn from_json(value: &Value) -> Result<TestFile, String> {
        let top = Fields::new(value, "the test file")?;
        top.only(&[
            "version",
            "style",
            "description",
            "poolOptions",
            "operations",
            "error",
            "events",
            "ignore",
            "failPoint",
            "runOn",
        ])?;
        match top.u64("version")? {
            Some(1) => {}
            other => return Err(format!("unsupported format version {other:?} (expected 1)")),
        }
        let style = match top.str("style")? {
            Some("unit") => Style::Unit,
            Some("integration") => Style::Integration,
            other => return Err(format!("unknown style {other:?}")),
        };
        let pool_options = match top.get("poolOptions") {
            None => Vec::new(),
            Some(v) => Fields::new(v, "poolOptions")?
                .map
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        let operations = top
            .array("operations")?
            .ok_or("missing operations")?
            .iter()
            .enumerate()
            .map(|(i, op)| Operation::from_json(op).map_err(|e| format!("operation {i}: {e}")))
            .collect::<Result<_, _>>()?;
        let error = match top.get("error") {
            Some(e) if e.is_object() => Some(e.clone()),
            Some(_) => return Err("error must be an object".into()),
            None => None,
        };
        let events = top.array("events")?.cloned().unwrap_or_default();
        if let Some(bad) = events.iter().find(|e| !e.is_object()) {
            return Err(format!("expected event {bad} is not an object"));
        }
        let ignore = match top.array("ignore")? {
            None => Vec::new(),
            Some(list) => list
                .iter()
                .map(|v| v.as_str().map(str::to_owned).ok_or("ignore holds a non-string"))
                .collect::<Result<_, _>>()?,
        };
        let fail_point = top.get("failPoint").map(FailPoint::from_json).transpose()?;
        // `runOn` names server versions and topologies; the simulated
        // endpoint satisfies any of them, so it is accepted as is.
        Ok(TestFile {
            description: top.str("description")?.unwrap_or_default().to_owned(),
            style,
            pool_options,
            operations,
            error,
            events,
            ignore,
            fail_point,
        })
    }
}

impl Operation {
    fn from_json(value: &Value) -> Result<Operation, String> {
        let f = Fields::new(value, "an operation")?;
        let name = f.str("name")?.ok_or("missing name")?;
        let required = |key: &str| {
            f.str(key)?
                .map(str::to_owned)
                .ok_or(format!("{name} needs {key}"))
        };
        let (allowed, kind): (&[&str], OpKind) = match name {
            "start" => (
                &["target"],
                OpKind::Start {
                    target: required("target")?,
                },
            ),
            "wait" => (
                &["ms"],
                OpKind::Wait {
                    ms: f.u64("ms")?.ok_or("wait needs ms")?,
                },
            ),
            "waitForThread" => (
                &["target"],
                OpKind::WaitForThread {
                    target: required("target")?,
                },
            ),
            "waitForEvent" => (
                &["event", "count", "timeout"],
                OpKind::WaitForEvent {
                    event: required("event")?,
                    count: f.u64("count")?.ok_or("waitForEvent needs count")? as usize,
                    timeout_ms: f.u64("timeout")?,
                },
            ),
            "checkOut" => (
                &["label"],
                OpKind::CheckOut {
                    label: f.str("label")?.map(str::to_owned),
                },
            ),
            "checkIn" => (
                &["connection"],
                OpKind::CheckIn {
                    connection: required("connection")?,
                },
            ),
            "clear" => (
                &["interruptInUseConnections"],
                OpKind::Clear {
                    interrupt_in_use: f.bool("interruptInUseConnections")?.unwrap_or(false),
                },
            ),
            "close" => (&[], OpKind::Close),
            "ready" => (&[], OpKind::Ready),
            other => return Err(format!("unknown operation {other:?}")),
        };
        let mut known = vec!["name", "thread"];
        known.extend_from_slice(allowed);
        f.only(&known)?;
        Ok(Operation {
            thread: f.str("thread")?.map(str::to_owned),
            kind,
        })
    }
}

/// How an operation reads in traces and failure messages.
impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            OpKind::Start { target } => write!(f, "start {target}"),
            OpKind::Wait { ms } => write!(f, "wait {ms}ms"),
            OpKind::WaitForThread { target } => write!(f, "waitForThread {target}"),
            OpKind::WaitForEvent {
                event,
                count,
                timeout_ms,
            } => {
                write!(f, "waitForEvent {event} x{count}")?;
                timeout_ms.map_or(Ok(()), |t| write!(f, " timeout {t}ms"))
            }
            OpKind::CheckOut { label: Some(label) } => write!(f, "checkOut label={label}"),
            OpKind::CheckOut { label: None } => f.write_str("checkOut"),
            OpKind::CheckIn { connection } => write!(f, "checkIn {connection}"),
            OpKind::Clear { interrupt_in_use } => {
                write!(f, "clear interruptInUseConnections={interrupt_in_use}")
            }
            OpKind::Close => f.write_str("close"),
            OpKind::Ready => f.write_str("ready"),
        }?;
        match &self.thread {
            Some(thread) => write!(f, " @{thread}"),
            None => Ok(()),
        }
    }
}

impl FailPoint {
    /// Parses a `configureFailPoint: failCommand` document (a CMAP test's
    /// `failPoint`, or the argument of a unified test's `failPoint`
    /// operation).
    pub fn from_json(value: &Value) -> Result<FailPoint, String> {
        let f = Fields::new(value, "failPoint")?;
        f.only(&["configureFailPoint", "mode", "data"])?;
        match f.str("configureFailPoint")? {
            Some("failCommand") => {}
            other => return Err(format!("unsupported failPoint {other:?}")),
        }
        let mode = match f.get("mode") {
            Some(Value::String(s)) if s == "alwaysOn" => FailPointMode::AlwaysOn,
            Some(Value::String(s)) if s == "off" => FailPointMode::Off,
            Some(m @ Value::Object(_)) => {
                let m = Fields::new(m, "failPoint mode")?;
                m.only(&["times"])?;
                FailPointMode::Times(m.u64("times")?.ok_or("failPoint mode needs times")?)
            }
            other => return Err(format!("unsupported failPoint mode {other:?}")),
        };
        let data = Fields::new(f.get("data").ok_or("failPoint needs data")?, "failPoint data")?;
        // `appName` only aims the failPoint at the test's client; here the
        // endpoint serves that client alone.
        data.only(&[
            "failCommands",
            "closeConnection",
            "blockConnection",
            "blockTimeMS",
            "errorCode",
            "appName",
        ])?;
        let fail_commands = data
            .array("failCommands")?
            .ok_or("failPoint data needs failCommands")?
            .iter()
            .map(|c| {
                c.as_str()
                    .map(str::to_owned)
                    .ok_or("failCommands holds a non-string")
            })
            .collect::<Result<_, _>>()?;
        let block = match (data.bool("blockConnection")?, data.u64("blockTimeMS")?) {
            (Some(true), Some(ms)) => Some(Duration::from_millis(ms)),
            (Some(true), None) => return Err("blockConnection needs blockTimeMS".into()),
            _ => None,
        };
        Ok(FailPoint {
            mode,
            fail_commands,
            close_connection: data.bool("closeConnection")?.unwrap_or(false),
            block,
            error_code: data.i64("errorCode")?,
        })
    }
}

/// Typed access to one JSON object, with errors that name the key.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    what: &'static str,
}

impl<'a> Fields<'a> {
    fn new(value: &'a Value, what: &'static str) -> Result<Fields<'a>, String> {
        match value {
            Value::Object(map) => Ok(Fields { map, what }),
            other => Err(format!("{what} must be an object, not {other}")),
        }
    }

    /// Fails on the first key that is not in `known`.
    fn only(&self, known: &[&str]) -> Result<(), String> {
        match self.map.keys().find(|k| !known.contains(&k.as_str())) {
            Some(key) => Err(format!("unknown field {key:?} in {}", self.what)),
            None => Ok(()),
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    fn typed<T>(
        &self,
        key: &str,
        kind: &str,
        read: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, String> {
        match self.map.get(key) {
            None => Ok(None),
            Some(v) => read(v)
                .map(Some)
                .ok_or_else(|| format!("{key} in {} must be {kind}, not {v}", self.what)),
        }
    }

    fn str(&self, key: &str) -> Result<Option<&'a str>, String> {
        self.typed(key, "a string", Value::as_str)
    }
    fn u64(&self, key: &str) -> Result<Option<u64>, String> {
        self.typed(key, "a non-negative integer", Value::as_u64)
    }
    fn i64(&self, key: &str) -> Result<Option<i64>, String> {
        self.typed(key, "an integer", Value::as_i64)
    }
    fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        self.typed(key, "a boolean", Value::as_bool)
    }
    fn array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, String> {
        self.typed(key, "an array", Value::as_array)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<TestFile, String> {
        TestFile::from_json(&v)
    }

    #[test]
    fn parses_operations_and_threads() {
        let t = parse(json!({
            "version": 1, "style": "unit", "description": "d",
            "operations": [
                {"name": "start", "target": "t1"},
                {"name": "checkOut", "thread": "t1", "label": "c"},
                {"name": "waitForEvent", "event": "ConnectionCreated", "count": 2, "timeout": 10},
                {"name": "clear", "interruptInUseConnections": true}
            ]
        }))
        .unwrap();
        assert_eq!(t.operations.len(), 4);
        assert_eq!(t.operations[1].thread.as_deref(), Some("t1"));
        assert_eq!(t.operations[1].to_string(), "checkOut label=c @t1");
        assert_eq!(
            t.operations[2].kind,
            OpKind::WaitForEvent {
                event: "ConnectionCreated".into(),
                count: 2,
                timeout_ms: Some(10)
            }
        );
    }

    #[test]
    fn unknown_fields_and_operations_are_errors() {
        let base = |ops: Value| json!({"version": 1, "style": "unit", "operations": ops});
        let err = parse(base(json!([{"name": "clear", "closeInUseConnections": true}]))).unwrap_err();
        assert!(err.contains("closeInUseConnections"), "{err}");
        let err = parse(base(json!([{"name": "failPoint"}]))).unwrap_err();
        assert!(err.contains("unknown operation"), "{err}");
        let mut top = base(json!([]));
        top["extra"] = json!(1);
        assert!(parse(top).unwrap_err().contains("extra"));
        let err = parse(base(json!([{"name": "waitForEvent", "event": "X"}]))).unwrap_err();
        assert!(err.contains("count"), "{err}");
    }

    #[test]
    fn parses_fail_points() {
        let t = parse(json!({
            "version": 1, "style": "integration", "operations": [],
            "runOn": [{"minServerVersion": "4.4.0"}],
            "failPoint": {
                "configureFailPoint": "failCommand",
                "mode": {"times": 3},
                "data": {"failCommands": ["hello"], "blockConnection": true, "blockTimeMS": 50,
                         "errorCode": 91, "appName": "x"}
            }
        }))
        .unwrap();
        let fp = t.fail_point.unwrap();
        assert_eq!(fp.mode, FailPointMode::Times(3));
        assert_eq!(fp.block, Some(Duration::from_millis(50)));
        assert_eq!(fp.error_code, Some(91));
        assert!(!fp.close_connection);
        let err = parse(json!({
            "version": 1, "style": "integration", "operations": [],
            "failPoint": {"configureFailPoint": "failCommand", "mode": "alwaysOn",
                          "data": {"failCommands": ["hello"], "errorLabels": ["x"]}}
        }))
        .unwrap_err();
        assert!(err.contains("errorLabels"), "{err}");
    }
}
