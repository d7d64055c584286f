//! Metrics export through the [`metrics`] facade (feature `metrics`,
//! turned on per pool by [`PoolBuilder::metrics`](crate::PoolBuilder::metrics)).
//!
//! It is fed on the input paths themselves, not through events (as
//! HikariCP's metrics tracker is called on its checkout and check-in
//! paths): the core queues a [`Measure`] (a duration or a reason, no
//! address) wherever it emits an event the metrics count, and the pool's
//! events stay off when nobody else reads them. Under the pool's lock an
//! input copies its measures out (one or two, most inputs) and notes how
//! far its status moved the gauges ([`Metrics::take`]); once the lock
//! is released they are applied to the handles ([`Metrics::apply`]), with
//! one catch of a panic for the lot. The gauges move by the difference
//! between two statuses taken under the lock, so inputs applied in any
//! order leave them exact, and a gauge that did not move is not touched.
//! The handles (counters, gauges, histograms) are taken from the recorder
//! current at build (the global one, or one set with
//! `metrics::with_local_recorder` around `build`) and kept: no registry
//! look-up per sample.
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
//! | `cmap_connection_establish_failures_total` | counter | connections that could not be established, label `kind` (`network`: labelled `SystemOverloadedError`, the server may be overloaded; `authentication`; `other`) |
//! | `cmap_checkout_wait_seconds` | histogram | from checkout start to checked out |
//! | `cmap_connection_use_seconds` | histogram | from checked out to checked in |
//! | `cmap_connection_connect_seconds` | histogram | from created to ready (establishment) |

use std::sync::atomic::{AtomicUsize, Ordering};

use cmap_core::{Address, CheckOutFailedReason, ClosedReason, EstablishErrorKind, Measure, Pool, Status};
use metrics::{Counter, Gauge, Histogram, Unit};

use crate::panics::{catch_panic, CountPanics, Hook};

/// One pool's metric handles, fed its measures: every adapter's export.
/// Part of the [driver layer](crate::driver).
pub struct Metrics {
    /// Idle, in use, pending, total, waiting.
    gauges: [Gauge; 5],
    /// The gauges' values as of the last [`take`](Self::take): read and
    /// written only under the pool's lock (atomics only to be `Sync`).
    shown: [AtomicUsize; 5],
    opened: Counter,
    /// One counter per reason, registered at build.
    closed: [(ClosedReason, Counter); ClosedReason::ALL.len()],
    checked_out: Counter,
    failed: [(CheckOutFailedReason, Counter); CheckOutFailedReason::ALL.len()],
    timeouts: Counter,
    /// One counter per kind of establishment failure, registered at build.
    establish_failed: [(EstablishErrorKind, Counter); ESTABLISH_KINDS.len()],
    wait: Histogram,
    usage: Histogram,
    connect: Histogram,
}

/// What one input leaves the metrics: taken under the pool's lock
/// ([`Metrics::take`]), applied after it ([`Metrics::apply`]).
pub struct Measured {
    /// The first two measures, inline: most inputs leave one at most, a
    /// check-in handing its connection to a waiter two.
    few: [Option<Measure>; 2],
    /// The others, in order (none, and no allocation, for most inputs).
    rest: Vec<Measure>,
    /// How far each gauge moved: idle, in use, pending, total, waiting.
    moved: [i32; 5],
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
    metrics::describe_counter!(
        "cmap_connection_establish_failures_total",
        "Connections that could not be established, by kind (network: labelled overloaded)"
    );
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

/// The kinds of establishment failure, with their `kind` label.
const ESTABLISH_KINDS: [(EstablishErrorKind, &str); 3] = [
    (EstablishErrorKind::Network, "network"),
    (EstablishErrorKind::Authentication, "authentication"),
    (EstablishErrorKind::Other, "other"),
];

/// The gauges' values in `status`, in [`Metrics::gauges`]' order.
#[inline]
fn gauged(s: &Status) -> [usize; 5] {
    [s.available, s.in_use, s.pending, s.total, s.waiting]
}

impl Metrics {
    /// The handles of the pool at `address`, from the current recorder.
    /// Switch the core's measures on ([`Pool::set_measures_enabled`]) to
    /// feed it.
    pub fn new(address: &Address) -> Metrics {
        describe();
        let a = address.to_string();
        let closed = ClosedReason::ALL.map(|r| {
            let reason = r.as_str();
            (
                r,
                metrics::counter!("cmap_connections_closed_total", "address" => a.clone(), "reason" => reason),
            )
        });
        let failed = CheckOutFailedReason::ALL.map(|r| {
            let reason = r.as_str();
            (
                r,
                metrics::counter!("cmap_checkout_failures_total", "address" => a.clone(), "reason" => reason),
            )
        });
        let establish_failed = ESTABLISH_KINDS.map(|(k, kind)| {
            (
                k,
                metrics::counter!("cmap_connection_establish_failures_total", "address" => a.clone(), "kind" => kind),
            )
        });
        let gauges = [
            "cmap_connections_idle",
            "cmap_connections_in_use",
            "cmap_connections_pending",
            "cmap_connections_total",
            "cmap_checkouts_waiting",
        ]
        .map(|name| metrics::gauge!(name, "address" => a.clone()));
        Metrics {
            gauges,
            shown: Default::default(),
            opened: metrics::counter!("cmap_connections_opened_total", "address" => a.clone()),
            closed,
            checked_out: metrics::counter!("cmap_checkouts_total", "address" => a.clone()),
            failed,
            timeouts: metrics::counter!("cmap_checkout_timeouts_total", "address" => a.clone()),
            establish_failed,
            wait: metrics::histogram!("cmap_checkout_wait_seconds", "address" => a.clone()),
            usage: metrics::histogram!("cmap_connection_use_seconds", "address" => a.clone()),
            connect: metrics::histogram!("cmap_connection_connect_seconds", "address" => a),
        }
    }

    /// Under the pool's lock, after an input: its measures, and how far
    /// the gauges moved since the last input (`None`: neither).
    #[inline(always)]
    pub fn take<C>(&self, core: &mut Pool<C>) -> Option<Measured> {
        let mut moved = [0; 5];
        for ((moved, shown), now) in moved.iter_mut().zip(&self.shown).zip(gauged(&core.status())) {
            let was = shown.load(Ordering::Relaxed);
            if was != now {
                shown.store(now, Ordering::Relaxed);
                *moved = now as i32 - was as i32;
            }
        }
        let measures = core.measures();
        if measures.is_empty() && moved == [0; 5] {
            return None;
        }
        let few = [measures.first().copied(), measures.get(1).copied()];
        // Most inputs leave two measures at most: nothing to collect then.
        let rest = measures.get(2..).map_or(Vec::new(), <[Measure]>::to_vec);
        core.clear_measures();
        Some(Measured { few, rest, moved })
    }

    /// Once the lock is released: `measured` counted, recorded, and the
    /// gauges moved, a panic of the recorder's caught (and counted in
    /// `panics`) once for the lot: the rest of the input's metrics are
    /// lost then.
    #[inline(always)]
    pub fn apply(&self, measured: &Measured, panics: &impl CountPanics) {
        let _ = catch_panic(panics, Hook::Metrics, || self.apply_uncaught(measured));
    }

    #[inline(always)]
    fn apply_uncaught(&self, measured: &Measured) {
        if let Some(first) = measured.few[0] {
            self.count(first);
        }
        if let Some(second) = measured.few[1] {
            self.count(second);
            for measure in &measured.rest {
                self.count(*measure);
            }
        }
        for (gauge, moved) in self.gauges.iter().zip(measured.moved) {
            if moved != 0 {
                gauge.increment(f64::from(moved));
            }
        }
    }

    /// Counts one `reason` (every one was registered at build).
    fn by_reason<R: PartialEq>(known: &[(R, Counter)], reason: R) {
        if let Some((_, counter)) = known.iter().find(|(r, _)| *r == reason) {
            counter.increment(1);
        }
    }

    #[inline]
    fn count(&self, measure: Measure) {
        match measure {
            Measure::CheckedOut { duration } => {
                self.checked_out.increment(1);
                self.wait.record(duration.as_secs_f64());
            }
            Measure::CheckedIn { held } => self.usage.record(held.as_secs_f64()),
            Measure::Ready { duration } => {
                self.opened.increment(1);
                self.connect.record(duration.as_secs_f64());
            }
            Measure::Closed { reason } => {
                Metrics::by_reason(&self.closed, reason);
            }
            Measure::CheckOutFailed { reason } => {
                Metrics::by_reason(&self.failed, reason);
                if reason == CheckOutFailedReason::Timeout {
                    self.timeouts.increment(1);
                }
            }
            Measure::EstablishFailed { kind } => Metrics::by_reason(&self.establish_failed, kind),
            _ => {}
        }
    }
}
