//! The unified test format's "Evaluating Matches", for values that are
//! JSON (what the log capture and the event callback give).
//!
//! - A root-level document may hold keys the expected one does not; a
//!   nested document may not. Arrays have the same length, element by
//!   element.
//! - Numbers compare by value (`1` matches `1.0`); other scalars by type
//!   and value.
//! - Operators: `$$exists`, `$$type`, `$$unsetOrMatches`, `$$lte`,
//!   `$$matchAsDocument`, `$$matchAsRoot`. The others (`$$matchesEntity`,
//!   `$$matchesHexBytes`, `$$sessionLsid`) need entities this runner does
//!   not have: they are errors, never a silent pass.
//! - `$$type` on JSON: `double` is a float, `string`, `object`, `array`,
//!   `bool`, `null` as named, `number` any number. `tracing` records every
//!   integer as 64 bits, so an integer is a `long`, and also an `int` when
//!   it fits in 32 bits. BSON-only types (`objectId`, `date`...) match
//!   nothing.

use serde_json::{Map, Value};

use crate::matcher::numbers_equal;

/// Checks that `actual` matches `expected` as a root-level document.
pub fn matches_root(expected: &Value, actual: &Value) -> Result<(), String> {
    match_at(expected, Some(actual), true, &mut String::new())
}

/// Checks that `actual` matches `expected` as a nested value.
pub fn matches(expected: &Value, actual: Option<&Value>) -> Result<(), String> {
    match_at(expected, actual, false, &mut String::new())
}

fn here(path: &str) -> &str {
    if path.is_empty() {
        "/"
    } else {
        path
    }
}

/// The operator of `{ "$$name": argument }`, if `value` is one.
fn operator(value: &Value) -> Option<(&str, &Value)> {
    let map = value.as_object()?;
    match map.iter().next() {
        Some((key, arg)) if map.len() == 1 && key.starts_with("$$") => Some((key.as_str(), arg)),
        _ => None,
    }
}

fn match_at(expected: &Value, actual: Option<&Value>, root: bool, path: &mut String) -> Result<(), String> {
    if let Some((op, arg)) = operator(expected) {
        return apply(op, arg, actual, path);
    }
    let Some(actual) = actual else {
        return Err(format!("at {}: expected {expected}, found none", here(path)));
    };
    match (expected, actual) {
        (Value::Object(exp), Value::Object(act)) => match_document(exp, act, root, path),
        (Value::Array(exp), Value::Array(act)) => {
            if exp.len() != act.len() {
                return Err(format!(
                    "at {}: expected {} elements, found {}",
                    here(path),
                    exp.len(),
                    act.len()
                ));
            }
            for (i, (e, a)) in exp.iter().zip(act).enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                match_at(e, Some(a), false, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        (Value::Number(e), Value::Number(a)) if numbers_equal(e, a) => Ok(()),
        (e, a) if !(e.is_number() && a.is_number()) && e == a => Ok(()),
        (e, a) => Err(format!("at {}: expected {e}, found {a}", here(path))),
    }
}

fn match_document(
    expected: &Map<String, Value>,
    actual: &Map<String, Value>,
    root: bool,
    path: &mut String,
) -> Result<(), String> {
    for (key, value) in expected {
        let len = path.len();
        path.push('/');
        path.push_str(key);
        match_at(value, actual.get(key), false, path)?;
        path.truncate(len);
    }
    if !root {
        if let Some(extra) = actual.keys().find(|k| !expected.contains_key(*k)) {
            return Err(format!(
                "at {}: unexpected key {extra:?} in a nested document",
                here(path)
            ));
        }
    }
    Ok(())
}

fn apply(op: &str, arg: &Value, actual: Option<&Value>, path: &mut String) -> Result<(), String> {
    let at = here(path).to_owned();
    match op {
        "$$exists" => match (arg.as_bool(), actual) {
            (Some(true), Some(_)) | (Some(false), None) => Ok(()),
            (Some(true), None) => Err(format!("at {at}: expected a value, found none")),
            (Some(false), Some(a)) => Err(format!("at {at}: expected no value, found {a}")),
            (None, _) => Err(format!("at {at}: $$exists takes a boolean, not {arg}")),
        },
        "$$type" => {
            let Some(actual) = actual else {
                return Err(format!("at {at}: expected a value of type {arg}, found none"));
            };
            let types: Vec<&str> = match arg {
                Value::String(t) => vec![t.as_str()],
                Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
                _ => return Err(format!("at {at}: $$type takes a string or strings, not {arg}")),
            };
            match types.iter().any(|t| has_type(actual, t)) {
                true => Ok(()),
                false => Err(format!("at {at}: expected type {arg}, found {actual}")),
            }
        }
        "$$unsetOrMatches" => match actual {
            None => Ok(()),
            Some(actual) => match_at(arg, Some(actual), false, path),
        },
        "$$lte" => match (arg, actual) {
            (Value::Number(limit), Some(Value::Number(a))) => match (a.as_f64(), limit.as_f64()) {
                (Some(x), Some(y)) if x <= y => Ok(()),
                _ => Err(format!("at {at}: expected at most {limit}, found {a}")),
            },
            _ => Err(format!("at {at}: $$lte {arg} against {actual:?}")),
        },
        "$$matchAsDocument" => match actual {
            Some(Value::String(text)) => {
                let parsed: Value = serde_json::from_str(text)
                    .map_err(|e| format!("at {at}: not a JSON document ({e}): {text}"))?;
                match_at(arg, Some(&parsed), false, path)
            }
            other => Err(format!(
                "at {at}: $$matchAsDocument needs a string, found {other:?}"
            )),
        },
        "$$matchAsRoot" => match_at(arg, actual, true, path),
        other => Err(format!(
            "at {at}: the operator {other} is not supported by this runner"
        )),
    }
}

fn has_type(value: &Value, name: &str) -> bool {
    match (name, value) {
        ("double", Value::Number(n)) => n.is_f64(),
        ("int", Value::Number(n)) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        ("long", Value::Number(n)) => n.as_i64().is_some(),
        ("number", Value::Number(_)) => true,
        ("string", Value::String(_)) => true,
        ("object", Value::Object(_)) => true,
        ("array", Value::Array(_)) => true,
        ("bool", Value::Bool(_)) => true,
        ("null", Value::Null) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn root(e: Value, a: Value) -> Result<(), String> {
        matches_root(&e, &a)
    }

    #[test]
    fn root_documents_allow_extra_keys_nested_ones_do_not() {
        assert!(root(json!({"x": 1}), json!({"x": 1, "y": 2})).is_ok());
        assert!(root(json!({"x": 1, "y": 1}), json!({"x": 1})).is_err());
        let err = root(json!({"x": {"y": 1}}), json!({"x": {"y": 1, "z": 1}})).unwrap_err();
        assert!(err.contains("\"z\""), "{err}");
        assert!(root(json!({"x": [1, 2]}), json!({"x": [1, 2, 3]})).is_err());
        assert!(root(json!({"x": 1}), json!({"x": 1.0})).is_ok());
        assert!(root(json!({"x": 1}), json!({"x": "1"})).is_err());
    }

    #[test]
    fn type_checks_follow_tracing_values() {
        let log =
            json!({"serverHost": "h", "serverPort": 27017u64, "durationMS": 1.5, "id": 5_000_000_000u64});
        assert!(root(json!({"serverHost": {"$$type": "string"}}), log.clone()).is_ok());
        assert!(root(json!({"serverPort": {"$$type": ["int", "long"]}}), log.clone()).is_ok());
        assert!(root(json!({"serverPort": {"$$type": "int"}}), log.clone()).is_ok());
        assert!(root(json!({"id": {"$$type": "int"}}), log.clone()).is_err());
        assert!(root(json!({"id": {"$$type": "long"}}), log.clone()).is_ok());
        assert!(root(
            json!({"durationMS": {"$$type": ["double", "int", "long"]}}),
            log.clone()
        )
        .is_ok());
        assert!(root(json!({"durationMS": {"$$type": "int"}}), log.clone()).is_err());
        assert!(root(json!({"serverHost": {"$$type": "int"}}), log.clone()).is_err());
        assert!(root(json!({"missing": {"$$type": "string"}}), log).is_err());
    }

    #[test]
    fn exists_unset_or_matches_and_lte() {
        let a = json!({"error": "boom", "n": 3});
        assert!(root(json!({"error": {"$$exists": true}}), a.clone()).is_ok());
        assert!(root(json!({"other": {"$$exists": false}}), a.clone()).is_ok());
        assert!(root(json!({"error": {"$$exists": false}}), a.clone()).is_err());
        assert!(root(json!({"other": {"$$exists": true}}), a.clone()).is_err());
        assert!(root(json!({"other": {"$$unsetOrMatches": 1}}), a.clone()).is_ok());
        assert!(root(json!({"n": {"$$unsetOrMatches": 4}}), a.clone()).is_err());
        assert!(root(json!({"n": {"$$lte": 3}}), a.clone()).is_ok());
        assert!(root(json!({"n": {"$$lte": 2.5}}), a.clone()).is_err());
        let err = root(json!({"n": {"$$sessionLsid": "s"}}), a).unwrap_err();
        assert!(err.contains("not supported"), "{err}");
    }

    #[test]
    fn match_as_document_parses_a_string() {
        let a = json!({"command": "{\"ping\": 1, \"lsid\": 2}"});
        assert!(root(
            json!({"command": {"$$matchAsDocument": {"ping": 1, "lsid": 2}}}),
            a.clone()
        )
        .is_ok());
        assert!(root(json!({"command": {"$$matchAsDocument": {"ping": 1}}}), a.clone()).is_err());
        let as_root = json!({"command": {"$$matchAsDocument": {"$$matchAsRoot": {"ping": 1}}}});
        assert!(root(as_root, a).is_ok());
    }
}
