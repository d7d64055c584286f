//! What can go wrong: connecting, the handshake, authentication, and the
//! commands users run. Nothing here ever shows a credential.

use std::fmt;
use std::time::Duration;

use bson::Document;
use cmap_core::EstablishErrorKind;

use crate::scram::ScramError;

/// Why connecting, the handshake or a command failed. The `Display` ends
/// with the root cause (a server's own message, an I/O error), and never
/// shows a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The host name did not resolve: no retry mends that.
    #[error("could not resolve {host}: {source}")]
    Dns {
        /// The host name.
        host: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// A network error: refused, reset, closed, unreachable.
    #[error("network error {during}: {source}")]
    Network {
        /// What the connection was doing.
        during: Stage,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Opening a connection ran out of time: `connectTimeoutMS`, or under
    /// `timeoutMS` what was left of it (see [`Manager`](crate::Manager)).
    #[error("timed out {during} after {}ms (connectTimeoutMS, or timeoutMS)", after.as_millis())]
    Timeout {
        /// What the connection was doing.
        during: Stage,
        /// The limit that ran out.
        after: Duration,
    },
    /// The TLS handshake refused the server: its certificate, its name, or
    /// the protocol it offered (not an I/O error: those are
    /// [`Network`](Error::Network)).
    #[error("TLS handshake refused the server: {0}")]
    Tls(#[source] rustls::Error),
    /// The server answered a command with an error.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// Authentication failed (whatever failed during it: the server
    /// refused the credentials, the connection broke, the server's proof
    /// was wrong).
    #[error("authentication of user {user:?} on database {source_db:?} with {mechanism} failed: {cause}")]
    Authentication {
        /// The user name (never the password).
        user: String,
        /// The authentication database.
        source_db: String,
        /// The mechanism, such as `SCRAM-SHA-256`.
        mechanism: &'static str,
        /// What failed.
        #[source]
        cause: Box<Error>,
    },
    /// The SCRAM conversation failed on our side (a malformed or wrong
    /// answer from the server).
    #[error(transparent)]
    Scram(#[from] ScramError),
    /// The server's reply to the handshake does not let us use it.
    #[error("the server at {address} cannot be used: {reason}")]
    Handshake {
        /// The server.
        address: String,
        /// Why, such as an incompatible wire version.
        reason: String,
    },
    /// A message broke the wire protocol.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// `timeoutMS` (an operation's deadline) ran out: the error of the
    /// client-side operations timeout specification. `during` says at
    /// which stage; the connection is closed if the command was being sent
    /// or its reply read, and kept otherwise.
    #[error("timeoutMS expired {during}{}", cause_suffix(.cause.as_deref()))]
    TimedOut {
        /// Where the deadline was found passed.
        during: Stage,
        /// The error of the work it cut short, if there was one (the
        /// pool's, or the server's `MaxTimeMSExpired`).
        #[source]
        cause: Option<Box<Error>>,
    },
    /// The pool gave no connection: it is closed or cleared, or
    /// establishing one failed (the pool's error, whose source is the
    /// manager's).
    #[error("the pool gave no connection: {0}")]
    Pool(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// An earlier error (a network error, a cancelled command) left the
    /// connection in an unknown state: it is never used again.
    #[error("the connection is broken: an earlier network error or cancelled command left it unusable")]
    Broken,
}

/// What a connection was doing when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stage {
    /// Opening the TCP connection.
    Connect,
    /// The TLS handshake.
    Tls,
    /// The `hello` (the MongoDB handshake).
    Hello,
    /// Authentication, after the `hello`.
    Authentication,
    /// A command on an established connection.
    Command,
    /// Waiting for a connection from the pool (`timeoutMS`).
    CheckOut,
    /// Before the command was sent: what is left of `timeoutMS` is not
    /// more than the connection's minimum round-trip time.
    BeforeSend,
    /// Sending the command (`timeoutMS`).
    Send,
    /// Reading the reply (`timeoutMS`).
    Reply,
    /// On the server: it answered `MaxTimeMSExpired` (code 50).
    Server,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Connect => "while connecting",
            Stage::Tls => "during the TLS handshake",
            Stage::Hello => "during the hello",
            Stage::Authentication => "during authentication",
            Stage::Command => "while running a command",
            Stage::CheckOut => "while waiting for a connection from the pool",
            Stage::BeforeSend => {
                "before sending the command (what was left did not cover the connection's minimum round-trip time)"
            }
            Stage::Send => "while sending the command",
            Stage::Reply => "while reading the reply",
            Stage::Server => "on the server (MaxTimeMSExpired)",
        })
    }
}

impl Error {
    /// How the pool should take this error when it ends a connection
    /// attempt (CMAP, "Backpressure-enabled"): network errors and timeouts
    /// while connecting, during TLS I/O or the `hello` are
    /// [`Network`](EstablishErrorKind::Network) (they may be overload: the
    /// pool is not cleared and keeps trying); anything during
    /// authentication is [`Authentication`](EstablishErrorKind::Authentication);
    /// a DNS failure, a certificate refused, a server we cannot use are
    /// [`Other`](EstablishErrorKind::Other).
    pub fn establish_kind(&self) -> EstablishErrorKind {
        match self {
            Error::Network { during, .. } | Error::Timeout { during, .. } => match during {
                Stage::Connect | Stage::Tls | Stage::Hello => EstablishErrorKind::Network,
                Stage::Authentication => EstablishErrorKind::Authentication,
                Stage::Command
                | Stage::CheckOut
                | Stage::BeforeSend
                | Stage::Send
                | Stage::Reply
                | Stage::Server => EstablishErrorKind::Other,
            },
            Error::Authentication { .. } | Error::Scram(_) => EstablishErrorKind::Authentication,
            Error::Dns { .. }
            | Error::Tls(_)
            | Error::Command(_)
            | Error::Handshake { .. }
            | Error::Protocol(_)
            | Error::TimedOut { .. }
            | Error::Pool(_)
            | Error::Broken => EstablishErrorKind::Other,
        }
    }

    /// Whether the error leaves the connection unusable: a network error,
    /// a timeout, a broken protocol, `timeoutMS` expired while the command
    /// was sent or its reply read. A server's answer (a [`CommandError`])
    /// does not.
    pub fn is_network(&self) -> bool {
        matches!(
            self,
            Error::Network { .. }
                | Error::Timeout { .. }
                | Error::Protocol(_)
                | Error::Broken
                | Error::TimedOut {
                    during: Stage::Send | Stage::Reply,
                    ..
                }
        )
    }

    /// Whether `timeoutMS` expired ([`Error::TimedOut`]), wherever it was.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::TimedOut { .. })
    }

    /// The server's error, if it answered with one (directly, or during
    /// authentication).
    pub fn command_error(&self) -> Option<&CommandError> {
        match self {
            Error::Command(e) => Some(e),
            Error::Authentication { cause, .. } => cause.command_error(),
            _ => None,
        }
    }
}

/// A server's error reply: `{ok: 0, code, codeName, errmsg, errorLabels}`,
/// or a write concern error of an otherwise successful reply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("server error {code} ({code_name}): {message}{}", labels_suffix(.labels))]
#[non_exhaustive]
pub struct CommandError {
    /// The error code, such as 18 for `AuthenticationFailed`.
    pub code: i32,
    /// The code's name, such as `AuthenticationFailed`.
    pub code_name: String,
    /// The server's message (`errmsg`).
    pub message: String,
    /// The error labels the server attached, such as `RetryableWriteError`.
    pub labels: Vec<String>,
    /// `baseBackoffMS`: the server's base for the backoff before a retry
    /// of an overloaded command, when it gave a positive one.
    pub base_backoff_ms: Option<u64>,
}

fn cause_suffix(cause: Option<&Error>) -> String {
    cause.map(|cause| format!(": {cause}")).unwrap_or_default()
}

fn labels_suffix(labels: &[String]) -> String {
    if labels.is_empty() {
        String::new()
    } else {
        format!(" (labels: {})", labels.join(", "))
    }
}

impl CommandError {
    /// The error in a reply whose `ok` is not 1, or `None` for a success.
    pub(crate) fn from_reply(reply: &Document) -> Option<CommandError> {
        let ok = match reply.get("ok") {
            Some(bson::Bson::Double(ok)) => *ok == 1.0,
            Some(bson::Bson::Int32(ok)) => *ok == 1,
            Some(bson::Bson::Int64(ok)) => *ok == 1,
            Some(bson::Bson::Boolean(ok)) => *ok,
            _ => false,
        };
        if ok {
            return None;
        }
        let code = match reply.get("code") {
            Some(bson::Bson::Int32(c)) => *c,
            Some(bson::Bson::Int64(c)) => i32::try_from(*c).unwrap_or(i32::MAX),
            Some(bson::Bson::Double(c)) => *c as i32,
            _ => 0,
        };
        let labels = reply
            .get_array("errorLabels")
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|l| l.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let base_backoff_ms = match reply.get("baseBackoffMS") {
            Some(bson::Bson::Int32(ms)) => u64::try_from(*ms).ok(),
            Some(bson::Bson::Int64(ms)) => u64::try_from(*ms).ok(),
            Some(bson::Bson::Double(ms)) if ms.is_finite() && *ms >= 1.0 => Some(*ms as u64),
            _ => None,
        }
        .filter(|&ms| ms > 0);
        Some(CommandError {
            code,
            base_backoff_ms,
            code_name: reply.get_str("codeName").unwrap_or_default().to_owned(),
            message: reply
                .get_str("errmsg")
                .unwrap_or("the server gave no message")
                .to_owned(),
            labels,
        })
    }

    /// Whether the server attached `label`.
    pub fn has_label(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l == label)
    }

    /// A retryable overload error (client backpressure specification):
    /// both `SystemOverloadedError` and `RetryableError`.
    pub fn is_retryable_overload(&self) -> bool {
        self.has_label("SystemOverloadedError") && self.has_label("RetryableError")
    }
}

/// A message that broke the wire protocol, or one we refuse to send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The message would exceed the server's `maxMessageSizeBytes`.
    #[error("the message is {size} bytes, over the server's maxMessageSizeBytes ({max})")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The database name is empty or holds a NUL byte, or the command
    /// names one itself (`$db`).
    #[error("a command's database must be given once, as run_command's non-empty db argument free of NUL bytes, not as $db")]
    InvalidDatabase,
    /// The command could not be written as BSON.
    #[error("the command cannot be written as BSON: {0}")]
    Serialize(String),
    /// A reply that is not an OP_MSG.
    #[error("the server replied with opcode {0}, not OP_MSG (2013)")]
    Opcode(i32),
    /// A reply whose length is impossible or over the limit.
    #[error("the server announced a reply of {0} bytes, which is not a possible OP_MSG length")]
    Length(i64),
    /// A reply to another request.
    #[error("the server answered request {got}, not request {expected}")]
    ResponseTo {
        /// The request sent.
        expected: i32,
        /// The request the reply names.
        got: i32,
    },
    /// Flag bits we do not know or did not ask for.
    #[error("the reply has flag bits {0:#x} this client does not support")]
    Flags(u32),
    /// A section of an unknown kind.
    #[error("the reply has a section of unknown kind {0}")]
    SectionKind(u8),
    /// Sections that do not make an OP_MSG reply.
    #[error("the reply's sections are malformed: {0}")]
    Sections(&'static str),
    /// A reply shorter than it says.
    #[error("the reply is truncated")]
    Truncated,
    /// A reply that is not BSON.
    #[error("the reply is not valid BSON: {0}")]
    Deserialize(String),
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn a_reply_is_an_error_unless_ok_is_one() {
        for ok in [
            doc! { "ok": 1.0 },
            doc! { "ok": 1 },
            doc! { "ok": 1i64 },
            doc! { "ok": true },
        ] {
            assert_eq!(CommandError::from_reply(&ok), None, "{ok}");
        }
        let err = CommandError::from_reply(&doc! {
            "ok": 0.0, "errmsg": "Authentication failed.", "code": 18,
            "codeName": "AuthenticationFailed", "errorLabels": ["A", "B"],
        })
        .unwrap();
        assert_eq!((err.code, err.code_name.as_str()), (18, "AuthenticationFailed"));
        assert!(err.has_label("B") && !err.has_label("C"));
        assert!(!err.is_retryable_overload());
        assert_eq!(err.base_backoff_ms, None);
        let overloaded = CommandError::from_reply(&doc! {
            "ok": 0.0, "code": 462, "baseBackoffMS": 250,
            "errorLabels": ["SystemOverloadedError", "RetryableError"],
        })
        .unwrap();
        assert!(overloaded.is_retryable_overload());
        assert_eq!(overloaded.base_backoff_ms, Some(250));
        let zero = CommandError::from_reply(&doc! { "ok": 0, "baseBackoffMS": 0.0 }).unwrap();
        assert_eq!(zero.base_backoff_ms, None, "not positive: the default base");
        assert_eq!(
            err.to_string(),
            "server error 18 (AuthenticationFailed): Authentication failed. (labels: A, B)"
        );
        assert!(
            CommandError::from_reply(&doc! {}).is_some(),
            "no ok: not a success"
        );
        assert!(CommandError::from_reply(&doc! { "ok": 0 }).is_some());
    }

    #[test]
    fn an_error_code_of_any_bson_number_type_is_read() {
        let code = |code: bson::Bson| {
            CommandError::from_reply(&doc! { "ok": 0, "code": code })
                .unwrap()
                .code
        };
        assert_eq!(code(bson::Bson::Int32(11600)), 11600);
        assert_eq!(code(bson::Bson::Int64(11600)), 11600);
        assert_eq!(code(bson::Bson::Double(11600.0)), 11600);
        assert_eq!(code(bson::Bson::Int64(1 << 40)), i32::MAX);
        assert_eq!(code(bson::Bson::String("11600".into())), 0);
        let err = CommandError::from_reply(&doc! { "ok": 0 }).unwrap();
        assert_eq!(err.message, "the server gave no message");
        assert!(err.labels.is_empty() && err.code_name.is_empty());
    }

    #[test]
    fn network_errors_name_their_stage_and_leave_the_connection_unusable() {
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        for (during, words) in [
            (Stage::Connect, "while connecting"),
            (Stage::Tls, "during the TLS handshake"),
            (Stage::Hello, "during the hello"),
            (Stage::Authentication, "during authentication"),
            (Stage::Command, "while running a command"),
        ] {
            let network = Error::Network { during, source: io() };
            assert!(
                network
                    .to_string()
                    .starts_with(&format!("network error {words}: ")),
                "{network}"
            );
            assert!(network.is_network());
            let timeout = Error::Timeout {
                during,
                after: Duration::from_millis(2500),
            };
            assert_eq!(
                timeout.to_string(),
                format!("timed out {words} after 2500ms (connectTimeoutMS, or timeoutMS)")
            );
            assert!(timeout.is_network());
        }
        assert_eq!(
            Error::Network {
                during: Stage::Command,
                source: io()
            }
            .establish_kind(),
            EstablishErrorKind::Other
        );
        assert!(Error::Broken.is_network());
        assert!(Error::Protocol(ProtocolError::Truncated).is_network());
        let command = Error::Command(CommandError::from_reply(&doc! { "ok": 0 }).unwrap());
        assert!(!command.is_network());
        assert_eq!(command.establish_kind(), EstablishErrorKind::Other);
        assert!(command.command_error().is_some());
        assert!(Error::Broken.command_error().is_none());
    }

    #[test]
    fn establishment_errors_are_classified_as_the_backpressure_rules_say() {
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let network = |during| Error::Network { during, source: io() };
        let timeout = |during| Error::Timeout {
            during,
            after: Duration::from_secs(1),
        };
        for during in [Stage::Connect, Stage::Tls, Stage::Hello] {
            assert_eq!(network(during).establish_kind(), EstablishErrorKind::Network);
            assert_eq!(timeout(during).establish_kind(), EstablishErrorKind::Network);
        }
        assert_eq!(
            network(Stage::Authentication).establish_kind(),
            EstablishErrorKind::Authentication
        );
        assert_eq!(
            timeout(Stage::Authentication).establish_kind(),
            EstablishErrorKind::Authentication
        );
        let auth = Error::Authentication {
            user: "u".into(),
            source_db: "admin".into(),
            mechanism: "SCRAM-SHA-256",
            cause: Box::new(network(Stage::Authentication)),
        };
        assert_eq!(auth.establish_kind(), EstablishErrorKind::Authentication);
        let dns = Error::Dns {
            host: "nowhere.invalid".into(),
            source: io(),
        };
        assert_eq!(dns.establish_kind(), EstablishErrorKind::Other);
        assert_eq!(
            Error::Tls(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer
            ))
            .establish_kind(),
            EstablishErrorKind::Other
        );
        let handshake = Error::Handshake {
            address: "db:27017".into(),
            reason: "old".into(),
        };
        assert_eq!(handshake.establish_kind(), EstablishErrorKind::Other);
    }

    #[test]
    fn the_display_ends_with_the_root_cause() {
        let err = Error::Authentication {
            user: "app".into(),
            source_db: "admin".into(),
            mechanism: "SCRAM-SHA-256",
            cause: Box::new(Error::Command(CommandError {
                code: 18,
                code_name: "AuthenticationFailed".into(),
                message: "Authentication failed.".into(),
                labels: vec![],
                base_backoff_ms: None,
            })),
        };
        assert_eq!(
            err.to_string(),
            "authentication of user \"app\" on database \"admin\" with SCRAM-SHA-256 failed: \
             server error 18 (AuthenticationFailed): Authentication failed."
        );
        assert_eq!(err.command_error().map(|e| e.code), Some(18));
    }
}
