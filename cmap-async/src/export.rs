//! Metrics export through the [`metrics`] facade (feature `metrics`,
//! turned on per pool by [`PoolBuilder::metrics`](crate::PoolBuilder::metrics)).
//!
//! It is one more event subscriber: a callback on the pool's own events,
//! registered at build. Its handles (counters, gauges, histograms) are
//! taken from the recorder current at build (the global one, or one set
//! with `metrics::with_local_recorder` around `build`) and kept, so an
//! event costs no registry look-up. After each event the gauges are set
//! from the pool's status (one lock of the pool, outside the lock the
//! event was produced under), so they never drift, whatever the events
//! say or omit (a checkout cancelled by its caller has none). The use time
//! comes with `ConnectionCheckedIn` (`held`): no clock read, no table.
//!
//! Every metric carries the label `address` (`host:port`); the names:
//!
//! | metric | kind | what |
//! | --- | --- | --- |
//! | `cmap_connections_idle` | gauge | available connections |
//! | `cmap_connections_in_use` | gauge | checked-out connections |
//! | `cmap_connections_pending` | gauge | connections being established |
//! | `cmap_connections_total` | gauge | idle + in use + pending |
//! | `cmap_checkouts_waiting` | gauge | checkouts in the wait queue |
//! | `cmap_connections_opened_total` | counter | connections established |
//! | `cmap_connections_closed_total` | counter | connections closed, label `reason` (`stale`, `idle`, `error`, `poolClosed`, `lifetime`, `detached`, `shrunk`) |
//! | `cmap_checkouts_total` | counter | checkouts that got a connection |
//! | `cmap_checkout_failures_total` | counter | checkouts that failed, label `reason` (`timeout`, `poolClosed`, `connectionError`) |
//! | `cmap_checkout_timeouts_total` | counter | checkouts that timed out (the `timeout` failures) |
//! | `cmap_checkout_wait_seconds` | histogram | from checkout start to checked out |
//! | `cmap_connection_use_seconds` | histogram | from checked out to checked in |
//! | `cmap_connection_connect_seconds` | histogram | from created to ready (establishment) |

use std::sync::Arc;

use cmap_core::{Address, CheckOutFailedReason, Event, Status};
use metrics::{Counter, Gauge, Histogram, Unit};

use crate::manager::ManageConnection;
use crate::panics::{Hook, Panics};
use crate::runtime::Runtime;
use crate::shared::Shared;

/// The closing reasons of `ClosedReason::as_str`, registered at build.
const CLOSED_REASONS: [&str; 7] = [
    "stale",
    "idle",
    "error",
    "poolClosed",
    "lifetime",
    "detached",
    "shrunk",
];

/// The failure reasons of `CheckOutFailedReason::as_str`.
const FAILED_REASONS: [&str; 3] = ["timeout", "poolClosed", "connectionError"];

/// One pool's metric handles, fed its events: every adapter's export
/// (cmap-async subscribes it below, cmap-local from its own events).
/// Public for the adapters only.
#[doc(hidden)]
pub struct Metrics {
    address: String,
    idle: Gauge,
    in_use: Gauge,
    pending: Gauge,
    total: Gauge,
    waiting: Gauge,
    opened: Counter,
    closed: Vec<(&'static str, Counter)>,
    checked_out: Counter,
    failed: Vec<(&'static str, Counter)>,
    timeouts: Counter,
    wait: Histogram,
    usage: Histogram,
    connect: Histogram,
}

fn describe() {
    metrics::describe_gauge!("cmap_connections_idle", "Available connections of the pool");
    metrics::describe_gauge!("cmap_connections_in_use", "Checked-out connections of the pool");
    metrics::describe_gauge!("cmap_connections_pending", "Connections being established");
    metrics::describe_gauge!("cmap_connections_total", "Idle, in-use and pending connections");
    metrics::describe_gauge!("cmap_checkouts_waiting", "Checkouts in the wait queue");
    metrics::describe_counter!("cmap_connections_opened_total", "Connections established");
    metrics::describe_counter!("cmap_connections_closed_total", "Connections closed, by reason");
    metrics::describe_counter!("cmap_checkouts_total", "Checkouts that got a connection");
    metrics::describe_counter!("cmap_checkout_failures_total", "Checkouts that failed, by reason");
    metrics::describe_counter!("cmap_checkout_timeouts_total", "Checkouts that timed out");
    metrics::describe_histogram!(
        "cmap_checkout_wait_seconds",
        Unit::Seconds,
        "Time from checkout start to checked out"
    );
    metrics::describe_histogram!(
        "cmap_connection_use_seconds",
        Unit::Seconds,
        "Time from checked out to checked in"
    );
    metrics::describe_histogram!(
        "cmap_connection_connect_seconds",
        Unit::Seconds,
        "Time to establish a connection"
    );
}

impl Metrics {
    /// The handles of the pool at `address`, from the current recorder.
    pub fn new(address: &Address) -> Metrics {
        describe();
        let a = address.to_string();
        let closed = CLOSED_REASONS
            .iter()
            .map(|r| {
                let counter =
                    metrics::counter!("cmap_connections_closed_total", "address" => a.clone(), "reason" => *r);
                (*r, counter)
            })
            .collect();
        let failed = FAILED_REASONS
            .iter()
            .map(|r| {
                let counter =
                    metrics::counter!("cmap_checkout_failures_total", "address" => a.clone(), "reason" => *r);
                (*r, counter)
            })
            .collect();
        Metrics {
            idle: metrics::gauge!("cmap_connections_idle", "address" => a.clone()),
            in_use: metrics::gauge!("cmap_connections_in_use", "address" => a.clone()),
            pending: metrics::gauge!("cmap_connections_pending", "address" => a.clone()),
            total: metrics::gauge!("cmap_connections_total", "address" => a.clone()),
            waiting: metrics::gauge!("cmap_checkouts_waiting", "address" => a.clone()),
            opened: metrics::counter!("cmap_connections_opened_total", "address" => a.clone()),
            closed,
            checked_out: metrics::counter!("cmap_checkouts_total", "address" => a.clone()),
            failed,
            timeouts: metrics::counter!("cmap_checkout_timeouts_total", "address" => a.clone()),
            wait: metrics::histogram!("cmap_checkout_wait_seconds", "address" => a.clone()),
            usage: metrics::histogram!("cmap_connection_use_seconds", "address" => a.clone()),
            connect: metrics::histogram!("cmap_connection_connect_seconds", "address" => a.clone()),
            address: a,
        }
    }

    /// A counter of `name` for `reason`: the one registered at build, or
    /// (a reason added to the core since) one from the current recorder.
    fn by_reason(&self, known: &[(&'static str, Counter)], name: &'static str, reason: &'static str) {
        match known.iter().find(|(r, _)| *r == reason) {
            Some((_, counter)) => counter.increment(1),
            None => {
                metrics::counter!(name, "address" => self.address.clone(), "reason" => reason).increment(1)
            }
        }
    }

    /// Counts `event` (the counters and histograms).
    pub fn count(&self, event: &Event) {
        match event {
            Event::ConnectionReady { duration, .. } => {
                self.opened.increment(1);
                self.connect.record(duration.as_secs_f64());
            }
            Event::ConnectionClosed { reason, .. } => {
                self.by_reason(&self.closed, "cmap_connections_closed_total", reason.as_str());
            }
            Event::ConnectionCheckedOut { duration, .. } => {
                self.checked_out.increment(1);
                self.wait.record(duration.as_secs_f64());
            }
            Event::ConnectionCheckedIn { held, .. } => self.usage.record(held.as_secs_f64()),
            Event::ConnectionCheckOutFailed { reason, .. } => {
                self.by_reason(&self.failed, "cmap_checkout_failures_total", reason.as_str());
                if *reason == CheckOutFailedReason::Timeout {
                    self.timeouts.increment(1);
                }
            }
            _ => {}
        }
    }

    /// Sets the gauges from `status`, the pool's, read after the events
    /// counted (`None`: the pool is gone).
    pub fn gauges(&self, status: Option<Status>) {
        if let Some(s) = status {
            self.idle.set(s.available as f64);
            self.in_use.set(s.in_use as f64);
            self.pending.set(s.pending as f64);
            self.total.set(s.total as f64);
            self.waiting.set(s.waiting as f64);
        }
    }
}

/// Subscribes the pool's metrics to its events (at build, before the pool
/// is marked ready, so the first events count); the gauges are set once per
/// batch delivered.
pub(crate) fn subscribe<M: ManageConnection, R: Runtime>(shared: &Arc<Shared<M, R>>) {
    let metrics = Metrics::new(&shared.address);
    // Weakly: the subscription lives in the pool.
    let pool = Arc::downgrade(shared);
    let _ = shared
        .events
        .on_batch(Arc::new(move |events: &[Event], panics: &Panics| {
            for event in events {
                let _ = panics.call(Hook::EventCallback, || metrics.count(event));
            }
            let status = pool.upgrade().map(|p| p.lock().core.status());
            let _ = panics.call(Hook::EventCallback, || metrics.gauges(status));
        }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_known_reasons_are_the_cores() {
        use cmap_core::ClosedReason as C;
        let closed = [
            C::Stale,
            C::Idle,
            C::Error,
            C::PoolClosed,
            C::Lifetime,
            C::Detached,
            C::Shrunk,
        ]
        .map(C::as_str);
        assert_eq!(closed, CLOSED_REASONS);
        use cmap_core::CheckOutFailedReason as F;
        let failed = [F::Timeout, F::PoolClosed, F::ConnectionError].map(F::as_str);
        assert_eq!(failed, FAILED_REASONS);
    }
}
