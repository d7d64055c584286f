//! The format's MATCH function ("Spec Test Match Function"): `actual`
//! MATCHES `expected` when `expected` is a subset of it, the number `42` and
//! the string `"42"` standing for "any value that is present".

use serde_json::Value;

/// Checks that `actual` (absent: `None`) MATCHES `expected`. The error names
/// the path where they first differ, as `/key/0/key`.
pub fn matches(expected: &Value, actual: Option<&Value>) -> Result<(), String> {
    match_at(expected, actual, &mut String::new())
}

fn match_at(expected: &Value, actual: Option<&Value>, path: &mut String) -> Result<(), String> {
    let here = |path: &str| if path.is_empty() { "/" } else { path }.to_owned();
    let actual = match actual {
        None | Some(Value::Null) if is_placeholder(expected) => {
            return Err(format!("at {}: expected a value, found none", here(path)))
        }
        None => return Err(format!("at {}: expected {expected}, found none", here(path))),
        Some(actual) => actual,
    };
    if is_placeholder(expected) {
        return Ok(());
    }
    match (expected, actual) {
        (Value::Array(exp), Value::Array(act)) => {
            for (i, e) in exp.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                match_at(e, act.get(i), path)?;
                path.truncate(len);
            }
            Ok(())
        }
        (Value::Object(exp), Value::Object(act)) => {
            for (k, e) in exp {
                let len = path.len();
                path.push('/');
                path.push_str(k);
                match_at(e, act.get(k), path)?;
                path.truncate(len);
            }
            Ok(())
        }
        (Value::Number(e), Value::Number(a)) if numbers_equal(e, a) => Ok(()),
        (e, a) if !(e.is_number() && a.is_number()) && e == a => Ok(()),
        (e, a) => Err(format!("at {}: expected {e}, found {a}", here(path))),
    }
}

/// `42` or `"42"`: any present value.
fn is_placeholder(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_f64() == Some(42.0),
        Value::String(s) => s == "42",
        _ => false,
    }
}

/// Numbers compare by value: `1`, `1.0` and a `u64` 1 are equal.
pub fn numbers_equal(e: &serde_json::Number, a: &serde_json::Number) -> bool {
    let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    match (int(e), int(a)) {
        (Some(x), Some(y)) => x == y,
        _ => e.as_f64() == a.as_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(e: Value, a: Value) -> bool {
        matches(&e, Some(&a)).is_ok()
    }

    #[test]
    fn placeholder_42_accepts_any_present_value() {
        assert!(ok(json!(42), json!("localhost:27017")));
        assert!(ok(json!("42"), json!(7)));
        assert!(ok(json!({"options": 42}), json!({"options": {}})));
        assert!(ok(json!(42.0), json!(false)));
        assert!(matches(&json!(42), None).is_err());
        assert!(!ok(json!({"connectionId": 42}), json!({"type": "X"})));
        assert!(!ok(json!({"connectionId": "42"}), json!({"connectionId": null})));
    }

    #[test]
    fn objects_match_as_subsets() {
        let actual =
            json!({"type": "ConnectionClosed", "connectionId": 1, "reason": "stale", "address": "a"});
        assert!(ok(json!({"type": "ConnectionClosed"}), actual.clone()));
        assert!(ok(json!({"reason": "stale", "connectionId": 1}), actual.clone()));
        assert!(ok(json!({}), actual.clone()));
        let err = matches(&json!({"reason": "idle"}), Some(&actual)).unwrap_err();
        assert_eq!(err, r#"at /reason: expected "idle", found "stale""#);
        let err = matches(
            &json!({"options": {"maxPoolSize": 5}}),
            Some(&json!({"options": {}})),
        )
        .unwrap_err();
        assert_eq!(err, "at /options/maxPoolSize: expected 5, found none");
    }

    #[test]
    fn arrays_match_by_index() {
        assert!(ok(json!([1, {"a": 2}]), json!([1, {"a": 2, "b": 3}, 4])));
        assert!(ok(json!([]), json!([1])));
        assert!(!ok(json!([1, 2]), json!([1])));
        assert!(!ok(json!([2, 1]), json!([1, 2])));
        let err = matches(&json!([1, {"a": 2}]), Some(&json!([1, {"a": 3}]))).unwrap_err();
        assert_eq!(err, "at /1/a: expected 2, found 3");
    }

    #[test]
    fn types_must_agree() {
        assert!(!ok(json!("1"), json!(1)));
        assert!(!ok(json!(1), json!("1")));
        assert!(!ok(json!(true), json!(1)));
        assert!(!ok(json!({}), json!([])));
        assert!(!ok(json!([]), json!({})));
        assert!(!ok(json!(null), json!(0)));
        assert!(ok(json!(null), json!(null)));
    }

    #[test]
    fn numbers_compare_numerically() {
        assert!(ok(json!(1), json!(1.0)));
        assert!(ok(json!(0), json!(0.0)));
        assert!(ok(json!(u64::MAX), json!(u64::MAX)));
        assert!(!ok(json!(-1), json!(u64::MAX)));
        assert!(!ok(json!(1.5), json!(1)));
    }
}
