//! The format's assertions, on what a run observed: the main thread's error
//! and the events, index by index after `ignore`. Independent of how the
//! run was driven.

use serde_json::Value;

use crate::format::TestFile;
use crate::matcher::matches;

/// What one run of a test observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// The error the main thread raised, as `{type, message, address?}`.
    pub main_error: Option<Value>,
    /// Every event, in order, as `observe::event_json` gives it.
    pub events: Vec<Value>,
}

/// Checks `observed` against the test's `error` and `events`.
pub fn verify(test: &TestFile, observed: &Observed) -> Result<(), String> {
    match (&test.error, &observed.main_error) {
        (Some(expected), Some(actual)) => {
            match_error(expected, actual).map_err(|e| format!("main thread error {actual}: {e}"))?
        }
        (Some(expected), None) => return Err(format!("expected error {expected}, but none was raised")),
        (None, Some(actual)) => return Err(format!("unexpected error on the main thread: {actual}")),
        (None, None) => {}
    }
    let seen: Vec<&Value> = observed
        .events
        .iter()
        .filter(|e| !test.ignore.iter().any(|ignored| e["type"] == ignored.as_str()))
        .collect();
    for (i, expected) in test.events.iter().enumerate() {
        let Some(actual) = seen.get(i) else {
            return Err(format!(
                "expected event {i} {expected}, but only {} events were seen: {}",
                seen.len(),
                type_list(&seen)
            ));
        };
        matches(expected, Some(actual)).map_err(|e| {
            format!(
                "event {i}: expected {expected}, got {actual} ({e}); seen: {}",
                type_list(&seen)
            )
        })?;
    }
    Ok(())
}

/// MATCH, except that the message compares case-insensitively: the files
/// spell the spec's messages in lower case.
fn match_error(expected: &Value, actual: &Value) -> Result<(), String> {
    let mut rest = expected.clone();
    if let (Some(fields), Some(Value::String(e))) = (rest.as_object_mut(), expected.get("message")) {
        if e != "42" {
            fields.remove("message");
            match &actual["message"] {
                Value::String(a) if a.to_lowercase() == e.to_lowercase() => {}
                a => return Err(format!("at /message: expected {e:?} (any case), found {a}")),
            }
        }
    }
    matches(&rest, Some(actual))
}

fn type_list(events: &[&Value]) -> String {
    let names: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap_or("?")).collect();
    format!("[{}]", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn test_file(v: Value) -> TestFile {
        TestFile::from_json(&v).unwrap()
    }

    #[test]
    fn error_type_and_message_case_insensitively() {
        let t = test_file(json!({"version": 1, "style": "unit", "operations": [],
            "error": {"type": "PoolClosedError", "message": "attempted to check out"}}));
        let mut seen = Observed {
            main_error: Some(json!({"type": "PoolClosedError", "message": "Attempted to CHECK out"})),
            events: vec![],
        };
        verify(&t, &seen).unwrap();
        seen.main_error = Some(json!({"type": "PoolClearedError", "message": "attempted to check out"}));
        assert!(verify(&t, &seen).unwrap_err().contains("/type"));
        seen.main_error = None;
        assert!(verify(&t, &seen).is_err());
        let no_error = test_file(json!({"version": 1, "style": "unit", "operations": []}));
        seen.main_error = Some(json!({"type": "X", "message": "m"}));
        assert!(verify(&no_error, &seen).unwrap_err().contains("unexpected error"));
    }

    #[test]
    fn events_by_index_after_ignore_with_extras_allowed() {
        let t = test_file(json!({"version": 1, "style": "unit", "operations": [],
            "events": [{"type": "B"}, {"type": "C", "connectionId": 2}], "ignore": ["A"]}));
        let events = |v: Value| Observed {
            main_error: None,
            events: v.as_array().unwrap().clone(),
        };
        verify(
            &t,
            &events(json!([{"type": "A"}, {"type": "B"}, {"type": "C", "connectionId": 2}, {"type": "D"}])),
        )
        .unwrap();
        let err = verify(
            &t,
            &events(json!([{"type": "B"}, {"type": "C", "connectionId": 1}])),
        )
        .unwrap_err();
        assert!(err.starts_with("event 1:"), "{err}");
        let err = verify(&t, &events(json!([{"type": "B"}]))).unwrap_err();
        assert!(err.contains("only 1 events"), "{err}");
    }
}
