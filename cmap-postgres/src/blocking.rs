//! The synchronous manager: the `postgres` crate, for cmap-blocking.
//!
//! ```no_run
//! use cmap_postgres::blocking::PgManager;
//! use postgres::NoTls;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config: postgres::Config = "host=127.0.0.1 user=postgres dbname=test".parse()?;
//! let manager = PgManager::new(config, NoTls);
//! let pool = cmap_blocking::Pool::builder().address(manager.address()).max_pool_size(10).build(manager)?;
//! let mut conn = pool.get()?; // derefs to a postgres::Client
//! let row = conn.query_one("SELECT $1::int4 + 1", &[&41i32])?;
//! assert_eq!(row.get::<_, i32>(0), 42);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use cmap_blocking::{EstablishErrorKind, ManageConnection};
use postgres::tls::{MakeTlsConnect, TlsConnect};
use postgres::{Client, NoTls, Socket};
use tokio_postgres::error::SqlState;

pub use crate::manager::Threads;
use crate::manager::{Connection, Manager};
use crate::{Address, PgError, Reset, IN_NO_TRANSACTION};

#[doc(hidden)]
pub type ConfigureFn = dyn Fn(&mut Client) -> Result<(), postgres::Error> + Send + Sync;

/// The default of [`PgManager::validate_idle_after`] for the synchronous
/// manager: 500 ms, HikariCP's.
pub const DEFAULT_VALIDATE_IDLE_AFTER: Duration = Duration::from_millis(500);

/// Opens and looks after PostgreSQL sessions through the synchronous
/// `postgres` crate, for a [`cmap_blocking::Pool`]: the [`Manager`] of the
/// [`Threads`] runtime, with the options of the async one.
///
/// Unlike the async manager, it validates a connection idle for at least
/// [`DEFAULT_VALIDATE_IDLE_AFTER`] (500 ms) with a round trip
/// (`Client::is_valid`, an empty query) before handing it out, as HikariCP
/// does: a synchronous client reads its socket only while it is used, so
/// `is_closed` cannot learn meanwhile that the server ended the session.
/// [`validate_idle_after`](Manager::validate_idle_after) changes the
/// threshold; [`no_validation`](Manager::no_validation) turns it off.
pub type PgManager<T = NoTls> = Manager<T, Threads>;

/// A pooled PostgreSQL session of a [`PgManager`]: the `postgres` client
/// (it derefs to it) and what the pool knows about it.
pub type PgConnection = Connection<Client>;

impl Connection<Client> {
    /// The client (the synchronous client queries through `&mut`).
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

impl<T> Manager<T, Threads> {
    /// A hook run once on each new connection, after
    /// [`init_sql`](Self::init_sql) (psycopg's `configure`).
    ///
    /// ```
    /// # let config = postgres::Config::new();
    /// let manager = cmap_postgres::blocking::PgManager::new(config, postgres::NoTls)
    ///     .configure(|client| client.batch_execute("SET statement_timeout = '5s'"));
    /// ```
    pub fn configure<F>(mut self, hook: F) -> Self
    where
        F: Fn(&mut Client) -> Result<(), postgres::Error> + Send + Sync + 'static,
    {
        self.configure = Some(Arc::new(hook));
        self
    }
}

fn rollback_if_open(client: &mut Client) -> Result<(), postgres::Error> {
    let open = match client.simple_query(IN_NO_TRANSACTION) {
        Ok(messages) => crate::in_transaction(&messages),
        Err(e) if e.code() == Some(&SqlState::IN_FAILED_SQL_TRANSACTION) => true,
        Err(e) => return Err(e),
    };
    if open {
        client.batch_execute("ROLLBACK")?;
    }
    Ok(())
}

impl<T> ManageConnection for Manager<T, Threads>
where
    T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send + Sync + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    type Connection = PgConnection;
    type Error = PgError;

    /// Connects (on a thread of the pool's), learns the backend
    /// pid, runs `init_sql` and the `configure` hook.
    fn connect(&self) -> Result<PgConnection, PgError> {
        let mut client = self.config.connect(self.tls.clone())?;
        let backend_pid =
            crate::backend_pid_of(&client.simple_query("SELECT pg_backend_pid()")?).unwrap_or(0);
        if let Some(sql) = &self.init_sql {
            client.batch_execute(sql)?;
        }
        if let Some(configure) = &self.configure {
            configure(&mut client)?;
        }
        Ok(Connection::new(client, backend_pid))
    }

    /// [`PgError::kind`].
    fn classify(&self, error: &PgError) -> EstablishErrorKind {
        error.kind()
    }

    fn address(&self) -> Option<Address> {
        Some(Self::address(self))
    }

    /// As [`check_within`](Self::check_within), with no deadline.
    fn check(&self, conn: &mut PgConnection) -> Result<(), PgError> {
        self.check_within(conn, None)
    }

    /// A closed client is refused; a connection idle for at least
    /// [`validate_idle_after`](PgManager::validate_idle_after) is asked
    /// for a round trip, bounded by the validation timeout and by what is
    /// left of the checkout's deadline.
    fn check_within(&self, conn: &mut PgConnection, remaining: Option<Duration>) -> Result<(), PgError> {
        if conn.client.is_closed() {
            return Err(PgError::Closed);
        }
        if self.due_validation(conn.last_used) {
            let limit = remaining.map_or(self.validation_timeout, |r| r.min(self.validation_timeout));
            conn.client.is_valid(limit)?;
        }
        Ok(())
    }

    /// As [`Reset`] says.
    fn reset(&self, conn: &mut PgConnection) -> Result<(), PgError> {
        if self.reset == Reset::Nothing {
            return Ok(());
        }
        rollback_if_open(&mut conn.client)?;
        if self.reset == Reset::DiscardAll {
            conn.client.batch_execute("DISCARD ALL")?;
            conn.client.clear_type_cache();
        }
        Ok(())
    }

    /// A client that saw its session end. Also notes when the connection
    /// was last used, for the validation threshold.
    fn is_broken(&self, conn: &mut PgConnection) -> bool {
        conn.touch_and_test()
    }
}
