//! cmap-tokio, with the shared options of `cmap_async.rs`, and the
//! variants `bench instructions` compares it with: a subscriber that
//! counts every event (the event path's cost), the manager trait's default
//! `CHECKS = true` with a no-op check and `RESETS = true` with a no-op
//! reset, the flight recorder on, and the pool as production watches it:
//! metrics exported to a Prometheus recorder, or its log at INFO or DEBUG
//! formatted by `tracing-subscriber` and discarded.

use std::future::Future;
use std::sync::atomic::Ordering;

use cmap_tokio::{Pool, PooledConnection, TokioRuntime};

use super::cmap_async::{configured, get, Manager};
use super::{AsyncPool, Setup};
use crate::rt::Tokio;

/// What a variant adds to the plain pool.
#[derive(Clone, Copy)]
enum Extra {
    Nothing,
    /// A subscriber that counts every event.
    Events,
    /// The flight recorder, with [`RECORDER_CAPACITY`] entries.
    Recorder,
    /// `.metrics(true)`, into a Prometheus exporter's recorder installed
    /// as the process's global one (each bench run measures one pool).
    Metrics,
    /// A global `tracing` subscriber at this level, formatting every
    /// record it takes and writing it nowhere.
    Tracing(tracing::Level),
}

/// The flight recorder's ring in `cmap-tokio+recorder`: large enough that
/// its segments roll (and snapshot the pool) a few times per measurement.
const RECORDER_CAPACITY: usize = 100_000;

fn build<const RS: bool, const CS: bool>(setup: &Setup, extra: Extra) -> Pool<Manager<RS, CS>> {
    let (mut builder, manager) = configured(setup);
    match extra {
        Extra::Nothing => {}
        Extra::Events => {
            let events = setup.events.clone();
            builder = builder.on_event(move |_| {
                events.fetch_add(1, Ordering::Relaxed);
            });
        }
        Extra::Recorder => builder = builder.flight_recorder(RECORDER_CAPACITY),
        Extra::Metrics => {
            let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
            // Only the first pool built installs it; later ones share it.
            let _ = metrics::set_global_recorder(recorder);
            builder = builder.metrics(true);
        }
        Extra::Tracing(level) => {
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(level)
                .with_writer(std::io::sink)
                .finish();
            let _ = tracing::subscriber::set_global_default(subscriber);
        }
    }
    builder
        .build_on(manager, TokioRuntime::new(tokio::runtime::Handle::current()))
        .expect("valid cmap-tokio options")
}

/// One variant: its type, its name in the tables, whether its manager
/// resets and checks, and what it adds.
macro_rules! variant {
    ($(#[$doc:meta])* $ty:ident, $name:literal, resets: $resets:literal, checks: $checks:literal, $extra:expr) => {
        $(#[$doc])*
        pub struct $ty(Pool<Manager<$resets, $checks>>);

        impl AsyncPool for $ty {
            const NAME: &'static str = $name;
            const NATIVE_MIN: bool = true;
            type Rt = Tokio;
            type Guard<'a> = PooledConnection<'a, Manager<$resets, $checks>>;

            fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
                std::future::ready($ty(build(setup, $extra)))
            }

            fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send {
                get(&self.0)
            }
        }
    };
}

variant!(
    /// The pool as its docs advise for speed.
    CmapTokio, "cmap-tokio", resets: false, checks: false, Extra::Nothing
);
variant!(
    /// With a subscriber counting every event.
    CmapTokioEvents, "cmap-tokio+events", resets: false, checks: false, Extra::Events
);
variant!(
    /// With the manager trait's default `RESETS = true` (a no-op reset).
    CmapTokioResets, "cmap-tokio+resets", resets: true, checks: false, Extra::Nothing
);
variant!(
    /// With the manager trait's default `CHECKS = true` (a no-op check).
    CmapTokioChecks, "cmap-tokio+checks", resets: false, checks: true, Extra::Nothing
);
variant!(
    /// With the flight recorder on.
    CmapTokioRecorder, "cmap-tokio+recorder", resets: false, checks: false, Extra::Recorder
);
variant!(
    /// Metrics exported to a Prometheus recorder.
    CmapTokioMetrics, "cmap-tokio+metrics", resets: false, checks: false, Extra::Metrics
);
variant!(
    /// Its log at INFO, formatted and discarded.
    CmapTokioTracingInfo, "cmap-tokio+tracing-info", resets: false, checks: false,
    Extra::Tracing(tracing::Level::INFO)
);
variant!(
    /// Its log at DEBUG (a record per checkout and check-in), formatted and
    /// discarded.
    CmapTokioTracingDebug, "cmap-tokio+tracing-debug", resets: false, checks: false,
    Extra::Tracing(tracing::Level::DEBUG)
);
