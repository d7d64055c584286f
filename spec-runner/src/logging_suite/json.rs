//! Reading the test file's JSON: typed access to its objects, with the
//! runner's messages for what is missing, malformed or not supported.

use serde_json::{Map, Value};

pub(super) fn first_key(value: &Value) -> Option<&str> {
    value.as_object()?.keys().next().map(String::as_str)
}

pub(super) fn obj<'v>(value: &'v Value, what: &str) -> Result<&'v Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("{what} must be an object, not {value}"))
}

pub(super) fn only(map: &Map<String, Value>, known: &[&str], what: &str) -> Result<(), String> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(format!("{key:?} in {what} is not supported by this runner")),
        None => Ok(()),
    }
}

pub(super) fn string<'v>(map: &'v Map<String, Value>, key: &str, what: &str) -> Result<&'v str, String> {
    map.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what} needs {key} (a string)"))
}

pub(super) fn array<'v>(
    map: &'v Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<Option<&'v Vec<Value>>, String> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Array(list)) => Ok(Some(list)),
        Some(other) => Err(format!("{key} in {what} must be an array, not {other}")),
    }
}
