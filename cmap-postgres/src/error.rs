//! The managers' error, and how a connect error is classified.

use std::fmt;

use tokio_postgres::error::SqlState;

use crate::cmap::EstablishErrorKind;

/// Why a PostgreSQL connection could not be made, checked or reset.
///
/// Its `Display` never contains the password: it is the driver's error,
/// which names the failure and the server's message.
#[derive(Debug)]
#[non_exhaustive]
pub enum PgError {
    /// The driver's error: connecting, authenticating, the configure
    /// hook, the check's or the reset's query. (`postgres::Error` is this
    /// same type.)
    Postgres(tokio_postgres::Error),
    /// The session is gone: the client saw its socket close.
    Closed,
    /// The validation round trip took longer than the manager's
    /// `validation_timeout`.
    ValidationTimeout,
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgError::Postgres(e) => write!(f, "postgres: {e}"),
            PgError::Closed => f.write_str("the PostgreSQL session is closed"),
            PgError::ValidationTimeout => {
                f.write_str("the PostgreSQL session did not answer the validation in time")
            }
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PgError::Postgres(e) => Some(e),
            PgError::Closed | PgError::ValidationTimeout => None,
        }
    }
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> PgError {
        PgError::Postgres(e)
    }
}

impl PgError {
    /// The kind of a failed connect, as the pool's `classify` wants it:
    ///
    /// - the server's answer by SQLSTATE: class 28 (invalid authorization:
    ///   a wrong password, no `pg_hba.conf` entry) is
    ///   [`Authentication`](EstablishErrorKind::Authentication); `53300`
    ///   too_many_connections and `57P03` cannot_connect_now (starting up,
    ///   shutting down, in recovery) are
    ///   [`Network`](EstablishErrorKind::Network), overload the pool waits
    ///   out; any other is [`Other`](EstablishErrorKind::Other) (a database
    ///   that does not exist, a bad `init_sql`);
    /// - the connection closed before or during startup, a connect
    ///   timeout, and the socket's I/O errors are
    ///   [`Network`](EstablishErrorKind::Network);
    /// - a client-side authentication failure (no password given, an
    ///   unsupported method) is
    ///   [`Authentication`](EstablishErrorKind::Authentication);
    /// - anything else (TLS, configuration) is
    ///   [`Other`](EstablishErrorKind::Other).
    pub fn kind(&self) -> EstablishErrorKind {
        let e = match self {
            PgError::Postgres(e) => e,
            PgError::Closed | PgError::ValidationTimeout => return EstablishErrorKind::Network,
        };
        if let Some(code) = e.code() {
            if code.code().starts_with("28") {
                return EstablishErrorKind::Authentication;
            }
            if *code == SqlState::TOO_MANY_CONNECTIONS || *code == SqlState::CANNOT_CONNECT_NOW {
                return EstablishErrorKind::Network;
            }
            if e.as_db_error().is_some() {
                return EstablishErrorKind::Other;
            }
        }
        if e.is_closed() {
            return EstablishErrorKind::Network;
        }
        match EstablishErrorKind::of_chain(e) {
            EstablishErrorKind::Other => {
                // The driver's error kinds are private; their names lead
                // its `Display` ("authentication error: ...").
                let text = e.to_string();
                if text.starts_with("authentication error") {
                    EstablishErrorKind::Authentication
                } else if text.starts_with("timeout waiting for server") {
                    EstablishErrorKind::Network
                } else {
                    EstablishErrorKind::Other
                }
            }
            kind => kind,
        }
    }
}
