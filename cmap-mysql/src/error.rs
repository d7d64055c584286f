//! The managers' error, and how a connect error is classified.

use std::fmt;

use crate::{kind_of_server_code, EstablishErrorKind};

/// Why a MySQL connection could not be made, checked or reset.
///
/// Its `Display` never contains the password: it is the client's error,
/// which names the failure and the server's message.
#[derive(Debug)]
#[non_exhaustive]
pub enum MySqlError {
    /// `mysql_async`'s error: connecting, authenticating, the ping, the
    /// reset.
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    Async(mysql_async::Error),
    /// The synchronous `mysql` crate's error.
    #[cfg(feature = "blocking")]
    #[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
    Sync(mysql::Error),
    /// The ping took longer than the manager's `validation_timeout`.
    ValidationTimeout,
}

impl fmt::Display for MySqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "tokio")]
            MySqlError::Async(e) => write!(f, "mysql: {e}"),
            #[cfg(feature = "blocking")]
            MySqlError::Sync(e) => write!(f, "mysql: {e}"),
            MySqlError::ValidationTimeout => f.write_str("the MySQL session did not answer the ping in time"),
        }
    }
}

impl std::error::Error for MySqlError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            #[cfg(feature = "tokio")]
            MySqlError::Async(e) => Some(e),
            #[cfg(feature = "blocking")]
            MySqlError::Sync(e) => Some(e),
            MySqlError::ValidationTimeout => None,
        }
    }
}

#[cfg(feature = "tokio")]
impl From<mysql_async::Error> for MySqlError {
    fn from(e: mysql_async::Error) -> MySqlError {
        MySqlError::Async(e)
    }
}

#[cfg(feature = "blocking")]
impl From<mysql::Error> for MySqlError {
    fn from(e: mysql::Error) -> MySqlError {
        MySqlError::Sync(e)
    }
}

impl MySqlError {
    /// The kind of a failed connect, as the pool's `classify` wants it:
    ///
    /// - the server's answer by error code: access denied (1044, 1045,
    ///   1251, 1698, 1820, 1862) is
    ///   [`Authentication`](EstablishErrorKind::Authentication); too many
    ///   connections (1040, 1203, 1226), a shutdown (1053) and a killed
    ///   session (1927) are [`Network`](EstablishErrorKind::Network),
    ///   which the pool waits out; any other (an unknown database, a bad
    ///   `init` statement) is [`Other`](EstablishErrorKind::Other);
    /// - the socket's errors and timeouts, a closed connection and a
    ///   garbled packet stream are [`Network`](EstablishErrorKind::Network);
    /// - an authentication method the client refuses or does not know is
    ///   [`Authentication`](EstablishErrorKind::Authentication);
    /// - anything else (a bad URL, TLS) is [`Other`](EstablishErrorKind::Other).
    pub fn kind(&self) -> EstablishErrorKind {
        match self {
            #[cfg(feature = "tokio")]
            MySqlError::Async(e) => kind_of_async(e),
            #[cfg(feature = "blocking")]
            MySqlError::Sync(e) => kind_of_sync(e),
            MySqlError::ValidationTimeout => EstablishErrorKind::Network,
        }
    }
}

#[cfg(feature = "tokio")]
fn kind_of_async(e: &mysql_async::Error) -> EstablishErrorKind {
    use mysql_async::{DriverError, Error, IoError};
    match e {
        Error::Server(server) => kind_of_server_code(server.code),
        Error::Io(IoError::Io(io)) => EstablishErrorKind::of_io(io),
        Error::Driver(
            DriverError::ConnectionClosed
            | DriverError::PacketOutOfOrder
            | DriverError::UnexpectedPacket { .. }
            | DriverError::BadCompressedPacketHeader,
        ) => EstablishErrorKind::Network,
        Error::Driver(
            DriverError::UnknownAuthPlugin { .. }
            | DriverError::MysqlOldPasswordDisabled
            | DriverError::CleartextPluginDisabled,
        ) => EstablishErrorKind::Authentication,
        other => EstablishErrorKind::of_chain(other),
    }
}

#[cfg(feature = "blocking")]
fn kind_of_sync(e: &mysql::Error) -> EstablishErrorKind {
    use mysql::{DriverError, Error};
    match e {
        Error::MySqlError(server) => kind_of_server_code(server.code),
        Error::IoError(io) => EstablishErrorKind::of_io(io),
        Error::CodecError(_) => EstablishErrorKind::Network,
        Error::DriverError(driver) => match driver {
            // A refused or unreachable server: the socket's error kind.
            DriverError::CouldNotConnect(Some((_, _, kind))) => {
                EstablishErrorKind::of_io(&std::io::Error::from(*kind))
            }
            DriverError::CouldNotConnect(None)
            | DriverError::ConnectTimeout
            | DriverError::Timeout
            | DriverError::PacketOutOfSync
            | DriverError::UnexpectedPacket => EstablishErrorKind::Network,
            DriverError::UnknownAuthPlugin(_)
            | DriverError::OldMysqlPasswordDisabled
            | DriverError::CleartextPluginDisabled => EstablishErrorKind::Authentication,
            _ => EstablishErrorKind::Other,
        },
        other => EstablishErrorKind::of_chain(other),
    }
}
