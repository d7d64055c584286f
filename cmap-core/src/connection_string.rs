//! A MongoDB connection string, read far enough for a pool and its
//! connection manager: the scheme, the user information (decoded, and
//! shown nowhere), the hosts, the database, and the query options, sorted
//! into the pool's, the other known MongoDB options (their values kept
//! for the driver), and unknown ones.
//!
//! Nothing that could be part of a password is ever quoted in an error or
//! a warning. The user information itself is never quoted; and because a
//! password with an unencoded `@`, `/` or `?` moves the place where the
//! user information seems to end, no text that comes before the last `@`
//! of the string is quoted either: it is shown as [`REDACTED`].

use std::fmt;

use crate::address::Address;
use crate::options::OptionsError;
use crate::options::{PoolOptionsBuilder, SPEC_OPTIONS};

/// The port of a host given without one (spec: "Connection String").
pub const DEFAULT_PORT: u16 = 27017;

/// What an error or a warning shows in place of text that may be part of
/// a password.
pub const REDACTED: &str = "<redacted>";

/// The MongoDB connection string options this pool does not read but
/// knows as options of a driver ("URI Options" specification, with the
/// deprecated names still accepted there). An option in none of these
/// lists and not a pool option is unknown: a warning, or an error in
/// strict mode.
const DRIVER_OPTIONS: &[&str] = &[
    "appName",
    "authMechanism",
    "authMechanismProperties",
    "authSource",
    "compressors",
    "connectTimeoutMS",
    "directConnection",
    "enableOverloadRetargeting",
    "gssapiServiceName",
    "heartbeatFrequencyMS",
    "journal",
    "loadBalanced",
    "localThresholdMS",
    "maxAdaptiveRetries",
    "maxStalenessSeconds",
    "proxyHost",
    "proxyPassword",
    "proxyPort",
    "proxyUsername",
    "readConcernLevel",
    "readPreference",
    "readPreferenceTags",
    "replicaSet",
    "retryReads",
    "retryWrites",
    "serverMonitoringMode",
    "serverSelectionTimeoutMS",
    "serverSelectionTryOnce",
    "socketTimeoutMS",
    "srvMaxHosts",
    "srvServiceName",
    "ssl",
    "timeoutMS",
    "tls",
    "tlsAllowInvalidCertificates",
    "tlsAllowInvalidHostnames",
    "tlsCAFile",
    "tlsCertificateKeyFile",
    "tlsCertificateKeyFilePassword",
    "tlsDisableCertificateRevocationCheck",
    "tlsDisableOCSPEndpointCheck",
    "tlsInsecure",
    "uuidRepresentation",
    "w",
    "wTimeoutMS",
    "zlibCompressionLevel",
];

/// Why a string is not read as a connection string when an `@` comes
/// after the first `/` or `?`.
const AMBIGUOUS: &str = "an `@` comes after a `/` or `?`, so the user name or password seems to hold \
                         an unencoded `/` or `?` (percent-encode `@ : / ? %` in them), or the hosts, \
                         database or options before that `@` are malformed";

/// A parsed MongoDB connection string (`mongodb://` or `mongodb+srv://`).
///
/// ```
/// use cmap_core::{Address, ConnectionString};
///
/// let cs = ConnectionString::parse("mongodb://app:s3cr%40t@db1,db2:27018/?maxPoolSize=5&maxPoolSizee=6").unwrap();
/// assert_eq!(cs.hosts(), [Address::new("db1", 27017), Address::new("db2", 27018)]);
/// let unknown = &cs.unknown_options()[0];
/// assert_eq!((unknown.name(), unknown.suggestion()), ("maxPoolSizee", Some("maxPoolSize")));
/// assert!(ConnectionString::parse("postgres://db/").is_err());
/// ```
#[derive(Clone)]
pub struct ConnectionString {
    hosts: Vec<Address>,
    /// Whether the hosts come after the last `@` (otherwise `Debug`
    /// hides them: they may be part of a password).
    hosts_shown: bool,
    srv_name: Option<String>,
    user_info: Option<UserInfo>,
    database: Option<String>,
    /// The pool's options as given: canonical name, value, and whether
    /// the value may be quoted.
    pool_options: Vec<(&'static str, String, bool)>,
    /// The driver's options: canonical name and percent-decoded value.
    driver_options: Vec<(&'static str, String)>,
    unknown: Vec<UnknownOption>,
}

/// The user name and password of a connection string, percent-decoded.
/// `Debug` shows neither.
#[derive(Clone, PartialEq, Eq)]
pub struct UserInfo {
    username: String,
    password: Option<String>,
}

impl UserInfo {
    /// The user name.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The password, if the string gives one (`user:password@`).
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }
}

/// `UserInfo { .. }`: the user name and password may be secrets.
impl fmt::Debug for UserInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserInfo").finish_non_exhaustive()
    }
}

/// The user information and option values are left out, and so are hosts
/// that come before the last `@`: they may hold secrets.
impl fmt::Debug for ConnectionString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionString")
            .field("hosts", if self.hosts_shown { &self.hosts } else { &REDACTED })
            .field(
                "srv_name",
                if self.hosts_shown {
                    &self.srv_name
                } else {
                    &REDACTED
                },
            )
            .field(
                "pool_options",
                &self
                    .pool_options
                    .iter()
                    .map(|(name, _, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field(
                "driver_options",
                &self
                    .driver_options
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("unknown", &self.unknown)
            .finish()
    }
}

/// A query option that is neither a pool option nor a known driver option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownOption {
    name: String,
    suggestion: Option<&'static str>,
}

impl UnknownOption {
    /// The option's name as given, or [`REDACTED`] when it comes before
    /// the last `@` of the string.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The known option nearest to it, if one is near enough to be a typo.
    pub fn suggestion(&self) -> Option<&'static str> {
        self.suggestion
    }

    /// The error strict parsing fails with.
    pub fn to_error(&self) -> OptionsError {
        OptionsError::Unknown {
            option: self.name.clone(),
            suggestion: self.suggestion,
        }
    }
}

/// `unknown connection string option "maxPoolSizee" (did you mean maxPoolSize?)`
impl fmt::Display for UnknownOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown connection string option {:?}", self.name)?;
        if let Some(s) = self.suggestion {
            write!(f, " (did you mean {s}?)")?;
        }
        Ok(())
    }
}

impl ConnectionString {
    /// Parses `uri`, failing on anything that is not a well-formed
    /// `mongodb://` or `mongodb+srv://` connection string. Unknown options
    /// are not an error here: see [`unknown_options`](Self::unknown_options).
    pub fn parse(uri: &str) -> Result<ConnectionString, ConnectionStringError> {
        let (scheme, rest) = uri.split_once("://").ok_or(ConnectionStringError::NotAUri)?;
        if !is_scheme(scheme) {
            return Err(ConnectionStringError::NotAUri);
        }
        let srv = if scheme.eq_ignore_ascii_case("mongodb") {
            false
        } else if scheme.eq_ignore_ascii_case("mongodb+srv") {
            true
        } else {
            return Err(ConnectionStringError::Scheme {
                scheme: scheme.to_owned(),
            });
        };
        let base = scheme.len() + 3;
        // Text before the last `@` is never quoted.
        let secret_end = uri.rfind('@').unwrap_or(0);

        let delimiter = rest.find(['/', '?']).unwrap_or(rest.len());
        let first_at = rest.find('@');
        let (host_start, ambiguous, user_info) = match first_at {
            Some(at) if at < delimiter => (at + 1, false, Some(parse_user_info(&rest[..at])?)),
            Some(_) => (0, true, None),
            None => (0, false, None),
        };
        let parsed = Self::parse_after_user_info(srv, rest, base + host_start, host_start, secret_end)
            .map(|cs| ConnectionString { user_info, ..cs });
        match parsed {
            // The `@` after a `/` or `?` may belong to an option's value
            // (`appName=me@example`): a string that reads well that way is
            // taken so, and one that does not is most likely a password
            // with an unencoded `/` or `?`.
            Err(_) if ambiguous => Err(ConnectionStringError::UserInfo { reason: AMBIGUOUS }),
            other => other,
        }
    }

    fn parse_after_user_info(
        srv: bool,
        rest: &str,
        offset: usize,
        start: usize,
        secret_end: usize,
    ) -> Result<ConnectionString, ConnectionStringError> {
        let quote = |text: &str, at: usize| -> String {
            if at < secret_end {
                REDACTED.to_owned()
            } else {
                text.to_owned()
            }
        };
        let after = &rest[start..];
        let end = after.find(['/', '?']).unwrap_or(after.len());
        let authority = &after[..end];
        if authority.contains('@') {
            return Err(ConnectionStringError::UserInfo {
                reason: "it holds an unencoded `@` (percent-encode `@ : / ? %` as %40 %3A %2F %3F %25)",
            });
        }
        let tail = &after[end..];
        let (database, query) = match tail.strip_prefix('/') {
            Some(path) => match path.split_once('?') {
                Some((database, query)) => (database, Some((query, offset + end + 1 + database.len() + 1))),
                None => (path, None),
            },
            None => ("", tail.strip_prefix('?').map(|q| (q, offset + end + 1))),
        };
        if database.contains('@') {
            return Err(ConnectionStringError::UserInfo {
                reason: "an `@` follows the hosts: the user name or password seems to hold an unencoded `/`",
            });
        }
        if database.contains(['/', '\\', ' ', '"', '$']) {
            return Err(ConnectionStringError::Database {
                reason: "it holds one of / \\ space \" $",
            });
        }

        let mut cs = ConnectionString {
            hosts: Vec::new(),
            hosts_shown: offset >= secret_end,
            srv_name: None,
            user_info: None,
            database: None,
            pool_options: Vec::new(),
            driver_options: Vec::new(),
            unknown: Vec::new(),
        };
        if !database.is_empty() {
            let decoded = percent_decode(database).ok_or(ConnectionStringError::Database {
                reason: "it is not percent-encoded UTF-8",
            })?;
            cs.database = Some(decoded);
        }
        if authority.is_empty() {
            return Err(ConnectionStringError::NoHost);
        }
        if srv {
            if authority.contains(',') {
                return Err(ConnectionStringError::Srv {
                    reason: "it names more than one host",
                });
            }
            if authority.contains(':') {
                return Err(ConnectionStringError::Srv {
                    reason: "its host has a port",
                });
            }
            check_host_name(authority).map_err(|reason| ConnectionStringError::Host {
                host: quote(authority, offset),
                reason,
            })?;
            cs.srv_name = Some(authority.to_owned());
        } else {
            let mut at = offset;
            for host in authority.split(',') {
                let address = parse_host(host).map_err(|reason| ConnectionStringError::Host {
                    host: quote(host, at),
                    reason,
                })?;
                cs.hosts.push(address);
                at += host.len() + 1;
            }
        }

        let Some((query, mut at)) = query else {
            return Ok(cs);
        };
        for pair in query.split('&') {
            let pair_at = at;
            at += pair.len() + 1;
            if pair.is_empty() {
                continue;
            }
            let Some((name, value)) = pair.split_once('=') else {
                return Err(ConnectionStringError::Option {
                    option: quote(pair, pair_at),
                    reason: "has no `=value`",
                });
            };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(ConnectionStringError::Option {
                    option: quote(name, pair_at),
                    reason: "is not an option name",
                });
            }
            if let Some(option) = SPEC_OPTIONS.iter().find(|o| o.eq_ignore_ascii_case(name)) {
                let value_at = pair_at + name.len() + 1;
                cs.pool_options
                    .push((option, value.to_owned(), value_at >= secret_end));
            } else if let Some(option) = DRIVER_OPTIONS.iter().find(|o| o.eq_ignore_ascii_case(name)) {
                let value = percent_decode(value).ok_or_else(|| ConnectionStringError::Option {
                    option: quote(name, pair_at),
                    reason: "has a value that is not percent-encoded UTF-8",
                })?;
                cs.driver_options.push((option, value));
            } else {
                cs.unknown.push(UnknownOption {
                    name: quote(name, pair_at),
                    suggestion: (pair_at >= secret_end).then(|| nearest(name)).flatten(),
                });
            }
        }
        Ok(cs)
    }

    /// The hosts of a `mongodb://` string, a host given without a port
    /// with [`DEFAULT_PORT`]; empty for `mongodb+srv://`.
    pub fn hosts(&self) -> &[Address] {
        &self.hosts
    }

    /// The host name a `mongodb+srv://` string looks up.
    pub fn srv_name(&self) -> Option<&str> {
        self.srv_name.as_deref()
    }

    /// The user name and password, percent-decoded, if the string gives
    /// them.
    pub fn user_info(&self) -> Option<&UserInfo> {
        self.user_info.as_ref()
    }

    /// The database after the hosts (`mongodb://host/db`), percent-decoded:
    /// the default authentication database.
    pub fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    /// The value of a known driver option (not a pool option), found by
    /// name whatever its case, percent-decoded; the last one given wins.
    ///
    /// ```
    /// let cs = cmap_core::ConnectionString::parse("mongodb://db/?appname=my%20app").unwrap();
    /// assert_eq!(cs.driver_option("appName"), Some("my app"));
    /// ```
    pub fn driver_option(&self, name: &str) -> Option<&str> {
        self.driver_options
            .iter()
            .rev()
            .find(|(known, _)| known.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The known driver options given, in order: canonical name and
    /// percent-decoded value. A manager refuses the ones it does not
    /// implement by name.
    pub fn driver_options(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.driver_options
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
    }

    /// The options that are neither the pool's nor known driver options,
    /// in the order given, each with the known option nearest to it.
    pub fn unknown_options(&self) -> &[UnknownOption] {
        &self.unknown
    }

    /// Sets the pool options of the string on `builder`. With `strict`,
    /// the first unknown option is an error ([`OptionsError::Unknown`]).
    pub fn apply_to(&self, builder: &mut PoolOptionsBuilder, strict: bool) -> Result<(), OptionsError> {
        if strict {
            if let Some(unknown) = self.unknown.first() {
                return Err(unknown.to_error());
            }
        }
        for (name, value, quotable) in &self.pool_options {
            builder
                .set(name, value)
                .map_err(|e| if *quotable { e } else { e.redacted() })?;
        }
        Ok(())
    }
}

/// RFC 3986: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
fn is_scheme(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// User information is `user[:password]`, with `@ : / ? %` percent-encoded
/// (spec: "Connection String", userinfo); decoded.
fn parse_user_info(user_info: &str) -> Result<UserInfo, ConnectionStringError> {
    check_user_info(user_info)?;
    let decode = |text: &str| {
        percent_decode(text).ok_or(ConnectionStringError::UserInfo {
            reason: "it is not UTF-8 once percent-decoded",
        })
    };
    let (username, password) = match user_info.split_once(':') {
        Some((user, password)) => (user, Some(password)),
        None => (user_info, None),
    };
    Ok(UserInfo {
        username: decode(username)?,
        password: password.map(decode).transpose()?,
    })
}

/// `%XX` escapes decoded; `None` for a `%` that starts no escape, or
/// bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn check_user_info(user_info: &str) -> Result<(), ConnectionStringError> {
    let err = |reason| Err(ConnectionStringError::UserInfo { reason });
    if user_info.matches(':').count() > 1 {
        return err("it holds an unencoded `:` (percent-encode `@ : / ? %` as %40 %3A %2F %3F %25)");
    }
    let bytes = user_info.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'%'
            && !(bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)))
        {
            return err("it holds a `%` that starts no %XX escape (percent-encode `%` as %25)");
        }
    }
    if user_info.split(':').next().is_none_or(str::is_empty) {
        return err("the user name is empty");
    }
    Ok(())
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`, or a percent-encoded Unix
/// socket path ending in `.sock`.
fn parse_host(host: &str) -> Result<Address, &'static str> {
    if host.is_empty() {
        return Err("it is empty");
    }
    if let Some(v6) = host.strip_prefix('[') {
        let (ip, after) = v6.split_once(']').ok_or("it opens a `[` it does not close")?;
        if ip.is_empty()
            || !ip
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.' | b'%'))
        {
            return Err("it is not an IPv6 address");
        }
        let port = match after {
            "" => DEFAULT_PORT,
            _ => parse_port(after.strip_prefix(':').ok_or("text follows the `]`")?)?,
        };
        return Ok(Address::new(format!("[{ip}]"), port));
    }
    let lower = host.to_ascii_lowercase();
    if lower.contains("%2f") {
        if !lower.ends_with(".sock") {
            return Err("a Unix socket path must end in .sock");
        }
        return Ok(Address::unix(host.replace("%2F", "/").replace("%2f", "/")));
    }
    let (name, port) = match host.split_once(':') {
        Some((name, port)) => (name, parse_port(port)?),
        None => (host, DEFAULT_PORT),
    };
    check_host_name(name)?;
    Ok(Address::new(name, port))
}

fn check_host_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("the host name is empty");
    }
    if name.contains(':') {
        return Err("an IPv6 address must be in brackets");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err("it holds a character not allowed in a host name");
    }
    Ok(())
}

fn parse_port(port: &str) -> Result<u16, &'static str> {
    const BAD: &str = "the port is not a number from 1 to 65535";
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BAD);
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(BAD),
        Ok(p) => Ok(p),
    }
}

/// The known option nearest to `name` (ignoring case), if it is close
/// enough to be a typo: at most one edit for every three characters.
fn nearest(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    SPEC_OPTIONS
        .iter()
        .chain(DRIVER_OPTIONS)
        .map(|known| (distance(&name, &known.to_ascii_lowercase()), *known))
        .filter(|(d, _)| *d > 0 && *d * 3 <= name.len())
        // On a tie, a known name with the same letters (a swap: `tsl`,
        // `tls`) before one with other letters (`ssl`).
        .min_by_key(|(d, known)| (*d, !same_letters(&name, &known.to_ascii_lowercase())))
        .map(|(_, known)| known)
}

fn same_letters(a: &str, b: &str) -> bool {
    let sorted = |s: &str| {
        let mut bytes = s.as_bytes().to_vec();
        bytes.sort_unstable();
        bytes
    };
    sorted(a) == sorted(b)
}

/// Edit distance with adjacent transpositions (optimal string alignment).
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

/// A string given as a MongoDB connection string that is not one. No
/// variant quotes the user name or password, or any text that may be part
/// of one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionStringError {
    /// The string does not start with a URI scheme (`scheme://`).
    #[error("not a connection string: expected mongodb://[user:password@]host[:port][,host...][/database][?options] or mongodb+srv://")]
    NotAUri,
    /// A URI of a scheme other than `mongodb` and `mongodb+srv`.
    #[error(
        "unsupported scheme {scheme:?}: a MongoDB connection string starts with mongodb:// or mongodb+srv://"
    )]
    Scheme {
        /// The scheme given, such as `postgres`.
        scheme: String,
    },
    /// The user name or password is not percent-encoded as it must be.
    #[error("the user name or password of the connection string is malformed (neither is shown): {reason}")]
    UserInfo {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No host follows the scheme.
    #[error("the connection string names no host")]
    NoHost,
    /// A host that is not `host[:port]`, `[v6][:port]` or an encoded socket path.
    #[error("invalid host {host:?} in the connection string: {reason}")]
    Host {
        /// The host as given.
        host: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A `mongodb+srv://` string that names more than one host, or a port.
    #[error("invalid mongodb+srv:// connection string: {reason}")]
    Srv {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The database name (after the hosts' `/`) holds a character it may not.
    #[error("invalid database name in the connection string: {reason}")]
    Database {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A query item that is not `name=value`.
    #[error("invalid connection string option {option:?}: {reason}")]
    Option {
        /// The item or its name, as given.
        option: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}
