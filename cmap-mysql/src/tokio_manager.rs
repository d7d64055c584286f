//! The async manager: `mysql_async` for cmap-tokio.

use std::future::Future;

use cmap_tokio::{EstablishErrorKind, ManageConnection};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

use crate::manager::{Client, Connection, Manager, Runtime, Tokio};
use crate::{Address, MySqlError, Reset};

/// Opens and looks after MySQL or MariaDB sessions through `mysql_async`,
/// for a [`cmap_tokio::Pool`]: the [`Manager`] of the [`Tokio`] runtime.
/// Only `mysql_async`'s `Conn` is used, not its own pool: the `Opts`'
/// pool settings have no effect here.
pub type MySqlManager = Manager<Tokio>;

/// A pooled session of a [`MySqlManager`]: the `mysql_async` connection
/// (it derefs to it) and what the pool knows about it.
pub type MySqlConnection = Connection<Conn>;

impl Runtime for Tokio {
    type Opts = Opts;
    type Client = Conn;

    fn describe(opts: &Opts) -> (String, u16, Option<&str>, Option<&str>) {
        (
            opts.ip_or_hostname().to_owned(),
            opts.tcp_port(),
            opts.user(),
            opts.db_name(),
        )
    }
}

impl Client for Conn {
    /// `mysql_async` marks a connection whose socket failed, and one whose
    /// query was cancelled midway (its dropped future leaves the protocol
    /// out of step).
    fn is_disconnected(&self) -> bool {
        Conn::is_disconnected(self)
    }
}

impl ManageConnection for Manager<Tokio> {
    type Connection = MySqlConnection;
    type Error = MySqlError;

    /// TCP (or the Unix socket the options prefer), handshake,
    /// authentication, and the options' `init` statements.
    async fn connect(&self) -> Result<MySqlConnection, MySqlError> {
        let conn = Conn::new(self.opts.clone()).await?;
        let id = conn.id();
        Ok(Connection::new(conn, id))
    }

    /// [`MySqlError::kind`].
    fn classify(&self, error: &MySqlError) -> EstablishErrorKind {
        error.kind()
    }

    fn address(&self) -> Option<Address> {
        Some(Self::address(self))
    }

    /// A disconnected client is refused; one idle at least
    /// [`validate_idle_after`](MySqlManager::validate_idle_after) is
    /// pinged, within the validation timeout.
    fn check(&self, conn: &mut MySqlConnection) -> impl Future<Output = Result<(), MySqlError>> + Send {
        let validate = self.due_validation(conn.last_used);
        let timeout = self.validation_timeout;
        async move {
            if conn.conn.is_disconnected() {
                return Err(mysql_async::Error::from(mysql_async::DriverError::ConnectionClosed).into());
            }
            if validate {
                match tokio::time::timeout(timeout, conn.conn.ping()).await {
                    Ok(answer) => answer?,
                    Err(_) => return Err(MySqlError::ValidationTimeout),
                }
            }
            Ok(())
        }
    }

    /// As [`Reset`] says.
    fn reset(&self, conn: &mut MySqlConnection) -> impl Future<Output = Result<(), MySqlError>> + Send {
        let reset = self.reset;
        async move {
            match reset {
                Reset::Nothing => {}
                Reset::Rollback => conn.conn.query_drop("ROLLBACK").await?,
                Reset::ResetConnection => {
                    if !conn.conn.reset().await? {
                        // A server older than COM_RESET_CONNECTION: the
                        // slower re-login, with the same options.
                        conn.conn.change_user(Default::default()).await?;
                    }
                }
            }
            Ok(())
        }
    }

    /// A client that knows its session is gone. Also notes when the
    /// connection was last used, for the validation threshold.
    fn is_broken(&self, conn: &mut MySqlConnection) -> bool {
        conn.touch_and_test()
    }
}
