//! The async manager: `tokio-postgres` for cmap-tokio.

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_tokio::{EstablishErrorKind, ManageConnection};
use tokio_postgres::error::SqlState;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, Config, NoTls, Socket};

use crate::{Address, PgError, Reset, DEFAULT_VALIDATION_TIMEOUT, IN_NO_TRANSACTION};

/// The future a [`configure`](PgManager::configure) hook returns.
pub type ConfigureFuture<'a> = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send + 'a>>;

type ConfigureFn = dyn for<'a> Fn(&'a Client) -> ConfigureFuture<'a> + Send + Sync;

/// Opens and looks after PostgreSQL sessions through `tokio-postgres`, for a
/// [`cmap_tokio::Pool`].
///
/// `T` is the TLS connector: [`NoTls`], or one of the TLS crates'
/// (`postgres-native-tls`, `postgres-openssl`, `tokio-postgres-rustls`).
/// Each new session's socket is driven by a task spawned on tokio, which
/// ends when the session is closed.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use cmap_postgres::{PgManager, Reset};
/// use tokio_postgres::NoTls;
///
/// let config: tokio_postgres::Config = "host=db user=app dbname=app".parse()?;
/// let manager = PgManager::new(config, NoTls)
///     .init_sql("SET search_path TO app, public")
///     .configure(|client| Box::pin(async move { client.batch_execute("SET TIME ZONE 'UTC'").await }))
///     .validate_idle_after(Duration::from_secs(30))
///     .reset(Reset::DiscardAll);
/// let pool = cmap_tokio::Pool::builder().address(manager.address()).max_pool_size(10).build(manager)?;
/// # Ok(())
/// # }
/// ```
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
    /// A manager connecting with `config` through `tls`. The defaults: no
    /// validation round trip on checkout ([`is_closed`](Client::is_closed)
    /// only), [`Reset::Rollback`] on check-in, no setup SQL.
    pub fn new(config: Config, tls: T) -> PgManager<T> {
        PgManager {
            config,
            tls,
            reset: Reset::default(),
            validate_idle_after: None,
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

    /// Validates a connection with a round trip (a protocol `Sync`) before
    /// handing it out, when it has been idle in the pool for at least
    /// `idle` (default: never; `Duration::ZERO`: on every checkout). A
    /// connection that fails it is closed and the checkout takes another.
    /// HikariCP validates every connection idle longer than 500 ms.
    pub fn validate_idle_after(mut self, idle: Duration) -> Self {
        self.validate_idle_after = Some(idle);
        self
    }

    /// How long the validation round trip may take (default
    /// [`DEFAULT_VALIDATION_TIMEOUT`], 5 s).
    pub fn validation_timeout(mut self, timeout: Duration) -> Self {
        self.validation_timeout = timeout;
        self
    }

    /// SQL run once on each new connection, before it is first handed out
    /// (HikariCP's `connectionInitSql`), such as `SET search_path TO app`.
    /// Several statements may be separated by `;`. A failure fails the
    /// connect (SQLSTATE errors are classified as "other": the pool is
    /// cleared and the checkout fails).
    pub fn init_sql(mut self, sql: impl Into<String>) -> Self {
        self.init_sql = Some(sql.into());
        self
    }

    /// A hook run once on each new connection, after [`init_sql`](Self::init_sql)
    /// (psycopg's `configure`). A failure fails the connect.
    ///
    /// ```
    /// # let config = tokio_postgres::Config::new();
    /// let manager = cmap_postgres::PgManager::new(config, tokio_postgres::NoTls)
    ///     .configure(|client| Box::pin(async move {
    ///         client.batch_execute("SET statement_timeout = '5s'").await
    ///     }));
    /// ```
    pub fn configure<F>(mut self, hook: F) -> Self
    where
        F: for<'a> Fn(&'a Client) -> ConfigureFuture<'a> + Send + Sync + 'static,
    {
        self.configure = Some(Arc::new(hook));
        self
    }
}

/// A pooled PostgreSQL session: the `tokio-postgres` client (it derefs to
/// it) and what the pool knows about it.
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
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The client, to start a transaction (`transaction` takes `&mut`).
    pub fn client_mut(&mut self) -> &mut Client {
        &mut self.client
    }

    /// The server process serving this session (`pg_backend_pid()`, learnt
    /// when it connected): the `pid` of `pg_stat_activity`, for
    /// `pg_terminate_backend` or the server's log.
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

/// Rolls back the session's transaction if it is in one (see the crate
/// documentation for why it asks first).
pub(crate) async fn rollback_if_open(client: &Client) -> Result<(), tokio_postgres::Error> {
    let open = match client.simple_query(IN_NO_TRANSACTION).await {
        Ok(messages) => crate::in_transaction(&messages),
        Err(e) if e.code() == Some(&SqlState::IN_FAILED_SQL_TRANSACTION) => true,
        Err(e) => return Err(e),
    };
    if open {
        client.batch_execute("ROLLBACK").await?;
    }
    Ok(())
}

impl<T> ManageConnection for PgManager<T>
where
    T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    type Connection = PgConnection;
    type Error = PgError;

    /// TCP or Unix socket, TLS, startup and authentication; spawns the
    /// task that drives the socket; learns the backend pid; runs
    /// `init_sql` and the `configure` hook.
    async fn connect(&self) -> Result<PgConnection, PgError> {
        let (client, connection) = self.config.connect(self.tls.clone()).await?;
        tokio::spawn(async move {
            // Ends when the client is dropped or the server closes the
            // session; its error reaches the client's next query.
            let _ = connection.await;
        });
        self.set_up(client).await
    }

    /// [`PgError::kind`]: SQLSTATE class 28 is authentication, 53300 and
    /// 57P03 and I/O errors are network (overload), anything else other.
    fn classify(&self, error: &PgError) -> EstablishErrorKind {
        error.kind()
    }

    fn address(&self) -> Option<Address> {
        Some(Self::address(self))
    }

    /// A closed client is refused; with
    /// [`validate_idle_after`](PgManager::validate_idle_after), a
    /// connection idle that long is asked for a round trip.
    fn check(&self, conn: &mut PgConnection) -> impl Future<Output = Result<(), PgError>> + Send {
        self.validate(conn)
    }

    /// As [`Reset`] says.
    fn reset(&self, conn: &mut PgConnection) -> impl Future<Output = Result<(), PgError>> + Send {
        Self::reset_session(conn, self.reset)
    }

    /// A client that saw its socket close. Also notes when the connection
    /// was last used, for [`validate_idle_after`](PgManager::validate_idle_after).
    fn is_broken(&self, conn: &mut PgConnection) -> bool {
        Self::touch_and_test(conn)
    }
}

impl<T> PgManager<T> {
    /// What every new session goes through once its socket task runs:
    /// the backend pid, `init_sql`, the `configure` hook (shared by the
    /// tokio and the cmap-local managers).
    pub(crate) async fn set_up(&self, client: Client) -> Result<PgConnection, PgError> {
        let backend_pid =
            crate::backend_pid_of(&client.simple_query("SELECT pg_backend_pid()").await?).unwrap_or(0);
        if let Some(sql) = &self.init_sql {
            client.batch_execute(sql).await?;
        }
        if let Some(configure) = &self.configure {
            configure(&client).await?;
        }
        Ok(PgConnection {
            client,
            backend_pid,
            last_used: Instant::now(),
        })
    }

    /// The body of `check` (see the tokio manager's).
    pub(crate) fn validate<'a>(
        &self,
        conn: &'a mut PgConnection,
    ) -> impl Future<Output = Result<(), PgError>> + Send + 'a {
        let validate = self
            .validate_idle_after
            .is_some_and(|idle| conn.last_used.elapsed() >= idle);
        let timeout = self.validation_timeout;
        async move {
            if conn.client.is_closed() {
                return Err(PgError::Closed);
            }
            if validate {
                match tokio::time::timeout(timeout, conn.client.check_connection()).await {
                    Ok(answer) => answer?,
                    Err(_) => return Err(PgError::ValidationTimeout),
                }
            }
            Ok(())
        }
    }

    /// The body of `reset` (see the tokio manager's).
    pub(crate) async fn reset_session(conn: &mut PgConnection, reset: Reset) -> Result<(), PgError> {
        if reset == Reset::Nothing {
            return Ok(());
        }
        rollback_if_open(&conn.client).await?;
        if reset == Reset::DiscardAll {
            conn.client.batch_execute("DISCARD ALL").await?;
            conn.client.clear_type_cache();
        }
        Ok(())
    }

    /// The body of `is_broken` (see the tokio manager's).
    pub(crate) fn touch_and_test(conn: &mut PgConnection) -> bool {
        conn.last_used = Instant::now();
        conn.client.is_closed()
    }

    /// The reset setting, for the local manager.
    #[cfg(feature = "local")]
    pub(crate) fn reset_setting(&self) -> Reset {
        self.reset
    }

    /// The TLS connector, for the local manager.
    #[cfg(feature = "local")]
    pub(crate) fn tls_connector(&self) -> T
    where
        T: Clone,
    {
        self.tls.clone()
    }
}
