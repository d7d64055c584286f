//! Log messages as the unified format sees them: the logging spec's
//! levels, which captured records a client collects, `expectedLogMessage`
//! matching, and `expectLogMessages`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::driver::Driver;
use crate::log_capture::LogRecord;
use crate::unified_matcher::matches_root;

use super::entities::TestRun;
use super::json::{array, obj, only, string};

impl<D: Driver> TestRun<'_, D> {
    pub(super) fn expect_log_messages(&self, expect: Option<&Value>) -> Result<(), String> {
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
}

/// The logging spec's severity of a level name (lower is more severe).
pub(super) fn severity(level: &str) -> Option<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
