//! The client metadata document of the handshake (the handshake
//! specification's `client`): the application, the driver, the OS, the
//! platform and the environment, kept within the server's 512 bytes.

use bson::{doc, Document};

/// The whole `client` document's limit, BSON overhead included.
pub(crate) const MAX_METADATA_SIZE: usize = 512;

/// This driver's name in `client.driver.name`.
const DRIVER_NAME: &str = "cmap-mongodb";

/// `client.application.name`'s limit.
pub const MAX_APP_NAME_SIZE: usize = 128;

/// A library that wraps this one, appended to the driver's name, version
/// and platform in the handshake (the handshake specification's
/// `DriverInfoOptions`): `cmap-mongodb|mylib`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DriverInfo {
    /// The wrapping library's name.
    pub name: String,
    /// Its version.
    pub version: Option<String>,
    /// Its platform details.
    pub platform: Option<String>,
}

/// Builds the metadata document: `app_name` (already checked against
/// [`MAX_APP_NAME_SIZE`]), the wrapping libraries in order, the runtime's
/// name for the platform, and `env` read through `var` (the process's
/// environment outside tests).
pub(crate) fn client_metadata(
    app_name: Option<&str>,
    wrappers: &[DriverInfo],
    runtime: &str,
    var: &dyn Fn(&str) -> Option<String>,
    dockerenv: bool,
) -> Document {
    let mut driver_name = DRIVER_NAME.to_owned();
    let mut driver_version = env!("CARGO_PKG_VERSION").to_owned();
    let mut platform = format!("Rust, {runtime}");
    for wrapper in wrappers.iter().filter(|w| !w.name.is_empty()) {
        driver_name = format!("{driver_name}|{}", wrapper.name);
        driver_version = format!("{driver_version}|{}", wrapper.version.as_deref().unwrap_or(""));
        platform = format!("{platform}|{}", wrapper.platform.as_deref().unwrap_or(""));
    }
    let mut client = Document::new();
    if let Some(name) = app_name {
        client.insert("application", doc! { "name": name });
    }
    client.insert("driver", doc! { "name": driver_name, "version": driver_version });
    client.insert(
        "os",
        doc! {
            "type": os_type(std::env::consts::OS),
            "architecture": std::env::consts::ARCH,
        },
    );
    client.insert("platform", platform);
    let env = environment(var, dockerenv);
    if !env.is_empty() {
        client.insert("env", env);
    }
    fit(client)
}

/// `uname -s` as the specification spells it.
fn os_type(os: &str) -> &str {
    match os {
        "linux" => "Linux",
        "macos" | "ios" => "Darwin",
        "windows" => "Windows",
        "freebsd" | "netbsd" | "openbsd" | "dragonfly" => "BSD",
        "" => "unknown",
        other => other,
    }
}

/// `client.env`: the FaaS platform and the container, each only where
/// its variables say so (the handshake specification's `client.env`).
fn environment(var: &dyn Fn(&str) -> Option<String>, dockerenv: bool) -> Document {
    let set = |name: &str| var(name).is_some_and(|v| !v.is_empty());
    let aws = var("AWS_EXECUTION_ENV").is_some_and(|v| v.starts_with("AWS_Lambda_"))
        || set("AWS_LAMBDA_RUNTIME_API");
    let azure = set("FUNCTIONS_WORKER_RUNTIME");
    let gcp = set("K_SERVICE") || set("FUNCTION_NAME");
    let vercel = set("VERCEL");
    // Vercel runs on AWS Lambda and wins over it; any other pair is
    // ambiguous, and then no FaaS field is sent.
    let name = match (aws, azure, gcp, vercel) {
        (_, false, false, true) => Some("vercel"),
        (true, false, false, false) => Some("aws.lambda"),
        (false, true, false, false) => Some("azure.func"),
        (false, false, true, false) => Some("gcp.func"),
        _ => None,
    };
    let int = |name: &str| var(name).and_then(|v| v.parse::<i32>().ok());
    let mut env = Document::new();
    if let Some(name) = name {
        env.insert("name", name);
        let (region, memory, timeout) = match name {
            "aws.lambda" => (var("AWS_REGION"), int("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), None),
            "gcp.func" => (
                var("FUNCTION_REGION"),
                int("FUNCTION_MEMORY_MB"),
                int("FUNCTION_TIMEOUT_SEC"),
            ),
            "vercel" => (var("VERCEL_REGION"), None, None),
            _ => (None, None, None),
        };
        if let Some(timeout) = timeout {
            env.insert("timeout_sec", timeout);
        }
        if let Some(memory) = memory {
            env.insert("memory_mb", memory);
        }
        if let Some(region) = region {
            env.insert("region", region);
        }
    }
    let mut container = Document::new();
    if dockerenv {
        container.insert("runtime", "docker");
    }
    if set("KUBERNETES_SERVICE_HOST") {
        container.insert("orchestrator", "kubernetes");
    }
    if !container.is_empty() {
        env.insert("container", container);
    }
    env
}

fn size(doc: &Document) -> usize {
    doc.to_vec().map_or(usize::MAX, |bytes| bytes.len())
}

/// Removes every field of `doc` but `key`.
fn keep_only(doc: &mut Document, key: &str) {
    let others: Vec<String> = doc.keys().filter(|k| *k != key).cloned().collect();
    for other in others {
        doc.remove(&other);
    }
}

/// Shrinks the document in the specification's order until it fits:
/// `env` down to its name, `os` down to its type, no `env`, then a
/// shorter `platform`. Wrappers' names and versions can still be too long
/// on their own (the limit is a MUST, the order a SHOULD): then the
/// wrappers' parts of `driver.version`, then of `driver.name`, are cut,
/// never this driver's own. (An `application.name` is at most 128 bytes:
/// with it, this driver's own fields fit.)
fn fit(mut client: Document) -> Document {
    if size(&client) <= MAX_METADATA_SIZE {
        return client;
    }
    if let Ok(env) = client.get_document_mut("env") {
        keep_only(env, "name");
        if env.is_empty() {
            client.remove("env");
        }
    }
    if size(&client) <= MAX_METADATA_SIZE {
        return client;
    }
    if let Ok(os) = client.get_document_mut("os") {
        keep_only(os, "type");
    }
    if size(&client) <= MAX_METADATA_SIZE {
        return client;
    }
    client.remove("env");
    let cuts = [
        (None, "platform", 0),
        (Some("driver"), "version", env!("CARGO_PKG_VERSION").len()),
        (Some("driver"), "name", DRIVER_NAME.len()),
    ];
    for (parent, field, floor) in cuts {
        let over = size(&client).saturating_sub(MAX_METADATA_SIZE);
        let doc = match parent {
            None => Some(&mut client),
            Some(parent) => client.get_document_mut(parent).ok(),
        };
        if let (true, Some(doc)) = (over > 0, doc) {
            shorten(doc, field, over, floor);
        }
    }
    client
}

/// Cuts `over` bytes off the end of `doc`'s string `key`, on a character
/// boundary, keeping at least its first `floor` bytes.
fn shorten(doc: &mut Document, key: &str, over: usize, floor: usize) {
    let Ok(value) = doc.get_str(key) else { return };
    let mut keep = value.len().saturating_sub(over).max(floor.min(value.len()));
    while !value.is_char_boundary(keep) {
        keep -= 1;
    }
    let shorter = value[..keep].to_owned();
    doc.insert(key, shorter);
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn the_required_fields_are_there_and_no_env_without_variables() {
        let client = client_metadata(Some("shop"), &[], "tokio", &vars(&[]), false);
        assert_eq!(
            client.get_document("application").unwrap(),
            &doc! { "name": "shop" }
        );
        let driver = client.get_document("driver").unwrap();
        assert_eq!(driver.get_str("name").ok(), Some("cmap-mongodb"));
        assert_eq!(driver.get_str("version").ok(), Some(env!("CARGO_PKG_VERSION")));
        assert!(client.get_document("os").unwrap().get_str("type").is_ok());
        assert_eq!(client.get_str("platform").ok(), Some("Rust, tokio"));
        assert!(!client.contains_key("env"));
        assert!(!client_metadata(None, &[], "tokio", &vars(&[]), false).contains_key("application"));
    }

    #[test]
    fn wrapping_libraries_are_appended() {
        let wrappers = [
            DriverInfo {
                name: "odm".into(),
                version: Some("2.0".into()),
                platform: None,
            },
            DriverInfo::default(),
        ];
        let client = client_metadata(None, &wrappers, "tokio", &vars(&[]), false);
        let driver = client.get_document("driver").unwrap();
        assert_eq!(driver.get_str("name").ok(), Some("cmap-mongodb|odm"));
        assert_eq!(
            driver.get_str("version").ok(),
            Some(concat!(env!("CARGO_PKG_VERSION"), "|2.0"))
        );
        assert_eq!(client.get_str("platform").ok(), Some("Rust, tokio|"));
    }

    #[test]
    fn faas_and_container_fields_follow_their_variables() {
        let env = |pairs: &[(&str, &str)], docker| {
            client_metadata(None, &[], "tokio", &vars(pairs), docker)
                .get_document("env")
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(
            env(
                &[
                    ("AWS_EXECUTION_ENV", "AWS_Lambda_java8"),
                    ("AWS_REGION", "us-east-2"),
                    ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
                ],
                false
            ),
            doc! { "name": "aws.lambda", "memory_mb": 1024, "region": "us-east-2" }
        );
        // A value of the wrong type is left out, without an error.
        assert_eq!(
            env(
                &[
                    ("AWS_LAMBDA_RUNTIME_API", "x"),
                    ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "big")
                ],
                false
            ),
            doc! { "name": "aws.lambda" }
        );
        assert_eq!(
            env(
                &[
                    ("VERCEL", "1"),
                    ("AWS_LAMBDA_RUNTIME_API", "x"),
                    ("VERCEL_REGION", "cdg1")
                ],
                false
            ),
            doc! { "name": "vercel", "region": "cdg1" }
        );
        assert_eq!(
            env(&[("FUNCTIONS_WORKER_RUNTIME", "node"), ("K_SERVICE", "s")], false),
            doc! {}
        );
        assert_eq!(
            env(
                &[
                    ("K_SERVICE", "s"),
                    ("FUNCTION_TIMEOUT_SEC", "60"),
                    ("KUBERNETES_SERVICE_HOST", "k")
                ],
                true
            ),
            doc! { "name": "gcp.func", "timeout_sec": 60, "container": { "runtime": "docker", "orchestrator": "kubernetes" } }
        );
    }

    #[test]
    fn the_os_type_is_what_uname_s_says_or_unknown() {
        assert_eq!(os_type("linux"), "Linux");
        assert_eq!(os_type("macos"), "Darwin");
        assert_eq!(os_type("ios"), "Darwin");
        assert_eq!(os_type("windows"), "Windows");
        assert_eq!(os_type("freebsd"), "BSD");
        assert_eq!(os_type("openbsd"), "BSD");
        assert_eq!(os_type(""), "unknown");
        assert_eq!(os_type("solaris"), "solaris");
        let client = client_metadata(None, &[], "tokio", &vars(&[]), false);
        assert_eq!(
            client.get_document("os").unwrap().get_str("type").ok(),
            Some(os_type(std::env::consts::OS))
        );
    }

    #[test]
    fn azure_functions_alone_are_named() {
        let client = client_metadata(
            None,
            &[],
            "tokio",
            &vars(&[("FUNCTIONS_WORKER_RUNTIME", "node")]),
            false,
        );
        assert_eq!(
            client.get_document("env").unwrap(),
            &doc! { "name": "azure.func" }
        );
    }

    #[test]
    fn a_platform_is_cut_on_a_character_boundary_and_no_shorter_than_needed() {
        // Three-byte characters: whatever the cut, one of these lands
        // inside a character and must go back to its start.
        for prefix in ["", "a", "ab"] {
            let wrappers = [DriverInfo {
                name: "w".into(),
                version: None,
                platform: Some(format!("{prefix}{}", "€".repeat(300))),
            }];
            let client = client_metadata(None, &wrappers, "tokio", &vars(&[]), false);
            let platform = client.get_str("platform").unwrap();
            assert!(platform.ends_with('€'), "{prefix:?}");
            assert!(
                size(&client) <= MAX_METADATA_SIZE,
                "{prefix:?}: {}",
                size(&client)
            );
            assert!(
                size(&client) > MAX_METADATA_SIZE - 3,
                "{prefix:?}: {}",
                size(&client)
            );
        }
    }

    #[test]
    fn an_oversized_document_is_cut_in_the_specifications_order() {
        let long = "x".repeat(400);
        let aws = [("AWS_LAMBDA_RUNTIME_API", "x"), ("AWS_REGION", long.as_str())];
        // env's other fields go first.
        let client = client_metadata(None, &[], "tokio", &vars(&aws), false);
        assert_eq!(
            client.get_document("env").unwrap(),
            &doc! { "name": "aws.lambda" }
        );
        assert!(client.get_document("os").unwrap().contains_key("architecture"));
        // Then the platform is cut (a long wrapper), after os and env.
        let wrappers = [DriverInfo {
            name: "w".into(),
            version: None,
            platform: Some(long.clone() + &long),
        }];
        let client = client_metadata(Some("app"), &wrappers, "tokio", &vars(&aws), false);
        assert!(size(&client) <= MAX_METADATA_SIZE, "{}", size(&client));
        assert!(size(&client) >= MAX_METADATA_SIZE - 4, "cut no more than needed");
        assert!(!client.contains_key("env"));
        assert_eq!(client.get_document("os").unwrap().len(), 1);
        assert!(client.get_str("platform").unwrap().starts_with("Rust, tokio|xxx"));
    }

    /// Wrappers whose names and versions alone pass the limit: the
    /// document still fits, with this driver's own name and version kept.
    #[test]
    fn oversized_wrapper_names_and_versions_are_cut_to_fit() {
        let long = "n".repeat(300);
        let wrappers = [DriverInfo {
            name: long.clone(),
            version: Some("v".repeat(300)),
            platform: Some(long),
        }];
        let app = "a".repeat(MAX_APP_NAME_SIZE);
        let client = client_metadata(Some(&app), &wrappers, "tokio", &|_| None, false);
        assert!(size(&client) <= MAX_METADATA_SIZE, "{}", size(&client));
        assert!(size(&client) >= MAX_METADATA_SIZE - 4, "cut no more than needed");
        let driver = client.get_document("driver").unwrap();
        assert!(
            driver.get_str("name").unwrap().starts_with("cmap-mongodb|nnn"),
            "{driver}"
        );
        assert_eq!(
            driver.get_str("version").unwrap(),
            env!("CARGO_PKG_VERSION"),
            "{driver}"
        );
        assert_eq!(client.get_str("platform").unwrap(), "");
        assert_eq!(
            client
                .get_document("application")
                .unwrap()
                .get_str("name")
                .unwrap(),
            app
        );
    }
}
