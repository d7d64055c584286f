//! The test's operations: the `testRunner` special operations
//! (`createEntities`, `failPoint`, `waitForEvent`, `assertEventCount`,
//! `wait`, `assertNumberConnectionsCheckedOut`), the client and database
//! operations (commands as check-out/check-in, `close`), and `expectError`.

use std::error::Error as StdError;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use cmap_async::GetError;
use serde_json::{Map, Value};

use crate::driver::{Driver, DriverPool};
use crate::endpoint::{Endpoint, EndpointError};
use crate::format::FailPoint;
use crate::realtime::{after, now, WAIT_LIMIT};

use super::entities::TestRun;
use super::json::{array, obj, only, string};

/// A failed operation, as `expectError` looks at it.
#[derive(Debug)]
struct OpError {
    kind: String,
    message: String,
    code: Option<i64>,
    client_side: bool,
}

impl OpError {
    fn from_get(error: &GetError) -> OpError {
        let raised = crate::realtime::raised(error);
        let source: Option<&(dyn StdError + 'static)> = error.connection_error().map(|s| s as _);
        let code = match source.and_then(|s| s.downcast_ref::<EndpointError>()) {
            Some(EndpointError::Command { code, .. } | EndpointError::Authentication { code, .. }) => {
                Some(*code)
            }
            _ => None,
        };
        let message = match source {
            Some(source) if !raised.message.contains(&source.to_string()) => {
                format!("{}: {source}", raised.message)
            }
            _ => raised.message,
        };
        OpError {
            kind: raised.kind,
            message,
            code,
            client_side: code.is_none(),
        }
    }
}
impl<D: Driver> TestRun<'_, D> {
    pub(super) fn operation(&mut self, op: &Value) -> Result<(), String> {
        let o = obj(op, "an operation")?;
        only(
            o,
            &[
                "name",
                "object",
                "arguments",
                "expectError",
                "expectResult",
                "ignoreResultAndError",
                "saveResultAsEntity",
            ],
            "an operation",
        )?;
        let name = string(o, "name", "an operation")?;
        let object = string(o, "object", "an operation")?;
        let empty = Map::new();
        let args = match o.get("arguments") {
            Some(args) => obj(args, "arguments")?,
            None => &empty,
        };
        if o.contains_key("expectResult") {
            return Err("expectResult: operation results are not simulated".into());
        }
        if o.contains_key("saveResultAsEntity") {
            return Err("saveResultAsEntity is not supported by this runner".into());
        }
        if object == "testRunner" {
            if o.contains_key("expectError") || o.contains_key("ignoreResultAndError") {
                return Err("expectError and ignoreResultAndError are not for testRunner operations".into());
            }
            return self.special(name, args);
        }
        let result = self.entity_operation(object, name, args)?;
        if o.get("ignoreResultAndError") == Some(&Value::Bool(true)) {
            return Ok(());
        }
        match (o.get("expectError"), result) {
            (Some(expected), Err(error)) => expect_error(expected, &error),
            (Some(expected), Ok(())) => Err(format!("expected an error {expected}, but it succeeded")),
            (None, Err(error)) => Err(format!("unexpected {}: {}", error.kind, error.message)),
            (None, Ok(())) => Ok(()),
        }
    }

    fn special(&mut self, name: &str, args: &Map<String, Value>) -> Result<(), String> {
        match name {
            "createEntities" => {
                only(args, &["entities"], name)?;
                let entities = array(args, "entities", name)?.ok_or("createEntities needs entities")?;
                self.create_entities(entities)
            }
            "failPoint" => {
                only(args, &["client", "failPoint"], name)?;
                self.client(string(args, "client", name)?)?;
                let fail_point =
                    FailPoint::from_json(args.get("failPoint").ok_or("failPoint needs failPoint")?)?;
                lock(&self.endpoint).set_fail_point(Some(fail_point));
                Ok(())
            }
            "waitForEvent" => {
                only(args, &["client", "event", "count"], name)?;
                let client = self.client(string(args, "client", name)?)?;
                let event = args.get("event").ok_or("waitForEvent needs event")?;
                let count = count(args, name)?;
                let deadline = after(WAIT_LIMIT);
                // Counted and waited for under the list's lock, so no event
                // slips in between.
                let mut events = client.events.lock();
                loop {
                    let seen = client.count_in(&events, event)?;
                    if seen >= count {
                        return Ok(());
                    }
                    let left = deadline.saturating_duration_since(now());
                    if left.is_zero() {
                        return Err(format!(
                            "waitForEvent {event}: saw {seen} of {count} after {} s",
                            WAIT_LIMIT.as_secs()
                        ));
                    }
                    events = client
                        .events
                        .changed
                        .wait_timeout(events, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
            "assertEventCount" => {
                only(args, &["client", "event", "count"], name)?;
                let client = self.client(string(args, "client", name)?)?;
                let event = args.get("event").ok_or("assertEventCount needs event")?;
                let (expected, seen) = (count(args, name)?, client.count(event)?);
                match seen == expected {
                    true => Ok(()),
                    false => Err(format!(
                        "assertEventCount {event}: expected {expected}, saw {seen}"
                    )),
                }
            }
            "wait" => {
                only(args, &["ms"], name)?;
                let ms = args.get("ms").and_then(Value::as_u64).ok_or("wait needs ms")?;
                sleep(Duration::from_millis(ms));
                Ok(())
            }
            "assertNumberConnectionsCheckedOut" => {
                only(args, &["client", "connections"], name)?;
                let client = self.client(string(args, "client", name)?)?;
                let expected = args
                    .get("connections")
                    .and_then(Value::as_u64)
                    .ok_or("assertNumberConnectionsCheckedOut needs connections")?;
                let in_use = client.pool.status().in_use as u64;
                match in_use == expected {
                    true => Ok(()),
                    false => Err(format!(
                        "expected {expected} connections checked out, found {in_use}"
                    )),
                }
            }
            other => Err(format!(
                "the special operation {other} is not supported by this runner"
            )),
        }
    }

    /// An operation on an entity: `Err` fails the test, `Ok(Err)` is the
    /// operation's own error.
    fn entity_operation(
        &mut self,
        object: &str,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<Result<(), OpError>, String> {
        if self.clients.contains_key(object) {
            return match name {
                "listDatabases" | "listDatabaseNames" => {
                    only(
                        args,
                        &["filter", "nameOnly", "authorizedDatabases", "comment"],
                        name,
                    )?;
                    self.command(object, "listDatabases")
                }
                "close" => {
                    only(args, &[], name)?;
                    self.close_client(object)?;
                    Ok(Ok(()))
                }
                other => Err(format!(
                    "the client operation {other} is not supported by this runner"
                )),
            };
        }
        if let Some(client) = self.databases.get(object).cloned() {
            return match name {
                "runCommand" => {
                    only(
                        args,
                        &["command", "commandName", "readPreference", "comment"],
                        name,
                    )?;
                    let command = obj(args.get("command").ok_or("runCommand needs command")?, "command")?;
                    let command_name = match args.get("commandName") {
                        Some(n) => n.as_str().ok_or("commandName must be a string")?,
                        None => command
                            .keys()
                            .next()
                            .map(String::as_str)
                            .ok_or("runCommand needs a command document")?,
                    };
                    self.command(&client, command_name)
                }
                other => Err(format!(
                    "the database operation {other} is not supported by this runner"
                )),
            };
        }
        Err(format!("no entity {object}"))
    }

    /// A command on `client`: check out, use, check in.
    fn command(&mut self, client: &str, command: &str) -> Result<Result<(), OpError>, String> {
        if !Endpoint::is_handshake(command) && lock(&self.endpoint).would_fire(command) {
            return Err(format!(
                "the failPoint targets {command}, a command sent after the handshake: the \
                 simulated endpoint answers handshakes only"
            ));
        }
        let c = self
            .clients
            .get_mut(client)
            .ok_or_else(|| format!("no client entity {client}"))?;
        c.sessions_used = true;
        Ok(match c.pool.check_out(&|| {}) {
            Ok((_, conn)) => {
                drop(conn);
                Ok(())
            }
            Err(e) => Err(OpError::from_get(&e)),
        })
    }

    /// `close`: ends the implicit sessions (one more command), then closes
    /// the pool.
    fn close_client(&mut self, id: &str) -> Result<(), String> {
        let used = self.client(id)?.sessions_used;
        if used {
            // A driver ignores the outcome of endSessions.
            let _ = self.command(id, "endSessions")?;
        }
        let client = self.clients.get_mut(id).expect("checked above");
        client.sessions_used = false;
        client.pool.close();
        Ok(())
    }
}

fn expect_error(expected: &Value, error: &OpError) -> Result<(), String> {
    let e = obj(expected, "expectError")?;
    if e.is_empty() {
        return Err("expectError needs at least one assertion".into());
    }
    let fail = |what: String| {
        Err(format!(
            "{what}; the error was {} ({})",
            error.kind, error.message
        ))
    };
    for (key, value) in e {
        match key.as_str() {
            "isError" => {
                if value != &Value::Bool(true) {
                    return Err("isError must be true".into());
                }
            }
            "isClientError" => {
                let want = value.as_bool().ok_or("isClientError must be a boolean")?;
                if want != error.client_side {
                    return fail(format!("expected isClientError {want}"));
                }
            }
            "isTimeoutError" => match value.as_bool() {
                Some(false) => {}
                _ => return Err("isTimeoutError: true is not supported (no timeoutMS here)".into()),
            },
            "errorContains" => {
                let text = value.as_str().ok_or("errorContains must be a string")?;
                if !error.message.to_lowercase().contains(&text.to_lowercase()) {
                    return fail(format!("expected the message to contain {text:?}"));
                }
            }
            "errorCode" => {
                let want = value.as_i64().ok_or("errorCode must be an integer")?;
                if error.code != Some(want) {
                    return fail(format!("expected error code {want}, found {:?}", error.code));
                }
            }
            other => return Err(format!("expectError.{other} is not supported by this runner")),
        }
    }
    Ok(())
}
#[allow(clippy::disallowed_methods)] // a test's `wait` sleeps for real
fn sleep(d: Duration) {
    std::thread::sleep(d);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
fn count(args: &Map<String, Value>, what: &str) -> Result<usize, String> {
    args.get("count")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("{what} needs count (a non-negative integer)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expect_error_checks_the_supported_keys_only() {
        let network = OpError {
            kind: "Network".into(),
            message: "connection closed by the server during saslContinue".into(),
            code: None,
            client_side: true,
        };
        expect_error(
            &json!({"isClientError": true, "errorContains": "SASLCONTINUE"}),
            &network,
        )
        .unwrap();
        assert!(expect_error(&json!({"isClientError": false}), &network).is_err());
        assert!(expect_error(&json!({"errorCode": 18}), &network).is_err());
        let err = expect_error(&json!({"errorLabelsContain": ["x"]}), &network).unwrap_err();
        assert!(err.contains("not supported"), "{err}");
    }
}
