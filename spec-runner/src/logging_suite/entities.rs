//! A test's entities: `client` entities (one pool each, built from the
//! client's `uriOptions`, `observeEvents` and `observeLogMessages`) and
//! `database` entities, the run that holds them, and their closing at the
//! end of a test.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use cmap_async::{Address, PoolOptions};
use serde_json::{Map, Value};

use crate::adapter::SharedEndpoint;
use crate::driver::{Driver, DriverPool, PoolSpec};
use crate::log_capture::{next_port, LogSink};
use crate::observe::event_json;

use super::events::{ClientEvents, CMAP_EVENTS, UNPUBLISHED_EVENTS};
use super::json::{array, obj, only, string};
use super::log_messages::severity;
use super::IGNORED_URI_OPTIONS;

pub(super) struct Client<P> {
    pub(super) pool: P,
    pub(super) events: Arc<ClientEvents>,
    /// The core's names of the CMAP events it observes.
    pub(super) observed: BTreeSet<&'static str>,
    /// Per log component, the least severe level it collects.
    pub(super) observe_logs: Option<BTreeMap<String, u8>>,
    pub(super) logs: LogSink,
    /// It ran a command: its close ends the implicit session.
    pub(super) sessions_used: bool,
}

pub(super) struct TestRun<'a, D: Driver + 'a> {
    pub(super) driver: &'a D,
    pub(super) endpoint: SharedEndpoint,
    pub(super) clients: BTreeMap<String, Client<D::Pool<'a>>>,
    /// Database entities and their clients.
    pub(super) databases: BTreeMap<String, String>,
}

impl<'a, D: Driver> TestRun<'a, D> {
    pub(super) fn create_entities(&mut self, entities: &[Value]) -> Result<(), String> {
        for entity in entities {
            let e = obj(entity, "an entity")?;
            let (kind, spec) = match e.iter().next() {
                Some((kind, spec)) if e.len() == 1 => (kind.as_str(), obj(spec, "an entity")?),
                _ => return Err(format!("an entity has exactly one key: {entity}")),
            };
            let id = string(spec, "id", kind)?;
            if self.clients.contains_key(id) || self.databases.contains_key(id) {
                return Err(format!("entity {id} already exists"));
            }
            match kind {
                "client" => self.create_client(id, spec)?,
                "database" => {
                    only(
                        spec,
                        &["id", "client", "databaseName", "databaseOptions"],
                        "database",
                    )?;
                    let client = string(spec, "client", "database")?;
                    if !self.clients.contains_key(client) {
                        return Err(format!("database {id}: no client {client}"));
                    }
                    string(spec, "databaseName", "database")?;
                    self.databases.insert(id.to_owned(), client.to_owned());
                }
                other => return Err(format!("{other} entities are not supported by this runner")),
            }
        }
        Ok(())
    }

    fn create_client(&mut self, id: &str, spec: &Map<String, Value>) -> Result<(), String> {
        only(
            spec,
            &[
                "id",
                "uriOptions",
                "observeEvents",
                "observeLogMessages",
                "useMultipleMongoses",
                "ignoreCommandMonitoringEvents",
                "observeSensitiveCommands",
            ],
            "client",
        )?;
        let (options, connect_timeout) = uri_options(spec.get("uriOptions"))?;
        let mut observed = BTreeSet::new();
        for name in array(spec, "observeEvents", "client")?.into_iter().flatten() {
            let name = name.as_str().ok_or("observeEvents holds a non-string")?;
            match CMAP_EVENTS.iter().find(|(n, _)| *n == name) {
                Some((_, core)) => {
                    observed.insert(*core);
                }
                None if UNPUBLISHED_EVENTS.contains(&name) => {}
                None => return Err(format!("unknown event type {name:?} in observeEvents")),
            }
        }
        let observe_logs = match spec.get("observeLogMessages") {
            None => None,
            Some(v) => {
                let mut levels = BTreeMap::new();
                for (component, level) in obj(v, "observeLogMessages")? {
                    let level = level
                        .as_str()
                        .and_then(severity)
                        .ok_or_else(|| format!("observeLogMessages.{component}: unknown level {level}"))?;
                    levels.insert(component.clone(), level);
                }
                Some(levels)
            }
        };
        let port = next_port();
        let logs = LogSink::register(port)?;
        let events = Arc::new(ClientEvents::default());
        let sink = events.clone();
        let pool = self
            .driver
            .build(PoolSpec {
                address: Address::new("localhost", port),
                options,
                // The driver's default unless the client sets one (0: none).
                connect_timeout: connect_timeout.unwrap_or(Some(cmap_async::DEFAULT_CONNECT_TIMEOUT)),
                endpoint: self.endpoint.clone(),
                on_event: Arc::new(move |event| {
                    sink.lock().push(event_json(event));
                    sink.changed.notify_all();
                }),
            })
            .map_err(|e| format!("client {id}: {e}"))?;
        // The client's first server check marks its pool ready.
        pool.ready().map_err(|e| format!("client {id}: {e}"))?;
        self.clients.insert(
            id.to_owned(),
            Client {
                pool,
                events,
                observed,
                observe_logs,
                logs,
                sessions_used: false,
            },
        );
        Ok(())
    }

    pub(super) fn client(&self, id: &str) -> Result<&Client<D::Pool<'a>>, String> {
        self.clients
            .get(id)
            .ok_or_else(|| format!("no client entity {id}"))
    }
    pub(super) fn close_all(&mut self) {
        for client in self.clients.values() {
            client.pool.close();
        }
        self.clients.clear();
    }
}

/// `uriOptions` as pool options (on the core's defaults) and the connect
/// timeout (`None`: the builder's default).
fn uri_options(uri: Option<&Value>) -> Result<(PoolOptions, Option<Option<Duration>>), String> {
    let mut builder = PoolOptions::builder();
    let mut connect_timeout = None;
    let empty = Map::new();
    let options = match uri {
        Some(uri) => obj(uri, "uriOptions")?,
        None => &empty,
    };
    for (name, value) in options {
        if IGNORED_URI_OPTIONS.iter().any(|o| o.eq_ignore_ascii_case(name)) {
            continue;
        }
        if name.eq_ignore_ascii_case("connectTimeoutMS") {
            let ms = value
                .as_u64()
                .ok_or_else(|| format!("uriOptions.connectTimeoutMS: invalid {value}"))?;
            // The URI spec: 0 means no timeout.
            connect_timeout = Some((ms > 0).then(|| Duration::from_millis(ms)));
            continue;
        }
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) => value.to_string(),
            other => return Err(format!("uriOptions.{name}: unsupported value {other}")),
        };
        match builder.set(name, &text) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "uriOptions.{name}: not a pool option of this implementation \
                     (PoolOptionsBuilder::set does not know it) nor one the mapping ignores, \
                     so the client cannot be created as the test asks"
                ))
            }
            Err(e) => return Err(format!("uriOptions.{name}: {e}")),
        }
    }
    let options = builder.build().map_err(|e| format!("uriOptions: {e}"))?;
    Ok((options, connect_timeout))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uri_options_set_pool_options_and_ignore_the_listed_others() {
        let (o, timeout) = uri_options(Some(&json!({
            "minPoolSize": 1, "maxPoolSize": 5, "appname": "x", "retryReads": false,
            "heartbeatFrequencyMS": 10000, "connectTimeoutMS": 0
        })))
        .unwrap();
        assert_eq!((o.min_pool_size(), o.max_pool_size()), (1, 5));
        assert_eq!(o.explicit_options().len(), 2);
        assert_eq!(o.reconnect(), None, "the core's defaults, no backoff");
        assert_eq!(timeout, Some(None));
        let err = uri_options(Some(&json!({"bogusPoolOption": 100}))).unwrap_err();
        assert!(
            err.starts_with("uriOptions.bogusPoolOption: not a pool option"),
            "{err}"
        );
        assert!(uri_options(Some(&json!({"maxPoolSize": -1}))).is_err());
    }
}
