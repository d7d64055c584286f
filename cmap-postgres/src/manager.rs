//! The manager's user-facing shape, written once for every runtime:
//! [`Manager<T, R>`], named [`PgManager`](crate::PgManager) on tokio
//! (cmap-tokio and cmap-local pools) and
//! [`blocking::PgManager`](crate::blocking::PgManager) on threads
//! (cmap-blocking). How a session is opened, checked and reset is the
//! runtime's (`tokio_manager.rs`, `local_manager.rs`, `blocking.rs`).

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::config::Host;

use crate::{Address, Reset, DEFAULT_VALIDATION_TIMEOUT};

/// The client library a [`Manager`] opens its sessions with: [`Tokio`]
/// (`tokio-postgres`) or [`Threads`] (the synchronous `postgres` crate).
/// Sealed.
pub trait Runtime: sealed::Sealed + Send + Sync + 'static {
    /// The library's connection configuration.
    type Config: fmt::Debug + Send + Sync + 'static;
    /// The library's client: what a pooled [`Connection`] derefs to.
    type Client: Client;
    /// The hook type of [`configure`](Manager::configure) on this runtime.
    #[doc(hidden)]
    type Configure: ?Sized + Send + Sync;
    /// The default of [`Manager::validate_idle_after`].
    const DEFAULT_VALIDATE_IDLE_AFTER: Option<Duration>;
    /// The configuration's hosts and ports, for [`Manager::address`].
    #[doc(hidden)]
    fn hosts_and_ports(config: &Self::Config) -> (&[Host], &[u16]);
}

/// A client library's client, as a [`Connection`] holds it. Sealed.
pub trait Client: sealed::Sealed + Send + 'static {
    /// Whether the client saw its session end.
    fn is_closed(&self) -> bool;
}

#[cfg(feature = "tokio")]
impl Client for tokio_postgres::Client {
    fn is_closed(&self) -> bool {
        tokio_postgres::Client::is_closed(self)
    }
}

#[cfg(feature = "blocking")]
impl Client for postgres::Client {
    fn is_closed(&self) -> bool {
        postgres::Client::is_closed(self)
    }
}

/// `tokio-postgres`, for a `cmap_tokio::Pool` (feature `tokio`) or a
/// `cmap_local::Pool` (feature `local`): each session's socket is driven
/// by a task spawned on tokio (on the current `LocalSet` for cmap-local).
#[cfg(feature = "tokio")]
#[derive(Debug)]
pub enum Tokio {}

/// The synchronous `postgres` crate, for a `cmap_blocking::Pool` (feature
/// `blocking`).
#[cfg(feature = "blocking")]
#[derive(Debug)]
pub enum Threads {}

#[cfg(feature = "tokio")]
impl Runtime for Tokio {
    type Config = tokio_postgres::Config;
    type Client = tokio_postgres::Client;
    type Configure = crate::tokio_manager::ConfigureFn;
    /// No round trip: a tokio client reads its socket all the time, so
    /// `is_closed` learns of a session the server ended.
    const DEFAULT_VALIDATE_IDLE_AFTER: Option<Duration> = None;

    fn hosts_and_ports(config: &Self::Config) -> (&[Host], &[u16]) {
        (config.get_hosts(), config.get_ports())
    }
}

#[cfg(feature = "blocking")]
impl Runtime for Threads {
    type Config = postgres::Config;
    type Client = postgres::Client;
    type Configure = crate::blocking::ConfigureFn;
    /// HikariCP's 500 ms: a synchronous client reads its socket only while
    /// it is used, so `is_closed` cannot learn meanwhile that the server
    /// ended the session (a restart, `pg_terminate_backend`, an idle
    /// timeout).
    const DEFAULT_VALIDATE_IDLE_AFTER: Option<Duration> = Some(crate::blocking::DEFAULT_VALIDATE_IDLE_AFTER);

    fn hosts_and_ports(config: &Self::Config) -> (&[Host], &[u16]) {
        (config.get_hosts(), config.get_ports())
    }
}

mod sealed {
    pub trait Sealed {}
    #[cfg(feature = "tokio")]
    impl Sealed for super::Tokio {}
    #[cfg(feature = "tokio")]
    impl Sealed for tokio_postgres::Client {}
    #[cfg(feature = "blocking")]
    impl Sealed for super::Threads {}
    #[cfg(feature = "blocking")]
    impl Sealed for postgres::Client {}
}

/// Opens and looks after PostgreSQL sessions. Use it as
/// [`PgManager`](crate::PgManager) (tokio) or
/// [`blocking::PgManager`](crate::blocking::PgManager) (threads); `T` is
/// the TLS connector: [`NoTls`](crate::NoTls), or one of the TLS crates'
/// (`postgres-native-tls`, `postgres-openssl`, `tokio-postgres-rustls`).
///
/// ```no_run
/// # #[cfg(feature = "tokio")]
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
pub struct Manager<T, R: Runtime> {
    pub(crate) config: R::Config,
    pub(crate) tls: T,
    pub(crate) reset: Reset,
    pub(crate) validate_idle_after: Option<Duration>,
    pub(crate) validation_timeout: Duration,
    pub(crate) init_sql: Option<String>,
    pub(crate) configure: Option<Arc<R::Configure>>,
    _runtime: PhantomData<fn() -> R>,
}

impl<T, R: Runtime> fmt::Debug for Manager<T, R> {
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

impl<T, R: Runtime> Manager<T, R> {
    /// A manager connecting with `config` through `tls`. The defaults:
    /// [`Reset::Rollback`] on check-in, no setup SQL, and a validation
    /// round trip on checkout as the runtime's
    /// [`DEFAULT_VALIDATE_IDLE_AFTER`](Runtime::DEFAULT_VALIDATE_IDLE_AFTER)
    /// says (tokio: none, `is_closed` only; threads: for connections idle
    /// 500 ms or more).
    pub fn new(config: R::Config, tls: T) -> Self {
        Manager {
            config,
            tls,
            reset: Reset::default(),
            validate_idle_after: R::DEFAULT_VALIDATE_IDLE_AFTER,
            validation_timeout: DEFAULT_VALIDATION_TIMEOUT,
            init_sql: None,
            configure: None,
            _runtime: PhantomData,
        }
    }

    /// The configuration it connects with.
    pub fn config(&self) -> &R::Config {
        &self.config
    }

    /// The server's address for the pool's builder: the configuration's
    /// first host and port (`localhost:5432` when it names none).
    pub fn address(&self) -> Address {
        let (hosts, ports) = R::hosts_and_ports(&self.config);
        crate::address_of(hosts, ports)
    }

    /// What the reset on check-in does (default [`Reset::Rollback`]).
    pub fn reset(mut self, reset: Reset) -> Self {
        self.reset = reset;
        self
    }

    /// Validates a connection with a round trip before handing it out,
    /// when it has been idle in the pool for at least `idle`
    /// (`Duration::ZERO`: on every checkout, as r2d2's
    /// `test_on_check_out`). A connection that fails it is closed and the
    /// checkout takes another. HikariCP validates every connection idle
    /// longer than 500 ms.
    pub fn validate_idle_after(mut self, idle: Duration) -> Self {
        self.validate_idle_after = Some(idle);
        self
    }

    /// No validation round trip: only a client that already saw its
    /// session end is refused.
    pub fn no_validation(mut self) -> Self {
        self.validate_idle_after = None;
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

    /// Whether a connection idle since `last_used` is due a validation
    /// round trip.
    pub(crate) fn due_validation(&self, last_used: Instant) -> bool {
        self.validate_idle_after
            .is_some_and(|idle| last_used.elapsed() >= idle)
    }
}

/// A pooled PostgreSQL session: the client (it derefs to it) and what the
/// pool knows about it. [`PgConnection`](crate::PgConnection) on tokio,
/// [`blocking::PgConnection`](crate::blocking::PgConnection) on threads.
pub struct Connection<C> {
    pub(crate) client: C,
    pub(crate) backend_pid: i32,
    pub(crate) last_used: Instant,
}

impl<C> Connection<C> {
    /// A session just opened, serving `backend_pid`.
    pub(crate) fn new(client: C, backend_pid: i32) -> Self {
        Connection {
            client,
            backend_pid,
            last_used: Instant::now(),
        }
    }

    /// The client, for its `&mut self` methods (a transaction; every query
    /// of the synchronous client).
    pub fn client_mut(&mut self) -> &mut C {
        &mut self.client
    }

    /// The server process serving this session (`pg_backend_pid()`, learnt
    /// when it connected): the `pid` of `pg_stat_activity`, for
    /// `pg_terminate_backend` or the server's log.
    pub fn backend_pid(&self) -> i32 {
        self.backend_pid
    }
}

impl<C: Client> Connection<C> {
    /// The check-in's `is_broken`: a client that saw its session end. Also
    /// notes when the session was last used, for the validation threshold.
    pub(crate) fn touch_and_test(&mut self) -> bool {
        self.last_used = Instant::now();
        self.client.is_closed()
    }
}

impl<C: Client> fmt::Debug for Connection<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConnection")
            .field("backend_pid", &self.backend_pid)
            .field("closed", &self.client.is_closed())
            .finish_non_exhaustive()
    }
}

impl<C> Deref for Connection<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.client
    }
}

impl<C> DerefMut for Connection<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.client
    }
}
