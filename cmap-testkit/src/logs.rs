//! The spec's log messages out of a real pool: a `tracing` subscriber that
//! records the pool's messages, and the transcript a pool that checks out,
//! checks in and closes must log.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Metadata, Subscriber};

/// One message's fields, by name, as text.
pub type Fields = BTreeMap<String, String>;

/// Records the fields of every DEBUG-or-above event of target
/// `cmap::connection`.
#[derive(Clone, Default)]
pub struct Capture(pub Arc<Mutex<Vec<Fields>>>);

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == cmap_async::LOG_TARGET && *metadata.level() <= tracing::Level::DEBUG
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        self.0.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The connection string the pool under test is built with: a password
/// that must never be logged, `maxPoolSize=3` and `minPoolSize=0`.
pub const CONNECTION_STRING: &str = "mongodb://user:secret@fake/?maxPoolSize=3&minPoolSize=0";

/// Checks what a pool built with [`CONNECTION_STRING`] logged for: a
/// checkout, its check-in, a checkout with a zero timeout, its check-in,
/// and close.
///
/// # Panics
///
/// On the first message or field that is not the spec's.
pub fn check_transcript(logged: &[Fields]) {
    let messages: Vec<&str> = logged.iter().map(|f| f["message"].as_str()).collect();
    assert_eq!(
        messages,
        [
            "Connection pool created",
            "Connection pool ready",
            "Connection checkout started",
            "Connection created",
            "Connection ready",
            "Connection checked out",
            "Connection checked in",
            "Connection checkout started",
            "Connection checked out",
            "Connection checked in",
            "Connection closed",
            "Connection pool closed",
        ]
    );
    assert_eq!(logged[0]["maxPoolSize"], "3");
    assert_eq!(logged[0]["minPoolSize"], "0");
    for fields in logged {
        assert_eq!(fields["serverHost"], "fake");
        assert_eq!(fields["serverPort"], "27017");
        assert!(fields.values().all(|v| !v.contains("secret")), "{fields:?}");
    }
    assert_eq!(logged[3]["driverConnectionId"], "1");
    assert!(logged[4].contains_key("durationMS"));
    assert_eq!(logged[10]["reason"], "Connection pool was closed");
}

/// Records the INFO and WARN messages of target `cmap::connection`
/// (leak detection's), each with its `level`, from every thread: the
/// process's global subscriber, installed once by [`notices`]. It records
/// no DEBUG message, so the pools of other tests running meanwhile still
/// find the spec's messages off and build no events for them.
#[derive(Clone, Default)]
pub struct Notices(pub Arc<Mutex<Vec<Fields>>>);

impl Notices {
    /// The messages recorded so far whose `serverHost` is `host`.
    pub fn of_host(&self, host: &str) -> Vec<Fields> {
        let all = self.0.lock().unwrap();
        all.iter()
            .filter(|f| f.get("serverHost").is_some_and(|h| h == host))
            .cloned()
            .collect()
    }
}

impl Subscriber for Notices {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == cmap_async::LOG_TARGET && *metadata.level() <= tracing::Level::INFO
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields::new();
        fields.insert("level".into(), event.metadata().level().to_string());
        event.record(&mut Visitor(&mut fields));
        self.0.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The process's [`Notices`], installed as the global `tracing`
/// subscriber at the first call: the messages of a pool's background
/// task come from threads a scoped subscriber does not see.
///
/// # Panics
///
/// If another global subscriber was installed first.
pub fn notices() -> Notices {
    static NOTICES: std::sync::OnceLock<Notices> = std::sync::OnceLock::new();
    NOTICES
        .get_or_init(|| {
            let notices = Notices::default();
            tracing::subscriber::set_global_default(notices.clone())
                .expect("no other global subscriber in a test binary running the scenarios");
            notices
        })
        .clone()
}
