//! The spec's "Connection Pool Logging" messages, through `tracing`.
//!
//! Every message is a DEBUG event with target [`LOG_TARGET`] (the spec's
//! `connection` component), its `message` field the spec's exact string,
//! and the spec's field names: `serverHost`, `serverPort`,
//! `driverConnectionId`, `durationMS` (milliseconds, as `f64`), `reason`
//! (the long reason strings), `error`, `serviceId` and the options the
//! user set. Nothing else is logged: the address carries no credentials,
//! and no connection string is ever logged.
//!
//! The extension event `ReconnectGaveUp` is logged at WARN ("Connection
//! pool gave up reconnecting").

use cmap_core::{CheckOutFailedReason, ClosedReason, Event};

/// The `tracing` target of the pool's log messages (component
/// `connection`). Turn them on with a filter such as
/// `cmap::connection=debug`.
///
/// ```
/// assert_eq!(cmap_async::LOG_TARGET, "cmap::connection");
/// // With tracing-subscriber: EnvFilter::new("cmap::connection=debug")
/// ```
pub const LOG_TARGET: &str = "cmap::connection";

/// Whether a DEBUG message for [`LOG_TARGET`] would be recorded now: a
/// driver asks the core for events when this or a subscriber wants them.
pub fn log_enabled() -> bool {
    tracing::enabled!(target: LOG_TARGET, tracing::Level::DEBUG)
}

fn millis(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Logs one event as the spec's "Connection Pool Logging" message
/// (target [`LOG_TARGET`], the spec's strings and fields): what every
/// driver in this workspace calls, so the spec's logging files pass on
/// each; a driver of its own may call it too.
pub fn log_event(event: &Event) {
    let address = event.address();
    let host = address.host();
    let port = address.port();
    match event {
        Event::PoolCreated { options, .. } => {
            let set = |name: &str| {
                options
                    .explicit_options()
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| *v)
            };
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                maxIdleTimeMS = set("maxIdleTimeMS"),
                minPoolSize = set("minPoolSize"),
                maxPoolSize = set("maxPoolSize"),
                maxConnecting = set("maxConnecting"),
                waitQueueTimeoutMS = set("waitQueueTimeoutMS"),
                "Connection pool created"
            );
        }
        Event::PoolReady { .. } => {
            tracing::debug!(target: LOG_TARGET, serverHost = host, serverPort = port, "Connection pool ready");
        }
        Event::PoolCleared { service_id, .. } => {
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                serviceId = service_id.as_ref().map(display),
                "Connection pool cleared"
            );
        }
        Event::PoolClosed { .. } => {
            tracing::debug!(target: LOG_TARGET, serverHost = host, serverPort = port, "Connection pool closed");
        }
        Event::ConnectionCreated { connection_id, .. } => {
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                driverConnectionId = connection_id.0,
                "Connection created"
            );
        }
        Event::ConnectionReady {
            connection_id,
            duration,
            ..
        } => {
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                driverConnectionId = connection_id.0,
                durationMS = millis(*duration),
                "Connection ready"
            );
        }
        Event::ConnectionClosed {
            connection_id,
            reason,
            error,
            ..
        } => {
            // Spec: `error` only when the reason is an error.
            let error = error.as_ref().filter(|_| *reason == ClosedReason::Error);
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                driverConnectionId = connection_id.0,
                reason = reason.log_message(),
                error = error.map(display),
                "Connection closed"
            );
        }
        Event::ConnectionCheckOutStarted { .. } => {
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                "Connection checkout started"
            );
        }
        Event::ConnectionCheckOutFailed {
            reason,
            error,
            duration,
            ..
        } => {
            // Spec: `error` only when the reason is a connection error.
            let error = Some(error).filter(|_| *reason == CheckOutFailedReason::ConnectionError);
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                reason = reason.log_message(),
                error = error.map(display),
                durationMS = millis(*duration),
                "Connection checkout failed"
            );
        }
        Event::ConnectionCheckedOut {
            connection_id,
            duration,
            ..
        } => {
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                driverConnectionId = connection_id.0,
                durationMS = millis(*duration),
                "Connection checked out"
            );
        }
        Event::ConnectionCheckedIn { connection_id, .. } => {
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                driverConnectionId = connection_id.0,
                "Connection checked in"
            );
        }
        Event::ReconnectGaveUp {
            failing_for,
            last_error,
            ..
        } => {
            tracing::warn!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                failingForMS = millis(*failing_for),
                error = %last_error,
                "Connection pool gave up reconnecting"
            );
        }
        Event::PoolResized {
            min_pool_size,
            max_pool_size,
            ..
        } => {
            tracing::debug!(
                target: LOG_TARGET,
                serverHost = host,
                serverPort = port,
                minPoolSize = min_pool_size,
                maxPoolSize = max_pool_size,
                "Connection pool resized"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use cmap_core::{
        Address, CheckOutError, ConnectionId, EstablishError, PoolOptions, PoolState, ServiceId, Status,
        TimeoutContext,
    };
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Level, Metadata, Subscriber};

    use super::*;

    /// A field's value, as the subscriber saw it.
    #[derive(Debug, Clone, PartialEq)]
    enum V {
        U(u64),
        F(f64),
        S(String),
    }

    #[derive(Debug, Clone)]
    struct Record_ {
        target: String,
        level: Level,
        fields: BTreeMap<String, V>,
    }

    /// A minimal subscriber that records every event's fields.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<Record_>>>);

    struct Fields<'a>(&'a mut BTreeMap<String, V>);

    impl Visit for Fields<'_> {
        fn record_u64(&mut self, field: &Field, value: u64) {
            self.0.insert(field.name().into(), V::U(value));
        }
        fn record_i64(&mut self, field: &Field, value: i64) {
            self.0.insert(field.name().into(), V::U(value as u64));
        }
        fn record_f64(&mut self, field: &Field, value: f64) {
            self.0.insert(field.name().into(), V::F(value));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().into(), V::S(value.into()));
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.insert(field.name().into(), V::S(format!("{value:?}")));
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut fields = BTreeMap::new();
            event.record(&mut Fields(&mut fields));
            self.0.lock().unwrap().push(Record_ {
                target: event.metadata().target().into(),
                level: *event.metadata().level(),
                fields,
            });
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    fn capture(events: &[Event]) -> Vec<Record_> {
        let capture = Capture::default();
        tracing::subscriber::with_default(capture.clone(), || {
            assert!(log_enabled());
            events.iter().for_each(log_event);
        });
        let records = capture.0.lock().unwrap().clone();
        records
    }

    fn s(v: &str) -> V {
        V::S(v.into())
    }

    #[test]
    fn pool_created_lists_the_options_the_user_set_and_the_common_fields() {
        let options = PoolOptions::from_connection_string(
            "mongodb://u:secret@h/?minPoolSize=1&maxPoolSize=5&maxIdleTimeMS=10000",
            true,
        )
        .unwrap();
        let address = Address::new("db.example", 27017);
        let records = capture(&[Event::PoolCreated {
            address: address.clone(),
            options: Arc::new(options),
        }]);
        let r = &records[0];
        assert_eq!(r.target, "cmap::connection");
        assert_eq!(r.level, Level::DEBUG);
        let f = &r.fields;
        assert_eq!(f["message"], s("Connection pool created"));
        assert_eq!(f["serverHost"], s("db.example"));
        assert_eq!(f["serverPort"], V::U(27017));
        assert_eq!(f["minPoolSize"], V::U(1));
        assert_eq!(f["maxPoolSize"], V::U(5));
        assert_eq!(f["maxIdleTimeMS"], V::U(10000));
        assert!(!f.contains_key("maxConnecting"), "not set, not logged: {f:?}");
        assert!(!f.contains_key("waitQueueTimeoutMS"));
        // Credentials never reach a log message.
        assert!(f.values().all(|v| !format!("{v:?}").contains("secret")));
    }

    #[test]
    fn the_extensions_events_are_logged_with_their_fields() {
        let a = Address::new("h", 1234);
        let records = capture(&[
            Event::ReconnectGaveUp {
                address: a.clone(),
                failing_for: Duration::from_millis(1500),
                last_error: EstablishError::network(std::io::Error::other("connection refused")),
            },
            Event::PoolResized {
                address: a,
                min_pool_size: 2,
                max_pool_size: 8,
            },
        ]);
        assert_eq!(records.len(), 2, "{records:?}");
        let (gave_up, resized) = (&records[0], &records[1]);
        assert_eq!(gave_up.level, Level::WARN);
        assert_eq!(
            gave_up.fields["message"],
            s("Connection pool gave up reconnecting")
        );
        assert_eq!(gave_up.fields["failingForMS"], V::F(1500.0));
        assert_eq!(
            gave_up.fields["error"],
            s("connection refused [SystemOverloadedError, RetryableError]")
        );
        assert_eq!(resized.level, Level::DEBUG);
        assert_eq!(resized.fields["message"], s("Connection pool resized"));
        assert_eq!(resized.fields["minPoolSize"], V::U(2));
        assert_eq!(resized.fields["maxPoolSize"], V::U(8));
        for r in &records {
            assert_eq!(r.fields["serverHost"], s("h"));
            assert_eq!(r.fields["serverPort"], V::U(1234));
        }
    }

    #[test]
    fn every_message_has_the_spec_string_and_fields() {
        let a = Address::new("h", 1234);
        let refused = EstablishError::network(std::io::Error::other("connection refused"));
        let service = ServiceId([0xab; 12]);
        let events = [
            Event::PoolReady { address: a.clone() },
            Event::PoolCleared {
                address: a.clone(),
                service_id: Some(service),
                interrupt_in_use_connections: false,
            },
            Event::ConnectionCreated {
                address: a.clone(),
                connection_id: ConnectionId(7),
            },
            Event::ConnectionReady {
                address: a.clone(),
                connection_id: ConnectionId(7),
                duration: Duration::from_micros(2500),
            },
            Event::ConnectionCheckOutStarted { address: a.clone() },
            Event::ConnectionCheckedOut {
                address: a.clone(),
                connection_id: ConnectionId(7),
                duration: Duration::from_millis(3),
            },
            Event::ConnectionCheckedIn {
                address: a.clone(),
                connection_id: ConnectionId(7),
                held: Duration::from_millis(5),
            },
            Event::ConnectionClosed {
                address: a.clone(),
                connection_id: ConnectionId(7),
                reason: ClosedReason::Error,
                error: Some(refused.clone()),
            },
            Event::ConnectionClosed {
                address: a.clone(),
                connection_id: ConnectionId(8),
                reason: ClosedReason::Idle,
                error: None,
            },
            Event::ConnectionCheckOutFailed {
                address: a.clone(),
                reason: CheckOutFailedReason::ConnectionError,
                error: Box::new(CheckOutError::ConnectionError {
                    address: a.clone(),
                    connection_id: ConnectionId(9),
                    source: refused,
                }),
                duration: Duration::from_millis(4),
            },
            Event::ConnectionCheckOutFailed {
                address: a.clone(),
                reason: CheckOutFailedReason::Timeout,
                error: Box::new(CheckOutError::WaitQueueTimeout {
                    address: a.clone(),
                    context: Box::new(TimeoutContext {
                        waited: Duration::from_millis(5),
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
                    }),
                }),
                duration: Duration::from_millis(5),
            },
            Event::PoolClosed { address: a.clone() },
        ];
        let records = capture(&events);
        assert_eq!(records.len(), events.len());
        let f = |i: usize| &records[i].fields;
        for r in &records {
            assert_eq!((r.target.as_str(), r.level), ("cmap::connection", Level::DEBUG));
            assert_eq!(r.fields["serverHost"], s("h"));
            assert_eq!(r.fields["serverPort"], V::U(1234));
        }
        let messages: Vec<_> = records.iter().map(|r| r.fields["message"].clone()).collect();
        let expected = [
            "Connection pool ready",
            "Connection pool cleared",
            "Connection created",
            "Connection ready",
            "Connection checkout started",
            "Connection checked out",
            "Connection checked in",
            "Connection closed",
            "Connection closed",
            "Connection checkout failed",
            "Connection checkout failed",
            "Connection pool closed",
        ];
        assert_eq!(messages, expected.map(s));
        assert_eq!(f(1)["serviceId"], s("abababababababababababab"));
        assert_eq!(f(2)["driverConnectionId"], V::U(7));
        assert_eq!(f(3)["durationMS"], V::F(2.5));
        assert_eq!(f(5)["durationMS"], V::F(3.0));
        assert_eq!(f(6)["driverConnectionId"], V::U(7));
        assert_eq!(f(7)["reason"], s("An error occurred while using the connection"));
        // The backpressure labels are shown with the error.
        assert_eq!(
            f(7)["error"],
            s("connection refused [SystemOverloadedError, RetryableError]")
        );
        assert_eq!(
            f(8)["reason"],
            s("Connection has been available but unused for longer than the configured max idle time")
        );
        assert!(!f(8).contains_key("error"));
        assert_eq!(
            f(9)["reason"],
            s("An error occurred while trying to establish a new connection")
        );
        assert!(matches!(&f(9)["error"], V::S(e) if e.contains("connection refused")));
        assert!(matches!(&f(9)["error"], V::S(e) if e.contains("SystemOverloadedError")));
        assert_eq!(f(9)["durationMS"], V::F(4.0));
        assert_eq!(
            f(10)["reason"],
            s("Wait queue timeout elapsed without a connection becoming available")
        );
        assert!(!f(10).contains_key("error"));
    }

    #[test]
    fn a_unix_socket_has_no_port() {
        let records = capture(&[Event::PoolReady {
            address: Address::unix("/tmp/db.sock"),
        }]);
        assert_eq!(records[0].fields["serverHost"], s("/tmp/db.sock"));
        assert!(!records[0].fields.contains_key("serverPort"));
    }

    #[test]
    fn off_without_a_subscriber() {
        assert!(!log_enabled());
    }
}
