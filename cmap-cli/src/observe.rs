//! What a test can observe, in the JSON shape its assertions are written in:
//! the core's events and the errors raised by simulated threads.

use cmap_core::{CheckOutError, Event};
use serde_json::{json, Map, Value};

use crate::endpoint::EndpointError;

/// An event as the format sees it: `type` plus only the fields that exist
/// for that event (`address`, `connectionId`, `duration` in ms, `reason`,
/// `options`, `serviceId`, `interruptInUseConnections`).
pub fn event_json(event: &Event) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), event.name().into());
    m.insert("address".into(), event.address().to_string().into());
    if let Some(id) = event.connection_id() {
        m.insert("connectionId".into(), id.0.into());
    }
    if let Some(duration) = event.duration() {
        m.insert("duration".into(), json!(duration.as_secs_f64() * 1000.0));
    }
    match event {
        Event::PoolCreated { options, .. } => {
            let set: Map<String, Value> = options
                .explicit_options()
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).into()))
                .collect();
            m.insert("options".into(), set.into());
        }
        Event::PoolCleared {
            service_id,
            interrupt_in_use_connections,
            ..
        } => {
            if let Some(service) = service_id {
                m.insert("serviceId".into(), service.to_string().into());
            }
            m.insert(
                "interruptInUseConnections".into(),
                (*interrupt_in_use_connections).into(),
            );
        }
        Event::ConnectionClosed { reason, .. } => {
            m.insert("reason".into(), reason.as_str().into());
        }
        Event::ConnectionCheckOutFailed { reason, .. } => {
            m.insert("reason".into(), reason.as_str().into());
        }
        _ => {}
    }
    Value::Object(m)
}

/// An error raised on a simulated thread: `{type, message, address?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaisedError {
    /// The spec's error type name (`PoolClosedError`, `AuthenticationError`...).
    pub kind: String,
    /// Its message.
    pub message: String,
    /// The pool's address, for errors of the pool.
    pub address: Option<String>,
}

impl RaisedError {
    /// A failed checkout. An establishment failure takes the type of its
    /// source (the endpoint's error), as a driver would surface it.
    pub fn from_check_out(error: &CheckOutError) -> RaisedError {
        let (kind, address) = match error {
            CheckOutError::ConnectionError { address, source, .. } => {
                let kind = source
                    .downcast_ref::<EndpointError>()
                    .map_or(error.spec_name(), EndpointError::type_name);
                (kind, Some(address))
            }
            CheckOutError::PoolClosed { address }
            | CheckOutError::PoolCleared { address, .. }
            | CheckOutError::WaitQueueTimeout { address, .. } => (error.spec_name(), Some(address)),
            _ => (error.spec_name(), None),
        };
        RaisedError {
            kind: kind.to_owned(),
            // The spec's message: the pool's state this crate adds to a
            // timeout is not the spec's.
            message: error.spec_message(),
            address: address.map(ToString::to_string),
        }
    }

    /// An error of the runner itself (a `waitForEvent` that timed out...).
    pub fn runner(kind: &str, message: String) -> RaisedError {
        RaisedError {
            kind: kind.to_owned(),
            message,
            address: None,
        }
    }

    /// `ready` refused (the pool is closed): to the test, an error raised
    /// by the operation.
    pub fn usage(error: &cmap_core::UsageError) -> RaisedError {
        RaisedError::runner("UsageError", error.to_string())
    }

    /// A `waitForEvent` whose own `timeout` passed with `seen` of `count`
    /// events.
    pub fn wait_for_event_timeout(event: &str, seen: usize, count: usize) -> RaisedError {
        RaisedError::runner(
            "WaitForEventTimeout",
            format!("waitForEvent {event}: saw {seen} of {count} before the timeout"),
        )
    }

    /// The JSON that `error` in the test file is matched against.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), self.kind.clone().into());
        m.insert("message".into(), self.message.clone().into());
        if let Some(address) = &self.address {
            m.insert("address".into(), address.clone().into());
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cmap_core::{Address, ConnectionId, EstablishError, PoolState, Status, TimeoutContext};
    use std::time::Duration;

    #[test]
    fn establishment_errors_take_their_source_type() {
        let address: Address = "h:1".parse().unwrap();
        let err = CheckOutError::ConnectionError {
            address: address.clone(),
            connection_id: ConnectionId(1),
            source: EstablishError::authentication(EndpointError::Authentication {
                command: "saslContinue",
                code: 18,
            }),
        };
        let raised = RaisedError::from_check_out(&err);
        assert_eq!(raised.kind, "AuthenticationError");
        assert_eq!(raised.address.as_deref(), Some("h:1"));
        let context = Box::new(TimeoutContext {
            waited: Duration::from_millis(50),
            max_pool_size: 1,
            status: Status {
                state: PoolState::Ready,
                generation: 0,
                total: 1,
                available: 0,
                pending: 0,
                in_use: 1,
                waiting: 1,
            },
            last_error: None,
        });
        let timeout = RaisedError::from_check_out(&CheckOutError::WaitQueueTimeout { address, context });
        assert_eq!(timeout.kind, "WaitQueueTimeoutError");
        assert_eq!(
            timeout.to_json()["message"],
            "Timed out while checking out a Connection from connection pool"
        );
    }
}
