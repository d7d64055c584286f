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

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_blocking::{EstablishErrorKind, ManageConnection};
use postgres::tls::{MakeTlsConnect, TlsConnect};
use postgres::{Client, Config, NoTls, Socket};
use tokio_postgres::error::SqlState;

use crate::{Address, PgError, Reset, DEFAULT_VALIDATION_TIMEOUT, IN_NO_TRANSACTION};

type ConfigureFn = dyn Fn(&mut Client) -> Result<(), postgres::Error> + Send + Sync;

/// The default of [`PgManager::validate_idle_after`] for the synchronous
/// manager: 500 ms, HikariCP's.
pub const DEFAULT_VALIDATE_IDLE_AFTER: Duration = Duration::from_millis(500);

/// Opens and looks after PostgreSQL sessions through the synchronous
/// `postgres` crate, for a [`cmap_blocking::Pool`].
///
/// Unlike the async manager, it validates a connection idle for at least
/// [`DEFAULT_VALIDATE_IDLE_AFTER`] (500 ms) with a round trip before
/// handing it out, as HikariCP does: a synchronous client reads its socket
/// only while it is used, so `is_closed` cannot learn meanwhile that the
/// server ended the session (a restart, `pg_terminate_backend`, an idle
/// timeout). [`validate_idle_after`](Self::validate_idle_after) changes
/// the threshold; [`no_validation`](Self::no_validation) turns it off.
pub struct PgManager<T = NoTls> {
    config: Config,
    tls: T,
    reset: Reset,
    validate_idle_after: Option<Duration>,
    validation_timeout: Duration,
    init_sql: Option<String>,
    configure: Option<Arc<ConfigureFn>>,
}

impl<T> fmt::Debug for PgManager<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `Config`'s own `Debug` redacts the password.
        f.debug_struct("PgManager")
            .field("config", &self.config)
            .field("reset", &self.reset)
            .field("validate_idle_after", &self.validate_idle_after)
            .field("validation_timeout", &self.validation_timeout)
            .field("init_sql", &self.init_sql)
            .field("configure", &self.configure.as_ref().map(|_| "Fn"))
            .finish_non_exhaustive()
    }
}

impl<T> PgManager<T> {
    /// A manager connecting with `config` through `tls`. The defaults: a
    /// validation round trip for connections idle 500 ms or more,
    /// [`Reset::Rollback`] on check-in, no setup SQL.
    pub fn new(config: Config, tls: T) -> PgManager<T> {
        PgManager {
            config,
            tls,
            reset: Reset::default(),
            validate_idle_after: Some(DEFAULT_VALIDATE_IDLE_AFTER),
            validation_timeout: DEFAULT_VALIDATION_TIMEOUT,
            init_sql: None,
            configure: None,
        }
    }

    /// The configuration it connects with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The server's address for the pool's builder: the configuration's
    /// first host and port (`localhost:5432` when it names none).
    pub fn address(&self) -> Address {
        crate::address_of(self.config.get_hosts(), self.config.get_ports())
    }

    /// What the reset on check-in does (default [`Reset::Rollback`]).
    pub fn reset(mut self, reset: Reset) -> Self {
        self.reset = reset;
        self
    }

    /// Validates a connection with a round trip (`Client::is_valid`, an
    /// empty query) before handing it out, when it has been idle in the
    /// pool for at least `idle` (default 500 ms; `Duration::ZERO`: on
    /// every checkout, as r2d2's `test_on_check_out`).
    pub fn validate_idle_after(mut self, idle: Duration) -> Self {
        self.validate_idle_after = Some(idle);
        self
    }

    /// No validation round trip: only a client that already saw its
    /// socket close is refused.
    pub fn no_validation(mut self) -> Self {
        self.validate_idle_after = None;
        self
    }

    /// How long the validation round trip may take (default 5 s).
    pub fn validation_timeout(mut self, timeout: Duration) -> Self {
        self.validation_timeout = timeout;
        self
    }

    /// SQL run once on each new connection (HikariCP's
    /// `connectionInitSql`); several statements may be separated by `;`.
    pub fn init_sql(mut self, sql: impl Into<String>) -> Self {
        self.init_sql = Some(sql.into());
        self
    }

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

/// A pooled PostgreSQL session: the `postgres` client (it derefs to it)
/// and what the pool knows about it.
pub struct PgConnection {
    client: Client,
    backend_pid: i32,
    last_used: Instant,
}

impl fmt::Debug for PgConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConnection")
            .field("backend_pid", &self.backend_pid)
            .field("closed", &self.client.is_closed())
            .finish_non_exhaustive()
    }
}

impl PgConnection {
    /// The client.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// The server process serving this session (`pg_backend_pid()`, learnt
    /// when it connected).
    pub fn backend_pid(&self) -> i32 {
        self.backend_pid
    }
}

impl Deref for PgConnection {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl DerefMut for PgConnection {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
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

impl<T> ManageConnection for PgManager<T>
where
    T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send + Sync + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    type Connection = PgConnection;
    type Error = PgError;

    /// Connects (on one of the pool's worker threads), learns the backend
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
        Ok(PgConnection {
            client,
            backend_pid,
            last_used: Instant::now(),
        })
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
        if self
            .validate_idle_after
            .is_some_and(|idle| conn.last_used.elapsed() >= idle)
        {
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
        conn.last_used = Instant::now();
        conn.client.is_closed()
    }
}
