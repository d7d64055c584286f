//! The manager's options, read from a `mongodb://` connection string
//! (cmap-core's [`ConnectionString`]): the server, the credential, TLS,
//! the application name, `connectTimeoutMS` and `loadBalanced`. The pool
//! options of the same string are the pool builder's.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use cmap_core::{Address, ConnectionString, ConnectionStringError};

use crate::scram::Mechanism;

/// `connectTimeoutMS`'s default (the URI options specification).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The driver options this manager reads; any other known driver option
/// in the string is refused by name ([`OptionsError::Unsupported`]).
const SUPPORTED: &[&str] = &[
    "appName",
    "authMechanism",
    "authSource",
    "connectTimeoutMS",
    "enableOverloadRetargeting",
    "loadBalanced",
    "maxAdaptiveRetries",
    "retryReads",
    "retryWrites",
    "ssl",
    "timeoutMS",
    "tls",
    "tlsCAFile",
];

/// How the manager connects, from a connection string or built by hand.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MongoOptions {
    /// The server: the string's one host.
    pub address: Address,
    /// The credential, if the string has a user name.
    pub credential: Option<Credential>,
    /// `appName`: sent in the handshake's client metadata, and shown in
    /// the server's logs.
    pub app_name: Option<String>,
    /// TLS, if `tls=true` (or `ssl=true`).
    pub tls: Option<TlsOptions>,
    /// `connectTimeoutMS`: bounds the TCP connect, the TLS handshake, the
    /// `hello` and authentication of each new connection (`None`: no
    /// limit; the pool's own connect timeout still applies). Under
    /// `timeoutMS`, TCP and TLS only (the shorter of it and what the
    /// checkout has left), and `timeout` bounds the handshake's commands.
    pub connect_timeout: Option<Duration>,
    /// `loadBalanced`: the handshake asks for load-balanced mode and the
    /// reply must carry a `serviceId`.
    pub load_balanced: bool,
    /// `timeoutMS`: the deadline of each operation of
    /// [`MongoPool`](crate::MongoPool), from checkout to reply (`None`,
    /// or `timeoutMS=0`: no limit, and the pool's `waitQueueTimeoutMS`
    /// bounds the checkout as before).
    pub timeout: Option<Duration>,
    /// `maxAdaptiveRetries`: how many times [`MongoPool`](crate::MongoPool)
    /// retries a command the server refused as overloaded (labels
    /// `SystemOverloadedError` and `RetryableError`), each after a backoff
    /// and on a fresh checkout (the client backpressure specification).
    /// 0 (the default here: opt-in) retries nothing.
    pub max_adaptive_retries: u32,
    /// `retryReads` (default `true`). [`MongoPool`](crate::MongoPool)'s
    /// commands are the specification's `runCommand`: retried as
    /// overloaded only while both this and `retry_writes` are on.
    pub retry_reads: bool,
    /// `retryWrites` (default `true`): see `retry_reads`.
    pub retry_writes: bool,
    /// `enableOverloadRetargeting` (default `false`): read, and of no
    /// effect here. It deprioritizes the overloaded server in server
    /// selection for the retry; a pool serves one server, whom the retry
    /// goes back to either way.
    pub enable_overload_retargeting: bool,
}

/// `Debug` shows whether there is a credential, not what it is.
impl fmt::Debug for MongoOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MongoOptions")
            .field("address", &self.address)
            .field("credential", &self.credential)
            .field("app_name", &self.app_name)
            .field("tls", &self.tls)
            .field("connect_timeout", &self.connect_timeout)
            .field("load_balanced", &self.load_balanced)
            .field("timeout", &self.timeout)
            .field("max_adaptive_retries", &self.max_adaptive_retries)
            .field("retry_reads", &self.retry_reads)
            .field("retry_writes", &self.retry_writes)
            .field("enable_overload_retargeting", &self.enable_overload_retargeting)
            .finish()
    }
}

/// A user name and password to authenticate with (SCRAM).
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// The user name.
    pub username: String,
    pub(crate) password: String,
    /// The authentication database (`authSource`; default: the string's
    /// database, else `admin`).
    pub source: String,
    /// The mechanism (`authMechanism`); `None`: negotiated in the
    /// handshake (SCRAM-SHA-256 where the server offers it, else
    /// SCRAM-SHA-1).
    pub mechanism: Option<Mechanism>,
}

impl Credential {
    /// A SCRAM credential for `username` on database `source`.
    pub fn new(username: impl Into<String>, password: impl Into<String>, source: impl Into<String>) -> Self {
        Credential {
            username: username.into(),
            password: password.into(),
            source: source.into(),
            mechanism: None,
        }
    }

    /// The same with the mechanism fixed rather than negotiated.
    pub fn with_mechanism(mut self, mechanism: Mechanism) -> Self {
        self.mechanism = Some(mechanism);
        self
    }
}

/// The user name, the database and the mechanism; never the password.
impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("username", &self.username)
            .field("source", &self.source)
            .field("mechanism", &self.mechanism)
            .finish_non_exhaustive()
    }
}

/// TLS settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TlsOptions {
    /// `tlsCAFile`: the PEM file of the certificate authorities to trust;
    /// `None`: the Mozilla roots (webpki-roots).
    pub ca_file: Option<PathBuf>,
}

/// A connection string this manager cannot use. Names the option; never
/// quotes a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// Not a connection string.
    #[error(transparent)]
    ConnectionString(#[from] ConnectionStringError),
    /// A known driver option this manager does not implement.
    #[error(
        "cmap-mongodb does not support the connection string option {option} (it reads appName, \
         authMechanism, authSource, connectTimeoutMS, enableOverloadRetargeting, loadBalanced, maxAdaptiveRetries, \
         retryReads, retryWrites, timeoutMS, tls, ssl, tlsCAFile \
         and the pool's options)"
    )]
    Unsupported {
        /// The option's name.
        option: &'static str,
    },
    /// A supported option with a value it cannot take.
    #[error("invalid value {value:?} for the connection string option {option}: {reason}")]
    Invalid {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: String,
        /// What it may be.
        reason: &'static str,
    },
    /// A pool serves one server: the string names several, or uses DNS
    /// seed lists.
    #[error("a pool connects to one server, but the connection string {0}")]
    Hosts(&'static str),
    /// `mongodb+srv://`.
    #[error("mongodb+srv:// connection strings are not supported: give the server as mongodb://host:port")]
    Srv,
    /// A user name without a password (the SCRAM mechanisms need one).
    #[error("the connection string has a user name but no password (SCRAM needs one)")]
    NoPassword,
    /// `tls` and `ssl` disagree.
    #[error("the connection string options tls and ssl disagree")]
    TlsConflict,
    /// `appName` is over the handshake's 128 bytes.
    #[error("appName is {0} bytes long; the handshake allows at most 128")]
    AppNameTooLong(usize),
    /// The `tlsCAFile` cannot be read, or holds no certificate.
    #[error("cannot use the tlsCAFile {path:?}: {reason}")]
    TlsCaFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// TLS cannot be set up for this server.
    #[error("TLS: {0}")]
    Tls(String),
}

impl MongoOptions {
    /// Options for the server at `address`: no credential, no TLS, the
    /// default connect timeout.
    pub fn new(address: Address) -> MongoOptions {
        MongoOptions {
            address,
            credential: None,
            app_name: None,
            tls: None,
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            load_balanced: false,
            timeout: None,
            max_adaptive_retries: 0,
            retry_reads: true,
            retry_writes: true,
            enable_overload_retargeting: false,
        }
    }

    /// Reads the manager's options from a connection string, refusing,
    /// by name, any driver option it does not implement.
    pub fn parse(uri: &str) -> Result<MongoOptions, OptionsError> {
        let cs = ConnectionString::parse(uri)?;
        MongoOptions::from_connection_string(&cs)
    }

    /// [`parse`](MongoOptions::parse) on an already parsed string.
    pub fn from_connection_string(cs: &ConnectionString) -> Result<MongoOptions, OptionsError> {
        if cs.srv_name().is_some() {
            return Err(OptionsError::Srv);
        }
        let address = match cs.hosts() {
            [one] => one.clone(),
            [] => return Err(OptionsError::Hosts("names none")),
            _ => {
                return Err(OptionsError::Hosts(
                    "names several hosts: make one pool per server",
                ))
            }
        };
        if let Some((option, _)) = cs.driver_options().find(|(name, _)| !SUPPORTED.contains(name)) {
            return Err(OptionsError::Unsupported { option });
        }
        let mut options = MongoOptions::new(address);
        options.app_name = cs.driver_option("appName").map(str::to_owned);
        options.load_balanced = flag(cs, "loadBalanced")?.unwrap_or(false);
        if let Some(timeout) = millis(cs, "connectTimeoutMS")? {
            options.connect_timeout = timeout;
        }
        options.timeout = millis(cs, "timeoutMS")?.flatten();
        if let Some(retries) = cs.driver_option("maxAdaptiveRetries") {
            options.max_adaptive_retries = retries.parse().map_err(|_| OptionsError::Invalid {
                option: "maxAdaptiveRetries",
                value: retries.to_owned(),
                reason: "a whole number of retries (0: none)",
            })?;
        }
        options.retry_reads = flag(cs, "retryReads")?.unwrap_or(true);
        options.retry_writes = flag(cs, "retryWrites")?.unwrap_or(true);
        options.enable_overload_retargeting = flag(cs, "enableOverloadRetargeting")?.unwrap_or(false);
        let tls = match (flag(cs, "tls")?, flag(cs, "ssl")?) {
            (Some(a), Some(b)) if a != b => return Err(OptionsError::TlsConflict),
            (a, b) => a.or(b).unwrap_or(false),
        };
        let ca_file = cs.driver_option("tlsCAFile").map(PathBuf::from);
        if tls {
            options.tls = Some(TlsOptions { ca_file });
        } else if ca_file.is_some() {
            return Err(OptionsError::Invalid {
                option: "tlsCAFile",
                value: String::new(),
                reason: "it needs tls=true",
            });
        }
        options.credential = credential(cs)?;
        options.validate()?;
        Ok(options)
    }

    /// Refuses what no connection could be made with: a Unix socket, an
    /// `appName` over the handshake's limit.
    pub(crate) fn validate(&self) -> Result<(), OptionsError> {
        if self.address.port().is_none() {
            return Err(OptionsError::Hosts(
                "names a Unix socket, which cmap-mongodb does not support",
            ));
        }
        match &self.app_name {
            Some(name) if name.len() > crate::metadata::MAX_APP_NAME_SIZE => {
                Err(OptionsError::AppNameTooLong(name.len()))
            }
            _ => Ok(()),
        }
    }
}

/// A duration option in milliseconds, if given: 0 is no limit (`None`
/// inside); a negative or other value is refused.
fn millis(cs: &ConnectionString, option: &'static str) -> Result<Option<Option<Duration>>, OptionsError> {
    cs.driver_option(option)
        .map(|ms| {
            let ms: u64 = ms.parse().map_err(|_| OptionsError::Invalid {
                option,
                value: ms.to_owned(),
                reason: "a whole number of milliseconds (0: no limit)",
            })?;
            Ok((ms > 0).then(|| Duration::from_millis(ms)))
        })
        .transpose()
}

fn flag(cs: &ConnectionString, option: &'static str) -> Result<Option<bool>, OptionsError> {
    cs.driver_option(option)
        .map(|value| match value {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(OptionsError::Invalid {
                option,
                value: other.to_owned(),
                reason: "true or false",
            }),
        })
        .transpose()
}

fn credential(cs: &ConnectionString) -> Result<Option<Credential>, OptionsError> {
    let mechanism = cs
        .driver_option("authMechanism")
        .map(|name| {
            Mechanism::from_name(name).ok_or_else(|| OptionsError::Invalid {
                option: "authMechanism",
                value: name.to_owned(),
                reason: "SCRAM-SHA-256 or SCRAM-SHA-1 (the mechanisms cmap-mongodb implements)",
            })
        })
        .transpose()?;
    let Some(user) = cs.user_info() else {
        if mechanism.is_some() {
            return Err(OptionsError::Invalid {
                option: "authMechanism",
                value: cs.driver_option("authMechanism").unwrap_or_default().to_owned(),
                reason: "it needs a user name and password in the connection string",
            });
        }
        return Ok(None);
    };
    let password = user.password().ok_or(OptionsError::NoPassword)?;
    let source = cs
        .driver_option("authSource")
        .or(cs.database())
        .unwrap_or("admin");
    let credential = Credential::new(user.username(), password, source);
    Ok(Some(Credential {
        mechanism,
        ..credential
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supported_options_are_read() {
        let o = MongoOptions::parse(
            "mongodb://app:s%40cret@db.example:27018/shop?appName=my%20app&tls=true&tlsCAFile=%2Fca.pem\
             &connectTimeoutMS=2500&authMechanism=SCRAM-SHA-1&maxPoolSize=5",
        )
        .unwrap();
        assert_eq!(o.address, Address::new("db.example", 27018));
        assert_eq!(o.app_name.as_deref(), Some("my app"));
        assert_eq!(
            o.tls,
            Some(TlsOptions {
                ca_file: Some("/ca.pem".into())
            })
        );
        assert_eq!(o.connect_timeout, Some(Duration::from_millis(2500)));
        assert!(!o.load_balanced);
        let c = o.credential.clone().unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str(), c.source.as_str()),
            ("app", "s@cret", "shop")
        );
        assert_eq!(c.mechanism, Some(Mechanism::ScramSha1));
        assert!(!format!("{o:?}").contains("s@cret"));
    }

    #[test]
    fn defaults() {
        let o = MongoOptions::parse("mongodb://db").unwrap();
        assert_eq!(o, MongoOptions::new(Address::new("db", 27017)));
        assert_eq!(o.connect_timeout, Some(DEFAULT_CONNECT_TIMEOUT));
        assert_eq!(o.credential, None);
        let o =
            MongoOptions::parse("mongodb://u:p@db/?connectTimeoutMS=0&ssl=true&loadBalanced=true").unwrap();
        assert_eq!(o.connect_timeout, None);
        assert_eq!(o.tls, Some(TlsOptions::default()));
        assert!(o.load_balanced);
        let c = o.credential.unwrap();
        assert_eq!((c.source.as_str(), c.mechanism), ("admin", None));
        let o = MongoOptions::parse("mongodb://u:p@db/shop?authSource=other").unwrap();
        assert_eq!(o.credential.unwrap().source, "other");
    }

    #[test]
    fn timeout_ms_is_read_zero_is_no_limit_and_a_negative_value_is_refused() {
        let timeout = |uri: &str| MongoOptions::parse(uri).map(|o| o.timeout);
        assert_eq!(timeout("mongodb://db"), Ok(None), "unset: today's behaviour");
        assert_eq!(
            timeout("mongodb://db/?timeoutMS=5000"),
            Ok(Some(Duration::from_secs(5)))
        );
        assert_eq!(timeout("mongodb://db/?timeoutms=0"), Ok(None));
        for bad in ["-1", "1.5", "soon"] {
            assert!(
                matches!(
                    timeout(&format!("mongodb://db/?timeoutMS={bad}")),
                    Err(OptionsError::Invalid {
                        option: "timeoutMS",
                        ..
                    })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn max_adaptive_retries_is_opt_in() {
        let retries = |uri: &str| MongoOptions::parse(uri).map(|o| o.max_adaptive_retries);
        assert_eq!(retries("mongodb://db"), Ok(0));
        assert_eq!(retries("mongodb://db/?maxAdaptiveRetries=3"), Ok(3));
        assert!(matches!(
            retries("mongodb://db/?maxAdaptiveRetries=-1"),
            Err(OptionsError::Invalid {
                option: "maxAdaptiveRetries",
                ..
            })
        ));
    }

    #[test]
    fn retry_reads_and_writes_default_on_and_retargeting_off() {
        let o = MongoOptions::parse("mongodb://db").unwrap();
        assert_eq!(
            (o.retry_reads, o.retry_writes, o.enable_overload_retargeting),
            (true, true, false)
        );
        let o = MongoOptions::parse(
            "mongodb://db/?retryReads=false&retryWrites=false&enableOverloadRetargeting=true",
        )
        .unwrap();
        assert_eq!(
            (o.retry_reads, o.retry_writes, o.enable_overload_retargeting),
            (false, false, true)
        );
        assert!(matches!(
            MongoOptions::parse("mongodb://db/?retryWrites=1"),
            Err(OptionsError::Invalid {
                option: "retryWrites",
                ..
            })
        ));
    }

    #[test]
    fn tls_and_ssl_may_both_be_given_when_they_agree() {
        for uri in [
            "mongodb://db/?tls=true&ssl=true",
            "mongodb://db/?ssl=true",
            "mongodb://db/?tls=true",
        ] {
            assert_eq!(
                MongoOptions::parse(uri).unwrap().tls,
                Some(TlsOptions::default()),
                "{uri}"
            );
        }
        for uri in ["mongodb://db/?tls=false&ssl=false", "mongodb://db/?ssl=false"] {
            assert_eq!(MongoOptions::parse(uri).unwrap().tls, None, "{uri}");
        }
    }

    #[test]
    fn debug_shows_the_options_and_the_user_but_never_the_password() {
        let o = MongoOptions::parse(
            "mongodb://app:Qx7Zq9@db:27018/shop?appName=shop&authMechanism=SCRAM-SHA-256",
        )
        .unwrap();
        let debug = format!("{o:?}");
        for part in [
            "MongoOptions",
            "27018",
            r#"app_name: Some("shop")"#,
            r#"username: "app""#,
            r#"source: "shop""#,
            "ScramSha256",
            "load_balanced: false",
        ] {
            assert!(debug.contains(part), "{part} in {debug}");
        }
        assert!(!debug.contains("Qx7Zq9"), "{debug}");
        let credential = format!("{:?}", o.credential.unwrap());
        assert!(
            credential.starts_with("Credential {") && credential.contains("app"),
            "{credential}"
        );
        assert!(!credential.contains("Qx7Zq9"), "{credential}");
    }

    #[test]
    fn what_it_cannot_do_is_refused_by_name() {
        let err = |uri: &str| MongoOptions::parse(uri).unwrap_err();
        assert_eq!(
            err("mongodb://db/?w=majority"),
            OptionsError::Unsupported { option: "w" }
        );
        assert_eq!(
            err("mongodb://db/?compressors=zstd"),
            OptionsError::Unsupported {
                option: "compressors"
            }
        );
        assert!(err("mongodb://db/?tlsInsecure=true")
            .to_string()
            .contains("tlsInsecure"));
        assert_eq!(
            err("mongodb://a,b/"),
            OptionsError::Hosts("names several hosts: make one pool per server")
        );
        assert_eq!(err("mongodb+srv://cluster.example/"), OptionsError::Srv);
        assert_eq!(err("mongodb://u@db/"), OptionsError::NoPassword);
        assert_eq!(err("mongodb://db/?tls=true&ssl=false"), OptionsError::TlsConflict);
        assert!(matches!(
            err("mongodb://db/?tls=yes"),
            OptionsError::Invalid { option: "tls", .. }
        ));
        assert!(matches!(
            err("mongodb://db/?connectTimeoutMS=-1"),
            OptionsError::Invalid {
                option: "connectTimeoutMS",
                ..
            }
        ));
        assert!(matches!(
            err("mongodb://u:p@db/?authMechanism=PLAIN"),
            OptionsError::Invalid {
                option: "authMechanism",
                ..
            }
        ));
        assert!(matches!(
            err("mongodb://db/?authMechanism=SCRAM-SHA-256"),
            OptionsError::Invalid {
                option: "authMechanism",
                ..
            }
        ));
        assert!(matches!(
            err("mongodb://db/?tlsCAFile=ca.pem"),
            OptionsError::Invalid {
                option: "tlsCAFile",
                ..
            }
        ));
        assert!(matches!(err("postgres://db/"), OptionsError::ConnectionString(_)));
        let long = "a".repeat(129);
        assert_eq!(
            err(&format!("mongodb://db/?appName={long}")),
            OptionsError::AppNameTooLong(129)
        );
        assert!(MongoOptions::parse(&format!("mongodb://db/?appName={}", &long[1..])).is_ok());
        // No error quotes the password.
        let e = err("mongodb://u:Qx7Zq9@db/?w=1");
        assert!(!format!("{e} {e:?}").contains("Qx7Zq9"));
    }
}
