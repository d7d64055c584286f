//! `runOnRequirements`: whether the simulated deployment (one server,
//! any version, authentication on, not serverless, no CSFLE) meets a
//! file's or a test's requirements.

use serde_json::Value;

use super::json::obj;

/// Whether the simulated deployment meets one of `requirements` (absent:
/// no requirement).
pub(super) fn requirements(requirements: Option<&Value>) -> Result<(), String> {
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
}
