//! A `metrics::Recorder` that keeps every value, for the scenario of the
//! metrics export: installed with `metrics::with_local_recorder` around a
//! pool's `build`, it is where that pool's handles write.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// The samples of one histogram.
#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

#[derive(Default)]
struct Store {
    counters: BTreeMap<String, Arc<AtomicU64>>,
    gauges: BTreeMap<String, Arc<AtomicU64>>,
    histograms: BTreeMap<String, Arc<Samples>>,
    /// Each metric's unit and help text, by name.
    descriptions: BTreeMap<String, (Option<Unit>, String)>,
}

/// Keeps every counter, gauge and histogram registered with it, by
/// `name{label=value,...}` (labels sorted by name).
#[derive(Clone, Default)]
pub struct Recording(Arc<Mutex<Store>>);

/// `name{label=value,...}`, the labels sorted by name.
fn key_of(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Recording {
    /// The value of a counter (0 if never registered).
    pub fn counter(&self, key: &str) -> u64 {
        let store = self.0.lock().unwrap();
        store.counters.get(key).map_or(0, |c| c.load(Ordering::Acquire))
    }

    /// The value of a gauge (`None` if never registered).
    pub fn gauge(&self, key: &str) -> Option<f64> {
        let store = self.0.lock().unwrap();
        store
            .gauges
            .get(key)
            .map(|g| f64::from_bits(g.load(Ordering::Acquire)))
    }

    /// A pool's five gauges, labelled `address=<address>`: idle, in use,
    /// pending, total, waiting.
    pub fn pool_gauges(&self, address: &str) -> [f64; 5] {
        [
            "cmap_connections_idle",
            "cmap_connections_in_use",
            "cmap_connections_pending",
            "cmap_connections_total",
            "cmap_checkouts_waiting",
        ]
        .map(|name| {
            self.gauge(&format!("{name}{{address={address}}}"))
                .unwrap_or_else(|| panic!("gauge {name} of {address} registered"))
        })
    }

    /// The samples of a histogram (empty if never registered).
    pub fn histogram(&self, key: &str) -> Vec<f64> {
        let store = self.0.lock().unwrap();
        store
            .histograms
            .get(key)
            .map_or(Vec::new(), |h| h.0.lock().unwrap().clone())
    }

    /// The unit and help text a metric was described with, by name.
    pub fn description(&self, name: &str) -> Option<(Option<Unit>, String)> {
        self.0.lock().unwrap().descriptions.get(name).cloned()
    }

    fn describe(&self, name: KeyName, unit: Option<Unit>, help: SharedString) {
        let mut store = self.0.lock().unwrap();
        store
            .descriptions
            .insert(name.as_str().to_owned(), (unit, help.into_owned()));
    }

    /// Every key registered, counters, gauges and histograms.
    pub fn keys(&self) -> Vec<String> {
        let store = self.0.lock().unwrap();
        let mut keys: Vec<String> = store
            .counters
            .keys()
            .chain(store.gauges.keys())
            .chain(store.histograms.keys())
            .cloned()
            .collect();
        keys.sort();
        keys
    }
}

impl Recorder for Recording {
    fn describe_counter(&self, name: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(name, unit, help);
    }
    fn describe_gauge(&self, name: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(name, unit, help);
    }
    fn describe_histogram(&self, name: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(name, unit, help);
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut store = self.0.lock().unwrap();
        Counter::from_arc(store.counters.entry(key_of(key)).or_default().clone())
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let mut store = self.0.lock().unwrap();
        Gauge::from_arc(store.gauges.entry(key_of(key)).or_default().clone())
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut store = self.0.lock().unwrap();
        Histogram::from_arc(store.histograms.entry(key_of(key)).or_default().clone())
    }
}
