//! CMAP events as the unified format sees them: the format's event
//! names, each client's observed events, `expectedEvent` matching, and
//! `expectEvents`.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::driver::Driver;

use super::entities::{Client, TestRun};
use super::json::{array, first_key, obj, only, string};

/// The format's CMAP event names and the core's.
pub(super) const CMAP_EVENTS: &[(&str, &str)] = &[
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
pub(super) const UNPUBLISHED_EVENTS: &[&str] = &[
    "commandStartedEvent",
    "commandSucceededEvent",
    "commandFailedEvent",
    "serverDescriptionChangedEvent",
    "serverHeartbeatStartedEvent",
    "serverHeartbeatSucceededEvent",
    "serverHeartbeatFailedEvent",
    "topologyDescriptionChangedEvent",
];
/// The events one client saw, for `waitForEvent`.
#[derive(Default)]
pub(super) struct ClientEvents {
    list: Mutex<Vec<Value>>,
    pub(super) changed: Condvar,
}

impl ClientEvents {
    pub(super) fn lock(&self) -> MutexGuard<'_, Vec<Value>> {
        self.list.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
impl<P> Client<P> {
    /// Its observed events matching `expected` (an expectedEvent).
    pub(super) fn count(&self, expected: &Value) -> Result<usize, String> {
        self.count_in(&self.events.lock(), expected)
    }

    /// The events of `events` (its list, locked) that it observes and that
    /// match `expected`.
    pub(super) fn count_in(&self, events: &[Value], expected: &Value) -> Result<usize, String> {
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
impl<D: Driver> TestRun<'_, D> {
    pub(super) fn expect_events(&self, expect: Option<&Value>) -> Result<(), String> {
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
fn type_list(events: &[Value], key: &str) -> String {
    let names: Vec<&str> = events.iter().map(|e| e[key].as_str().unwrap_or("?")).collect();
    format!("[{}]", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
