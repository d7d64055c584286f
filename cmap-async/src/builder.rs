//! Building a pool: address, options (typed, from a connection string, or
//! whole), runtime and the adapter's own settings.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cmap_core::{Address, Reconnect};

use crate::error::BuildError;
use crate::events::Subscriber;
use crate::leak;
use crate::manager::ManageConnection;
use crate::pool::Pool;
use crate::runtime::Runtime;
use crate::setters::Settings;
use crate::shared::Shared;
use crate::shared::Timeouts;
use crate::timer;

/// The connect timeout when none is set: the MongoDB default
/// `connectTimeoutMS` (10 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a manager's [`reset`](crate::ManageConnection::reset) may
/// take by default (10 s, as `connectTimeoutMS`): past it the connection
/// is closed, so a server that stopped answering holds no slot.
pub const DEFAULT_RESET_TIMEOUT: Duration = Duration::from_secs(10);

/// The wait-queue timeout of a pool built without explicit
/// [`PoolOptions`](crate::PoolOptions): 30 s, as HikariCP, psycopg_pool, bb8, r2d2 and sqlx
/// wait. (The spec's default, and a connection string's
/// `waitQueueTimeoutMS=0`, is no limit: a request on a saturated pool
/// would hang forever.)
pub const DEFAULT_WAIT_QUEUE_TIMEOUT: Duration = Duration::from_secs(30);

/// The reconnect backoff of a pool built without explicit
/// [`PoolOptions`](crate::PoolOptions): the core's [`Reconnect::default`]
/// (100 ms doubling up to 10 s for `minPoolSize`; while checkouts wait,
/// one probe at a time, 15 ms doubling up to 60 ms), never giving up,
/// because a pool without a topology monitor has nobody else to mark it
/// ready again once the server is back.
///
/// ```
/// let r = cmap_async::default_reconnect();
/// assert_eq!(r.give_up_after, None);
/// assert_eq!(r.max_delay_while_waiting, std::time::Duration::from_millis(60));
/// ```
pub fn default_reconnect() -> Reconnect {
    Reconnect {
        give_up_after: None,
        ..Reconnect::default()
    }
}

/// Anything that names the server: an [`Address`], `"host:port"`, or a
/// socket address.
///
/// ```
/// use cmap_async::{Address, ToAddress};
/// assert_eq!("db:5432".to_address().unwrap(), Address::new("db", 5432));
/// let local: std::net::SocketAddr = "127.0.0.1:27017".parse().unwrap();
/// assert_eq!(local.to_address().unwrap().to_string(), "127.0.0.1:27017");
/// assert!("db:port".to_address().is_err());
/// ```
pub trait ToAddress {
    /// The address, or why it is not one.
    fn to_address(self) -> Result<Address, BuildError>;
}

impl ToAddress for Address {
    fn to_address(self) -> Result<Address, BuildError> {
        Ok(self)
    }
}

impl ToAddress for &Address {
    fn to_address(self) -> Result<Address, BuildError> {
        Ok(self.clone())
    }
}

impl ToAddress for &str {
    fn to_address(self) -> Result<Address, BuildError> {
        self.parse()
            .map_err(|e: std::num::ParseIntError| BuildError::Address {
                given: self.to_owned(),
                reason: format!("bad port: {e}"),
            })
    }
}

impl ToAddress for String {
    fn to_address(self) -> Result<Address, BuildError> {
        self.as_str().to_address()
    }
}

impl ToAddress for SocketAddr {
    fn to_address(self) -> Result<Address, BuildError> {
        Ok(Address::new(self.ip().to_string(), self.port()))
    }
}

/// Builds a [`Pool`].
///
/// Defaults: the core's options (the spec's: maxPoolSize 100, minPoolSize
/// 0, maxConnecting 2, no idle limit; a background run every second) with
/// what a pool used without a topology monitor needs:
///
/// - a [`DEFAULT_WAIT_QUEUE_TIMEOUT`] of 30 s (the spec's default is no
///   limit);
/// - a reconnect backoff ([`default_reconnect`]), so that a pool cleared
///   by a failed connect marks itself ready again;
/// - checkouts that keep waiting through a network failure
///   ([`PoolOptionsBuilder::keep_waiting_on_overload`](crate::PoolOptionsBuilder::keep_waiting_on_overload)): a server down for
///   less than the wait timeout fails no checkout;
/// - a [`DEFAULT_CONNECT_TIMEOUT`] (an establishment is also abandoned
///   when the checkout that asked for it times out and nobody else needs
///   it);
/// - a random jitter seed for each pool, unless one is set;
/// - the pool marked ready once built.
///
/// Whole [`PoolOptions`](crate::PoolOptions) given with [`options`](Self::options) are used as
/// they are (a random seed is still drawn if they set none).
///
/// In this API `None` means no limit and `Duration::ZERO` means do not
/// wait, for every timeout.
///
/// # Example
///
/// ```
/// # use cmap_async::{BuildError, ManageConnection, Pool, Runtime};
/// # use std::time::Duration;
/// fn build<M: ManageConnection, R: Runtime + Default>(manager: M) -> Result<Pool<M, R>, BuildError> {
///     Pool::builder()
///         .address("db.example:27017")
///         .max_pool_size(10)
///         .wait_queue_timeout(Duration::from_secs(2))
///         .build(manager)
/// }
/// ```
#[must_use = "a builder does nothing until `build`"]
pub struct PoolBuilder<M, R> {
    settings: Settings,
    callbacks: Vec<Subscriber>,
    _types: PhantomData<fn() -> (M, R)>,
}

impl<M: ManageConnection, R: Runtime> Default for PoolBuilder<M, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: ManageConnection, R: Runtime> PoolBuilder<M, R> {
    /// A builder with the defaults above.
    pub fn new() -> Self {
        PoolBuilder {
            settings: Settings::default(),
            callbacks: Vec::new(),
            _types: PhantomData,
        }
    }

    crate::pool_builder_setters!(own);

    /// Builds the pool on `R::default()` (for tokio: the current runtime)
    /// and starts its background task.
    ///
    /// # Errors
    ///
    /// No address, a bad address, or invalid options.
    pub fn build(self, manager: M) -> Result<Pool<M, R>, BuildError>
    where
        R: Default,
    {
        self.build_on(manager, R::default())
    }

    /// Builds the pool on `R::default()` and waits until it holds
    /// minPoolSize open connections (with minPoolSize 0, until one
    /// checkout succeeds), at most `timeout`: a service then fails at
    /// start, with the cause, when its database is unreachable
    /// (HikariCP's `initializationFailTimeout`, psycopg_pool's
    /// `open(wait=True)`). See [`Pool::wait_ready`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use cmap_async::{BuildError, ManageConnection, Pool, Runtime};
    /// async fn start<M: ManageConnection, R: Runtime + Default>(m: M) -> Result<Pool<M, R>, BuildError> {
    ///     Pool::builder()
    ///         .address("db:5432")
    ///         .min_pool_size(2)
    ///         .build_and_wait(m, Duration::from_secs(10))
    ///         .await
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build), and [`BuildError::NotReady`] at the
    /// timeout (the pool is closed then).
    pub async fn build_and_wait(self, manager: M, timeout: Duration) -> Result<Pool<M, R>, BuildError>
    where
        R: Default,
    {
        let pool = self.build(manager)?;
        match pool.wait_ready(timeout).await {
            Ok(()) => Ok(pool),
            Err(not_ready) => {
                pool.close();
                Err(not_ready.into())
            }
        }
    }

    /// Builds the pool on the runtime `rt` and starts its background task.
    ///
    /// ```
    /// # use cmap_async::{BuildError, ManageConnection, Pool, Runtime};
    /// fn build<M: ManageConnection, R: Runtime>(manager: M, rt: R) -> Result<Pool<M, R>, BuildError> {
    ///     Pool::builder().address("db:27017").start_paused(true).build_on(manager, rt)
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// No address, a bad address, or invalid options.
    pub fn build_on(mut self, manager: M, rt: R) -> Result<Pool<M, R>, BuildError> {
        let parts = self
            .settings
            .parts(|| manager.address(), self.callbacks, rt.now())?;
        let timeouts = Timeouts {
            connect: self.settings.connect_timeout,
            reset: self.settings.reset_timeout,
        };
        let shared = Shared::new(
            manager,
            rt,
            parts.address,
            parts.options,
            timeouts,
            parts.core,
            parts.events,
            parts.leaks,
            #[cfg(feature = "recorder")]
            parts.flight,
            // Before the ready input: its measures count.
            #[cfg(feature = "metrics")]
            parts.metrics,
        );
        let start_paused = self.settings.start_paused;
        shared.input(|inner, now| {
            if !start_paused {
                // A new pool is not closed: this cannot fail.
                let _ = inner.core.handle_ready(now);
            }
        });
        #[cfg(feature = "recorder")]
        if let Some(flight) = &shared.flight {
            // After the first input: its outputs are drained, so the
            // recording begins at once, with the pool as built.
            let capacity = flight.capacity;
            shared.input(|inner, now| inner.core.start_recording(now, capacity));
        }
        shared.rt.spawn(timer::run(Arc::downgrade(&shared), 0));
        if shared.leaks.is_some() {
            shared.rt.spawn(leak::watch(Arc::downgrade(&shared), 0));
        }
        Ok(Pool::from_shared(shared))
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use cmap_core::{ConnectionStringError, EstablishErrorKind, OptionsError};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Level, Metadata, Subscriber};

    use super::*;

    /// A manager that is never asked to connect: these tests stop at `build`.
    struct Never;

    impl ManageConnection for Never {
        type Connection = ();
        type Error = std::io::Error;
        fn connect(&self) -> impl Future<Output = Result<(), std::io::Error>> + Send {
            std::future::ready(Ok(()))
        }
        fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
            EstablishErrorKind::of_io(e)
        }
    }

    /// A runtime that runs nothing: a failed `build` spawns no task.
    #[derive(Clone, Default)]
    struct NoRuntime;

    impl Runtime for NoRuntime {
        fn spawn<F>(&self, _: F)
        where
            F: Future<Output = ()> + Send + 'static,
        {
            panic!("a failed build spawns nothing");
        }
        fn sleep_until(&self, _: Instant) -> impl Future<Output = ()> + Send + 'static {
            std::future::pending()
        }
    }

    /// The warnings logged, each as its level and every field's text.
    #[derive(Clone, Default)]
    struct Warnings(Arc<Mutex<Vec<String>>>);

    struct Text<'a>(&'a mut String);

    impl Visit for Text<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.push_str(&format!(" {}={value}", field.name()));
        }
    }

    impl Subscriber for Warnings {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut text = format!("{}", event.metadata().level());
            event.record(&mut Text(&mut text));
            self.0.lock().unwrap().push(text);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// Builds from `uri` with `read`, returning the build's error and the
    /// records logged.
    fn build(
        uri: &str,
        read: fn(PoolBuilder<Never, NoRuntime>, &str) -> PoolBuilder<Never, NoRuntime>,
    ) -> (Option<BuildError>, Vec<String>) {
        let warnings = Warnings::default();
        let builder = tracing::subscriber::with_default(warnings.clone(), || {
            read(PoolBuilder::new().address("db:27017"), uri)
        });
        // Stop before a pool is built: options first, as build_on does.
        let error = match builder.settings.option_error {
            Some(e) => Some(BuildError::from(e)),
            None => builder.settings.options.build().err().map(BuildError::from),
        };
        let records = warnings.0.lock().unwrap().clone();
        (error, records)
    }

    #[test]
    fn an_unknown_option_is_a_warning_naming_the_nearest_known_one() {
        let (error, records) = build("mongodb://db/?maxPoolSizee=3", PoolBuilder::connection_string);
        assert_eq!(error, None);
        assert_eq!(records.len(), 1, "{records:?}");
        let w = &records[0];
        assert!(w.starts_with(&Level::WARN.to_string()), "{w}");
        assert!(w.contains("maxPoolSizee"), "{w}");
        assert!(w.contains("did you mean maxPoolSize?"), "{w}");
        // A driver's option is no warning.
        let (error, records) = build(
            "mongodb://db/?appName=app&tls=true",
            PoolBuilder::connection_string,
        );
        assert_eq!((error, records.len()), (None, 0));
    }

    #[test]
    fn strict_mode_makes_an_unknown_option_an_error() {
        let (error, records) = build(
            "mongodb://db/?maxPoolSizee=3",
            PoolBuilder::connection_string_strict,
        );
        let Some(BuildError::Options(OptionsError::Unknown { option, suggestion })) = error else {
            panic!("{error:?}");
        };
        assert_eq!(
            (option.as_str(), suggestion),
            ("maxPoolSizee", Some("maxPoolSize"))
        );
        assert!(records.is_empty(), "an error, not also a warning: {records:?}");
    }

    #[test]
    fn a_string_that_is_not_a_mongodb_uri_fails_the_build() {
        for uri in ["this is not a uri", "nohost", "postgres://app:pw@db:5432/app"] {
            let (error, _) = build(uri, PoolBuilder::connection_string);
            assert!(
                matches!(
                    error,
                    Some(BuildError::Options(OptionsError::ConnectionString(
                        ConnectionStringError::NotAUri | ConnectionStringError::Scheme { .. }
                    )))
                ),
                "{uri}: {error:?}"
            );
        }
        let (error, _) = build(
            "mongodb://db/?waitQueueTimeoutMS=99999999999999999999",
            PoolBuilder::connection_string,
        );
        let text = error.unwrap().to_string();
        assert!(
            text.contains("too large") && text.contains("18446744073709551615"),
            "{text}"
        );
    }

    #[test]
    fn the_wait_queue_timeout_stays_30_s_unless_the_string_sets_it() {
        let b = PoolBuilder::<Never, NoRuntime>::new().connection_string("mongodb://db/?maxPoolSize=3");
        let o = b.settings.options.build().unwrap();
        assert_eq!(o.wait_queue_timeout(), Some(DEFAULT_WAIT_QUEUE_TIMEOUT));
        let b =
            PoolBuilder::<Never, NoRuntime>::new().connection_string("mongodb://db/?waitQueueTimeoutMS=0");
        assert_eq!(
            b.settings.options.build().unwrap().wait_queue_timeout(),
            None,
            "the spec's 0: no limit"
        );
        let b = PoolBuilder::<Never, NoRuntime>::new().wait_queue_timeout(None);
        assert_eq!(b.settings.options.build().unwrap().wait_queue_timeout(), None);
    }

    #[test]
    fn no_warning_or_error_holds_any_part_of_a_password() {
        for password in [
            "Qx7?Zq9",
            "Qx7@Zq9",
            "Qx7/Zq9",
            "Qx7%Zq9",
            "Qx7%3F%40%2F%25Zq9",
            "123?maxPoolSizee=Qx7Zq9",
        ] {
            for rest in [
                "db/?maxPoolSizee=3",
                "db/?maxPoolSize=-1",
                "db:port/",
                "db/?waitQueueTimeoutMS=99999999999999999999",
            ] {
                let uri = format!("mongodb://app:{password}@{rest}");
                for read in [
                    PoolBuilder::connection_string,
                    PoolBuilder::connection_string_strict,
                ] {
                    let (error, records) = build(&uri, read);
                    let said = records
                        .into_iter()
                        .chain(error.iter().flat_map(|e| [e.to_string(), format!("{e:?}")]));
                    for text in said {
                        for piece in ["Qx7", "Zq9", "123"] {
                            assert!(!text.contains(piece), "{uri:?} said {text:?}");
                        }
                    }
                }
            }
        }
    }
}
