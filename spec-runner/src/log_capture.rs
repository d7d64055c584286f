//! Captures the pool's log messages: the `tracing` records of target
//! [`cmap_async::LOG_TARGET`] (`cmap::connection`), at every level, as
//! JSON, by client.
//!
//! The pool logs on whichever thread performs an input (a runtime worker,
//! a test's thread), so a per-thread subscriber would miss messages: one
//! subscriber is installed as the process's global default, once. It keeps
//! only the records of pools a test registered: each client of a logging
//! test gets its own port ([`next_port`]), and a record belongs to the
//! sink registered for its `serverPort` field. Nothing else in the process
//! logs through `tracing`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Level, Metadata, Subscriber};

/// One captured message.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    /// Its `tracing` level.
    pub level: Level,
    /// Its fields, `message` included, as JSON: integers as numbers (the
    /// pool logs them as `u64`), `durationMS` as a float, the rest as
    /// strings.
    pub data: Map<String, Value>,
}

impl LogRecord {
    /// The logging spec's name of its level (`debug`, `informational`...).
    pub fn level_name(&self) -> &'static str {
        match self.level {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "informational",
            Level::DEBUG => "debug",
            _ => "trace",
        }
    }
}

#[derive(Default)]
struct Sinks {
    by_port: Mutex<BTreeMap<u64, Vec<LogRecord>>>,
}

impl Sinks {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Vec<LogRecord>>> {
        self.by_port.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

static CAPTURE: OnceLock<Result<Arc<Sinks>, String>> = OnceLock::new();
static NEXT_PORT: AtomicU64 = AtomicU64::new(0);

/// A port no other client of this process uses now (27017 and up).
pub fn next_port() -> u16 {
    let n = NEXT_PORT.fetch_add(1, Ordering::Relaxed) % 30_000;
    27_017 + u16::try_from(n).expect("below 30000")
}

/// The messages logged by the pool whose address has `port`, from now
/// until it is dropped.
pub struct LogSink {
    sinks: Arc<Sinks>,
    port: u64,
}

impl LogSink {
    /// Starts capturing the records of `port`, installing the global
    /// subscriber on first use.
    ///
    /// # Errors
    ///
    /// Another global `tracing` subscriber was installed first.
    pub fn register(port: u16) -> Result<LogSink, String> {
        let sinks = CAPTURE
            .get_or_init(|| {
                let sinks = Arc::new(Sinks::default());
                tracing::subscriber::set_global_default(Capture(sinks.clone()))
                    .map(|()| sinks)
                    .map_err(|e| format!("cannot install the log capture as the global subscriber: {e}"))
            })
            .clone()?;
        let port = u64::from(port);
        sinks.lock().insert(port, Vec::new());
        Ok(LogSink { sinks, port })
    }

    /// The records so far, in the order they were logged.
    pub fn records(&self) -> Vec<LogRecord> {
        self.sinks.lock().get(&self.port).cloned().unwrap_or_default()
    }
}

impl Drop for LogSink {
    fn drop(&mut self) {
        self.sinks.lock().remove(&self.port);
    }
}

impl fmt::Debug for LogSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogSink").field("port", &self.port).finish()
    }
}

/// The subscriber: keeps the pool's records, by `serverPort`.
struct Capture(Arc<Sinks>);

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let value = serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number);
        self.0.insert(field.name().into(), value);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `message` and `display(..)` fields print as their text.
        self.0.insert(field.name().into(), format!("{value:?}").into());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == cmap_async::LOG_TARGET
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut data = Map::new();
        event.record(&mut Fields(&mut data));
        let Some(port) = data.get("serverPort").and_then(Value::as_u64) else {
            return;
        };
        if let Some(records) = self.0.lock().get_mut(&port) {
            records.push(LogRecord {
                level: *event.metadata().level(),
                data,
            });
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
