//! Pool options: the spec's `ConnectionPoolOptions` plus the extensions of
//! this crate, their defaults, and their validation.
//!
//! Every option can be set through the typed builder or by its spec name
//! (`maxPoolSize`, ...) as found in a MongoDB connection string. A bad value
//! is an [`OptionsError`] naming the option and the value; nothing panics.

use std::time::Duration;

use crate::connection_string::{ConnectionString, ConnectionStringError};

/// What the pool does when establishing a connection fails with an error
/// that carries no backpressure label (an authentication failure, a DNS
/// failure, an error the server answered the `hello` with).
///
/// The spec hands an establishment error to SDAM, whose reaction to such
/// an error is to clear the pool. A pool used without SDAM gets that
/// reaction from the core itself with [`EstablishFailure::ClearPool`].
/// A labelled error ([`EstablishErrorKind::Network`](crate::EstablishErrorKind))
/// never clears the pool, whatever this says: SDAM ignores it (spec:
/// "Backpressure-enabled").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum EstablishFailure {
    /// Clear the pool (pause it, fail every waiter with a retryable
    /// `PoolClearedError`), as SDAM does for a pre-handshake error.
    #[default]
    ClearPool,
    /// Leave the pool as it is: only the checkout that asked for the
    /// connection fails. New attempts are spaced by the reconnect backoff.
    KeepReady,
}

/// Exponential backoff for reconnecting after establishment failures, with a
/// point where the pool gives up and says so loudly (psycopg3's
/// `reconnect_timeout` / `reconnect_failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub struct Reconnect {
    /// The first delay after a failure.
    pub initial_delay: Duration,
    /// The largest delay; each consecutive failure doubles the previous one.
    pub max_delay: Duration,
    /// After failing for this long without a success, stop retrying on
    /// its own and emit [`crate::Event::ReconnectGaveUp`].
    pub give_up_after: Option<Duration>,
    /// The longest pause between attempts while checkouts wait for a
    /// connection. The pause doubles from 15 ms at each failure up to this
    /// (between half and all of it, at random), with one connect at a time
    /// after a network error: a refusing server gets about
    /// 1 ÷ (0.75 × this) connects a second from the pool, and one that
    /// comes back serves the waiters about 0.4 × this later on average.
    /// Attempts for `minPoolSize` alone use the full backoff.
    pub max_delay_while_waiting: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect {
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(10),
            give_up_after: Some(Duration::from_secs(300)),
            max_delay_while_waiting: Duration::from_millis(60),
        }
    }
}

/// An adaptive establishment pace (an extension; see
/// [`PoolOptionsBuilder::adaptive_connecting`]): between `min` and `max`
/// connections established at once, more while connects succeed at their
/// usual latency, back to `min` at once when connects slow down, and to a
/// single probe while the server refuses them (a labelled failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub struct AdaptiveConnecting {
    /// The fewest connections established at once: the pace at first,
    /// after a congestion signal, and once a probe gets through after
    /// refusals (the spec's default `maxConnecting` is 2).
    pub min: u32,
    /// The most connections established at once (maxPoolSize bounds it
    /// too).
    pub max: u32,
}

/// Validated pool options. Build them with [`PoolOptions::builder`] or
/// [`PoolOptions::from_connection_string`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "recorder", derive(serde::Serialize, serde::Deserialize))]
pub struct PoolOptions {
    pub(crate) max_pool_size: u32,
    pub(crate) min_pool_size: u32,
    pub(crate) max_idle_time: Option<Duration>,
    pub(crate) max_connecting: u32,
    pub(crate) adaptive_connecting: Option<AdaptiveConnecting>,
    pub(crate) wait_queue_timeout: Option<Duration>,
    pub(crate) load_balanced: bool,
    pub(crate) maintenance_interval: Option<Duration>,
    pub(crate) max_lifetime: Option<Duration>,
    pub(crate) lifetime_jitter: f64,
    pub(crate) establish_failure: EstablishFailure,
    pub(crate) keep_waiting_on_overload: bool,
    pub(crate) reconnect: Option<Reconnect>,
    pub(crate) seed: Option<u64>,
    /// The spec options the user set, by spec name, for `PoolCreatedEvent`
    /// and the "Connection pool created" log message.
    #[cfg_attr(feature = "recorder", serde(with = "crate::recorder::codec::option_names"))]
    pub(crate) explicit: Vec<(&'static str, u64)>,
}

/// The spec's defaults (maxPoolSize 100, minPoolSize 0, maxConnecting 2, no
/// idle limit, no wait-queue timeout) and a one-second background run.
impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_pool_size: 100,
            min_pool_size: 0,
            max_idle_time: None,
            max_connecting: 2,
            adaptive_connecting: None,
            wait_queue_timeout: None,
            load_balanced: false,
            maintenance_interval: Some(Duration::from_secs(1)),
            max_lifetime: None,
            lifetime_jitter: 0.0,
            establish_failure: EstablishFailure::ClearPool,
            keep_waiting_on_overload: false,
            reconnect: None,
            seed: None,
            explicit: Vec::new(),
        }
    }
}

impl PoolOptions {
    /// A builder starting from the defaults.
    pub fn builder() -> PoolOptionsBuilder {
        PoolOptionsBuilder::default()
    }

    /// Options from a MongoDB connection string
    /// (`mongodb://host/?maxPoolSize=5&minPoolSize=1`), as
    /// [`ConnectionString::parse`] reads it: anything that is not a
    /// well-formed `mongodb://` or `mongodb+srv://` string is an error.
    /// Option names are case-insensitive, as in the URI spec. Options of a
    /// MongoDB driver that the pool does not use (`appName`, `tls`, ...)
    /// are left for the driver; with `strict`, an option that is neither
    /// is an error ([`OptionsError::Unknown`], naming the nearest known
    /// option), and without it is ignored (the
    /// [`unknown_options`](ConnectionString::unknown_options) of the
    /// parsed string are the ones to warn about).
    pub fn from_connection_string(uri: &str, strict: bool) -> Result<PoolOptions, OptionsError> {
        let mut builder = PoolOptions::builder();
        ConnectionString::parse(uri)?.apply_to(&mut builder, strict)?;
        builder.build()
    }

    /// `maxPoolSize`: the most connections (pending, available and in
    /// use) the pool may hold; 0 means no limit.
    pub fn max_pool_size(&self) -> u32 {
        self.max_pool_size
    }
    /// `minPoolSize`: the pool is populated up to this many connections
    /// while it is ready.
    pub fn min_pool_size(&self) -> u32 {
        self.min_pool_size
    }
    /// `maxIdleTimeMS`: how long a connection may stay available before it
    /// perishes; `None` is no limit.
    pub fn max_idle_time(&self) -> Option<Duration> {
        self.max_idle_time
    }
    /// `maxConnecting`: how many connections may be established at once
    /// (unless [`adaptive_connecting`](Self::adaptive_connecting) is set).
    pub fn max_connecting(&self) -> u32 {
        self.max_connecting
    }
    /// The adaptive establishment pace, if set: it replaces
    /// `maxConnecting`.
    pub fn adaptive_connecting(&self) -> Option<AdaptiveConnecting> {
        self.adaptive_connecting
    }
    /// `waitQueueTimeoutMS`: how long a checkout may wait; `None` is no limit.
    pub fn wait_queue_timeout(&self) -> Option<Duration> {
        self.wait_queue_timeout
    }
    /// Load-balanced mode: generations are kept per service id.
    pub fn load_balanced(&self) -> bool {
        self.load_balanced
    }
    /// The pause between background runs; `None` means runs only happen
    /// when something asks for one at once (ready, clear).
    pub fn maintenance_interval(&self) -> Option<Duration> {
        self.maintenance_interval
    }
    /// The longest a connection lives before it is retired.
    pub fn max_lifetime(&self) -> Option<Duration> {
        self.max_lifetime
    }
    /// The reaction to an establishment error.
    pub fn establish_failure(&self) -> EstablishFailure {
        self.establish_failure
    }
    /// Whether a checkout whose connection failed with a labelled
    /// (overload) error keeps waiting for the next attempt.
    pub fn keep_waiting_on_overload(&self) -> bool {
        self.keep_waiting_on_overload
    }
    /// The reconnect backoff, if the pool re-readies itself after failures.
    pub fn reconnect(&self) -> Option<Reconnect> {
        self.reconnect
    }
    /// The seed of the jitter generator, if one was set (a driver draws a
    /// random one at build otherwise; the core alone uses a fixed one).
    pub fn seed(&self) -> Option<u64> {
        self.seed
    }
    /// The same options with the jitter seed `seed`: how a driver gives a
    /// pool the random seed it drew.
    pub fn with_seed(mut self, seed: u64) -> PoolOptions {
        self.seed = Some(seed);
        self
    }
    /// The spec options the user set, by spec name, in the order set.
    pub fn explicit_options(&self) -> &[(&'static str, u64)] {
        &self.explicit
    }
    /// Whether the pool has a `maxPoolSize`.
    pub(crate) fn is_capped(&self) -> bool {
        self.max_pool_size > 0
    }
}

/// Builds [`PoolOptions`], validating them once in [`build`](Self::build).
#[derive(Debug, Clone, Default)]
pub struct PoolOptionsBuilder {
    options: PoolOptions,
}

/// The spec's pool options, by their connection string names.
pub(crate) const SPEC_OPTIONS: [&str; 5] = [
    "maxPoolSize",
    "minPoolSize",
    "maxIdleTimeMS",
    "maxConnecting",
    "waitQueueTimeoutMS",
];

impl PoolOptionsBuilder {
    fn note(&mut self, name: &'static str, value: u64) {
        self.options.explicit.retain(|(n, _)| *n != name);
        self.options.explicit.push((name, value));
    }

    /// `maxPoolSize` (0: no limit).
    pub fn max_pool_size(mut self, value: u32) -> Self {
        self.options.max_pool_size = value;
        self.note("maxPoolSize", value.into());
        self
    }
    /// `minPoolSize`.
    pub fn min_pool_size(mut self, value: u32) -> Self {
        self.options.min_pool_size = value;
        self.note("minPoolSize", value.into());
        self
    }
    /// `maxIdleTimeMS`: `None` is no limit; a duration is the limit, so
    /// `Duration::ZERO` keeps no connection idle. (In a connection string,
    /// the spec's `0` means no limit.)
    pub fn max_idle_time(mut self, value: impl Into<Option<Duration>>) -> Self {
        let value = value.into();
        self.options.max_idle_time = value;
        self.note("maxIdleTimeMS", value.map_or(0, millis));
        self
    }
    /// `maxConnecting` (must be > 0).
    pub fn max_connecting(mut self, value: u32) -> Self {
        self.options.max_connecting = value;
        self.note("maxConnecting", value.into());
        self
    }
    /// An adaptive establishment pace instead of the fixed
    /// `maxConnecting` (`None`, the default: the spec's fixed
    /// `maxConnecting`). The pool starts `min` connections at once; each
    /// connect that succeeds at about its usual latency doubles that (up
    /// to `max`; after a fall, doubling up to half the pace the fall found,
    /// then one more per success). A connect that takes more than twice
    /// the recent fastest connect plus 10 ms brings it back to `min` at
    /// once; one that fails with a backpressure label (the server refused
    /// it: overloaded, or its limiter) brings it to a single connect at a
    /// time until one succeeds, then `min`. Connects in flight are never
    /// abandoned: the pace gates new ones. A clear brings it back to `min`
    /// too: the server it learnt about failed. [`Stats::connecting_limit`]
    /// says where it stands.
    ///
    /// [`Stats::connecting_limit`]: crate::Stats::connecting_limit
    pub fn adaptive_connecting(mut self, value: impl Into<Option<AdaptiveConnecting>>) -> Self {
        self.options.adaptive_connecting = value.into();
        self
    }
    /// `waitQueueTimeoutMS`: `None` waits without limit; a duration is
    /// the limit, so `Duration::ZERO` does not wait (a checkout gets an
    /// available connection or fails at once). (In a connection string,
    /// the spec's `0` means no limit.)
    pub fn wait_queue_timeout(mut self, value: impl Into<Option<Duration>>) -> Self {
        let value = value.into();
        self.options.wait_queue_timeout = value;
        self.note("waitQueueTimeoutMS", value.map_or(0, millis));
        self
    }
    /// Load-balanced mode (generations per service id).
    pub fn load_balanced(mut self, value: bool) -> Self {
        self.options.load_balanced = value;
        self
    }
    /// The pause between background runs; `None` never runs on a timer.
    pub fn maintenance_interval(mut self, value: Option<Duration>) -> Self {
        self.options.maintenance_interval = value;
        self
    }
    /// Retire connections after `lifetime`, shortened by a random fraction
    /// of up to `jitter` (0.0..=1.0) so that connections made together do
    /// not all expire together.
    pub fn max_lifetime(mut self, lifetime: Duration, jitter: f64) -> Self {
        self.options.max_lifetime = Some(lifetime);
        self.options.lifetime_jitter = jitter;
        self
    }
    /// The reaction to an establishment error without backpressure
    /// labels.
    pub fn establish_failure(mut self, value: EstablishFailure) -> Self {
        self.options.establish_failure = value;
        self
    }
    /// What a checkout does when the connection made for it fails with a
    /// labelled (overload) error: with `false` (the spec's behaviour) it
    /// fails with that error; with `true` it keeps waiting, until its own
    /// deadline, for the pool's next attempt or a returned connection.
    /// Either way the pool is not cleared.
    pub fn keep_waiting_on_overload(mut self, value: bool) -> Self {
        self.options.keep_waiting_on_overload = value;
        self
    }
    /// Re-ready the pool on its own after establishment failures.
    pub fn reconnect(mut self, value: Option<Reconnect>) -> Self {
        self.options.reconnect = value;
        self
    }
    /// Seed of the generator behind lifetime and backoff jitter, so that a
    /// replay with the same seed is exact. Unset, a driver draws a random
    /// one for each pool, so that pools failing together do not retry
    /// together.
    pub fn seed(mut self, value: u64) -> Self {
        self.options.seed = Some(value);
        self
    }

    /// Sets a spec option by its name (case-insensitive) from its text.
    /// Returns `Ok(false)` for a name that is not a pool option.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, OptionsError> {
        let Some(option) = SPEC_OPTIONS.iter().find(|o| o.eq_ignore_ascii_case(name)) else {
            return Ok(false);
        };
        let parsed = parse_count(option, value)?;
        let builder = std::mem::take(self);
        *self = match *option {
            "maxPoolSize" => builder.max_pool_size(narrow(option, value, parsed)?),
            "minPoolSize" => builder.min_pool_size(narrow(option, value, parsed)?),
            "maxConnecting" => builder.max_connecting(narrow(option, value, parsed)?),
            // The spec's 0 is no limit.
            "maxIdleTimeMS" => builder.max_idle_time(nonzero_millis(parsed)),
            _ => builder.wait_queue_timeout(nonzero_millis(parsed)),
        };
        Ok(true)
    }

    /// Validates and returns the options.
    pub fn build(self) -> Result<PoolOptions, OptionsError> {
        let o = self.options;
        if o.max_connecting == 0 {
            return Err(OptionsError::Invalid {
                option: "maxConnecting",
                value: "0".into(),
                reason: "must be greater than 0",
            });
        }
        if let Some(a) = o.adaptive_connecting {
            if a.min == 0 || a.max < a.min {
                return Err(OptionsError::Invalid {
                    option: "adaptiveConnecting",
                    value: format!("{}..{}", a.min, a.max),
                    reason: "needs 0 < min <= max",
                });
            }
        }
        if o.is_capped() && o.min_pool_size > o.max_pool_size {
            return Err(OptionsError::MinExceedsMax {
                min: o.min_pool_size,
                max: o.max_pool_size,
            });
        }
        if !(0.0..=1.0).contains(&o.lifetime_jitter) {
            return Err(OptionsError::Invalid {
                option: "maxLifetimeJitter",
                value: o.lifetime_jitter.to_string(),
                reason: "must be between 0.0 and 1.0",
            });
        }
        if o.maintenance_interval.is_some_and(|d| d.is_zero()) {
            return Err(OptionsError::Invalid {
                option: "maintenanceInterval",
                value: "0".into(),
                reason: "must be greater than 0 (use None to never run)",
            });
        }
        if let Some(r) = o.reconnect {
            if r.initial_delay.is_zero() || r.max_delay < r.initial_delay {
                return Err(OptionsError::Invalid {
                    option: "reconnect",
                    value: format!("{:?}..{:?}", r.initial_delay, r.max_delay),
                    reason: "needs 0 < initial_delay <= max_delay",
                });
            }
            if r.max_delay_while_waiting.is_zero() {
                return Err(OptionsError::Invalid {
                    option: "reconnect",
                    value: "max_delay_while_waiting: 0".into(),
                    reason: "needs a pause between attempts greater than 0",
                });
            }
        }
        Ok(o)
    }
}

fn nonzero_millis(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Parses a non-negative integer; the spec allows no fractions or signs.
fn parse_count(option: &'static str, value: &str) -> Result<u64, OptionsError> {
    let trimmed = value.trim();
    if trimmed.starts_with('-') {
        return Err(OptionsError::Invalid {
            option,
            value: value.into(),
            reason: "must not be negative",
        });
    }
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only: the one way to fail is to overflow.
        return trimmed.parse::<u64>().map_err(|_| OptionsError::TooLarge {
            option,
            value: value.into(),
            limit: u64::MAX,
        });
    }
    Err(OptionsError::Invalid {
        option,
        value: value.into(),
        reason: "is not a non-negative integer",
    })
}

fn narrow(option: &'static str, value: &str, parsed: u64) -> Result<u32, OptionsError> {
    u32::try_from(parsed).map_err(|_| OptionsError::TooLarge {
        option,
        value: value.into(),
        limit: u32::MAX.into(),
    })
}

/// An invalid pool option, naming the option and the value.
///
/// No variant ever quotes a password or a part of one: text of a
/// connection string that may be one is shown as
/// [`REDACTED`](crate::REDACTED).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// The value is out of the option's range or not a number.
    #[error("invalid value {value:?} for pool option {option}: {reason}")]
    Invalid {
        /// The option's spec name.
        option: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The value is a non-negative integer larger than the option allows.
    #[error("invalid value {value:?} for pool option {option}: a non-negative integer that is too large (the limit is {limit})")]
    TooLarge {
        /// The option's spec name.
        option: &'static str,
        /// The value as given.
        value: String,
        /// The largest value the option takes.
        limit: u64,
    },
    /// `minPoolSize` is larger than a non-zero `maxPoolSize`.
    #[error("minPoolSize ({min}) must not exceed maxPoolSize ({max})")]
    MinExceedsMax {
        /// The minPoolSize given.
        min: u32,
        /// The maxPoolSize given.
        max: u32,
    },
    /// In strict mode, a connection string option that is neither a pool
    /// option nor a known MongoDB driver option.
    #[error("unknown connection string option {option:?}{}", did_you_mean(.suggestion))]
    Unknown {
        /// The option's name as given.
        option: String,
        /// The known option nearest to it, if it looks like a typo of one.
        suggestion: Option<&'static str>,
    },
    /// The connection string itself is malformed.
    #[error(transparent)]
    ConnectionString(#[from] ConnectionStringError),
}

fn did_you_mean(suggestion: &Option<&'static str>) -> String {
    suggestion.map_or_else(String::new, |s| format!(" (did you mean {s}?)"))
}

impl OptionsError {
    /// The same error with the value it quotes replaced by
    /// [`REDACTED`](crate::REDACTED).
    pub(crate) fn redacted(self) -> OptionsError {
        let hidden = || crate::REDACTED.to_owned();
        match self {
            OptionsError::Invalid { option, reason, .. } => OptionsError::Invalid {
                option,
                value: hidden(),
                reason,
            },
            OptionsError::TooLarge { option, limit, .. } => OptionsError::TooLarge {
                option,
                value: hidden(),
                limit,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_specs() {
        let o = PoolOptions::builder().build().unwrap();
        assert_eq!(o.max_pool_size(), 100);
        assert_eq!(o.min_pool_size(), 0);
        assert_eq!(o.max_connecting(), 2);
        assert_eq!(o.max_idle_time(), None);
        assert_eq!(o.wait_queue_timeout(), None);
        assert!(o.explicit_options().is_empty());
    }

    #[test]
    fn connection_string_sets_every_spec_option() {
        let o = PoolOptions::from_connection_string(
            "mongodb://h:27017/db?maxPoolSize=5&minPoolSize=1&maxConnecting=3&maxIdleTimeMS=250&waitQueueTimeoutMS=75",
            true,
        )
        .unwrap();
        assert_eq!(o.max_pool_size(), 5);
        assert_eq!(o.min_pool_size(), 1);
        assert_eq!(o.max_connecting(), 3);
        assert_eq!(o.max_idle_time(), Some(Duration::from_millis(250)));
        assert_eq!(o.wait_queue_timeout(), Some(Duration::from_millis(75)));
        assert_eq!(o.explicit_options().len(), 5);
    }

    #[test]
    fn names_are_case_insensitive() {
        let o = PoolOptions::from_connection_string("mongodb://h/?MAXPOOLSIZE=7", true).unwrap();
        assert_eq!(o.max_pool_size(), 7);
    }

    #[test]
    fn zero_means_no_limit() {
        let o = PoolOptions::from_connection_string(
            "mongodb://h/?maxPoolSize=0&maxIdleTimeMS=0&waitQueueTimeoutMS=0",
            true,
        )
        .unwrap();
        assert!(!o.is_capped());
        assert_eq!(o.max_idle_time(), None);
        assert_eq!(o.wait_queue_timeout(), None);
    }

    #[test]
    fn negative_value_names_option_and_value() {
        let err = PoolOptions::from_connection_string("mongodb://h/?maxPoolSize=-1", true).unwrap_err();
        assert_eq!(
            err,
            OptionsError::Invalid {
                option: "maxPoolSize",
                value: "-1".into(),
                reason: "must not be negative"
            }
        );
        assert!(err.to_string().contains("maxPoolSize"));
        assert!(err.to_string().contains("-1"));
    }

    #[test]
    fn not_a_number_is_rejected() {
        let err = PoolOptions::from_connection_string("mongodb://h/?maxIdleTimeMS=soon", true).unwrap_err();
        assert!(matches!(
            err,
            OptionsError::Invalid {
                option: "maxIdleTimeMS",
                ..
            }
        ));
        let err = PoolOptions::from_connection_string("mongodb://h/?minPoolSize=1.5", true).unwrap_err();
        assert!(matches!(
            err,
            OptionsError::Invalid {
                option: "minPoolSize",
                ..
            }
        ));
    }

    #[test]
    fn min_above_max_is_rejected_only_when_capped() {
        let err = PoolOptions::from_connection_string("mongodb://h/?maxPoolSize=2&minPoolSize=3", true)
            .unwrap_err();
        assert_eq!(err, OptionsError::MinExceedsMax { min: 3, max: 2 });
        assert!(
            PoolOptions::from_connection_string("mongodb://h/?maxPoolSize=0&minPoolSize=3", true).is_ok()
        );
    }

    #[test]
    fn max_connecting_zero_is_rejected() {
        let err = PoolOptions::builder().max_connecting(0).build().unwrap_err();
        assert!(matches!(
            err,
            OptionsError::Invalid {
                option: "maxConnecting",
                ..
            }
        ));
    }

    #[test]
    fn unknown_option_is_an_error_only_in_strict_mode() {
        let err = PoolOptions::from_connection_string("mongodb://h/?maxPoolSise=3", true).unwrap_err();
        assert_eq!(
            err,
            OptionsError::Unknown {
                option: "maxPoolSise".into(),
                suggestion: Some("maxPoolSize"),
            }
        );
        assert!(PoolOptions::from_connection_string("mongodb://h/?maxPoolSise=3", false).is_ok());
        // A driver's option is not unknown, strict or not.
        assert!(PoolOptions::from_connection_string("mongodb://h/?appName=x", true).is_ok());
    }

    #[test]
    fn bad_extension_values_are_rejected() {
        assert!(PoolOptions::builder()
            .max_lifetime(Duration::from_secs(1), 1.5)
            .build()
            .is_err());
        assert!(PoolOptions::builder()
            .maintenance_interval(Some(Duration::ZERO))
            .build()
            .is_err());
        for (min, max) in [(0, 4), (3, 2)] {
            let err = PoolOptions::builder()
                .adaptive_connecting(AdaptiveConnecting { min, max })
                .build()
                .unwrap_err();
            assert!(matches!(
                err,
                OptionsError::Invalid {
                    option: "adaptiveConnecting",
                    ..
                }
            ));
        }
        let o = PoolOptions::builder()
            .adaptive_connecting(AdaptiveConnecting { min: 2, max: 2 })
            .build()
            .unwrap();
        assert_eq!(
            o.adaptive_connecting(),
            Some(AdaptiveConnecting { min: 2, max: 2 })
        );
        assert_eq!(o.max_connecting(), 2);
        let r = Reconnect {
            initial_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(1),
            give_up_after: None,
            max_delay_while_waiting: Duration::from_millis(10),
        };
        assert!(PoolOptions::builder().reconnect(Some(r)).build().is_err());
    }
}
