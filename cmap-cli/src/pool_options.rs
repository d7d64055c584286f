//! A test's `poolOptions` turned into the core's [`PoolOptions`].
//!
//! The spec options go through the core's own by-name setter, the list a
//! connection string goes through too, so the runner checks the same names,
//! parsing and validation.

use std::time::Duration;

use cmap_core::PoolOptions;
use serde_json::Value;

/// Builds the pool options of a test. An option the runner does not know is
/// an error, not silently dropped: the test would run with other options
/// than it asks for.
pub fn build(entries: &[(String, Value)]) -> Result<PoolOptions, String> {
    let mut builder = PoolOptions::builder();
    for (name, value) in entries {
        match name.as_str() {
            // Spec (test format): negative never runs, positive is the pause
            // between runs, 0 is not allowed.
            "backgroundThreadIntervalMS" => {
                let interval = match value.as_i64() {
                    Some(ms) if ms < 0 => None,
                    Some(ms) if ms > 0 => Some(Duration::from_millis(ms.unsigned_abs())),
                    _ => return Err(format!("poolOptions: invalid backgroundThreadIntervalMS {value}")),
                };
                builder = builder.maintenance_interval(interval);
            }
            // Only aims the failPoint at this client (see `endpoint.rs`).
            "appName" => {}
            // Every pool option, through the list a connection string uses.
            other => {
                let known = builder
                    .set(other, &value.to_string())
                    .map_err(|e| format!("poolOptions: {e}"))?;
                if !known {
                    return Err(format!("poolOptions: unsupported option {other:?}"));
                }
            }
        }
    }
    builder.build().map_err(|e| format!("poolOptions: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entries(v: Value) -> Vec<(String, Value)> {
        v.as_object().unwrap().clone().into_iter().collect()
    }

    #[test]
    fn spec_options_are_explicit_and_background_interval_maps() {
        let o = build(&entries(json!({
            "maxPoolSize": 3, "waitQueueTimeoutMS": 50, "backgroundThreadIntervalMS": -1, "appName": "a"
        })))
        .unwrap();
        assert_eq!(o.max_pool_size(), 3);
        assert_eq!(o.wait_queue_timeout(), Some(Duration::from_millis(50)));
        assert_eq!(o.maintenance_interval(), None);
        assert_eq!(o.explicit_options().len(), 2);
        let o = build(&entries(json!({"backgroundThreadIntervalMS": 50}))).unwrap();
        assert_eq!(o.maintenance_interval(), Some(Duration::from_millis(50)));
    }

    #[test]
    fn unknown_and_invalid_options_fail() {
        assert!(build(&entries(json!({"maxPoolSise": 1})))
            .unwrap_err()
            .contains("maxPoolSise"));
        assert!(build(&entries(json!({"maxPoolSize": -1}))).is_err());
        assert!(build(&entries(json!({"backgroundThreadIntervalMS": 0}))).is_err());
    }
}
