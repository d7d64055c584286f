//! The spec's "Connection Pool Logging" messages through `tracing`, as
//! cmap-async logs them (same target, strings and fields), so that the
//! logging files of the spec pass here too.
//!
//! A copy of `cmap-async/src/logging.rs` (whose tests check it), because
//! that module is private to cmap-async: its home is a shared place both
//! drivers call (cmap-core behind a feature, or a small crate), once the
//! core's `Input` work has landed.

use cmap_async::LOG_TARGET;
use cmap_core::{CheckOutFailedReason, ClosedReason, Event};

/// Whether a DEBUG message for [`LOG_TARGET`] would be recorded now.
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: LOG_TARGET, tracing::Level::DEBUG)
}

fn millis(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Logs one event as the spec's message.
pub(crate) fn log_event(event: &Event) {
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
        // Events added to the core later are not logged until mapped here.
        _ => {}
    }
}
