//! The synchronous manager: the `mysql` crate, for cmap-blocking.
//!
//! ```no_run
//! use cmap_mysql::blocking::MySqlManager;
//! use mysql::prelude::Queryable;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let opts = mysql::Opts::from_url("mysql://cmap:cmap-secret@127.0.0.1:3306/test")?;
//! let manager = MySqlManager::new(opts);
//! let pool = cmap_blocking::Pool::builder().address(manager.address()).max_pool_size(10).build(manager)?;
//! let mut conn = pool.get()?; // derefs to a mysql::Conn
//! let answer: Option<i32> = conn.query_first("SELECT 41 + 1")?;
//! assert_eq!(answer, Some(42));
//! # Ok(())
//! # }
//! ```

use cmap_blocking::{EstablishErrorKind, ManageConnection};
use mysql::prelude::Queryable;
use mysql::{Conn, Opts};

pub use crate::manager::Threads;
use crate::manager::{Client, Connection, Manager, Runtime};
use crate::{Address, MySqlError, Reset};

/// Opens and looks after MySQL or MariaDB sessions through the
/// synchronous `mysql` crate, for a [`cmap_blocking::Pool`]: the
/// [`Manager`] of the [`Threads`] runtime, with the options of the async
/// one. The ping of the validation is bounded by the `Opts`' read and
/// write timeouts (the client has no per-call timeout).
pub type MySqlManager = Manager<Threads>;

/// A pooled session of a [`MySqlManager`]: the `mysql` connection (it
/// derefs to it) and what the pool knows about it.
pub type MySqlConnection = Connection<Conn>;

impl Runtime for Threads {
    type Opts = Opts;
    type Client = Conn;

    fn describe(opts: &Opts) -> (String, u16, Option<&str>, Option<&str>) {
        (
            opts.get_ip_or_hostname().into_owned(),
            opts.get_tcp_port(),
            opts.get_user(),
            opts.get_db_name(),
        )
    }
}

impl Client for Conn {
    /// Never known: the synchronous client keeps no such flag. A session
    /// that died while checked out fails the reset's `ROLLBACK` instead,
    /// and one that died idle fails the ping.
    fn is_disconnected(&self) -> bool {
        false
    }
}

impl ManageConnection for Manager<Threads> {
    type Connection = MySqlConnection;
    type Error = MySqlError;

    /// Connects (on one of the pool's worker threads) and runs the
    /// options' `init` statements.
    fn connect(&self) -> Result<MySqlConnection, MySqlError> {
        let conn = Conn::new(self.opts.clone())?;
        let id = conn.connection_id();
        Ok(Connection::new(conn, id))
    }

    /// [`MySqlError::kind`].
    fn classify(&self, error: &MySqlError) -> EstablishErrorKind {
        error.kind()
    }

    fn address(&self) -> Option<Address> {
        Some(Self::address(self))
    }

    /// A connection idle at least
    /// [`validate_idle_after`](MySqlManager::validate_idle_after) is
    /// pinged.
    fn check(&self, conn: &mut MySqlConnection) -> Result<(), MySqlError> {
        if self.due_validation(conn.last_used) {
            conn.conn.ping()?;
        }
        Ok(())
    }

    /// As [`Reset`] says.
    fn reset(&self, conn: &mut MySqlConnection) -> Result<(), MySqlError> {
        match self.reset {
            Reset::Nothing => {}
            Reset::Rollback => conn.conn.query_drop("ROLLBACK")?,
            // Falls back to the slower re-login on servers without
            // COM_RESET_CONNECTION.
            Reset::ResetConnection => conn.conn.reset()?,
        }
        Ok(())
    }

    /// Notes when the connection was last used, for the validation
    /// threshold (the client cannot tell whether its session is gone).
    fn is_broken(&self, conn: &mut MySqlConnection) -> bool {
        conn.touch_and_test()
    }
}
