//! The manager's user-facing shape, written once for every runtime:
//! [`Manager<R>`], named [`MySqlManager`](crate::MySqlManager) on tokio
//! and [`blocking::MySqlManager`](crate::blocking::MySqlManager) on
//! threads. How a session is opened, checked and reset is the runtime's
//! (`tokio_manager.rs`, `blocking.rs`).
//!
//! Unlike cmap-postgres's `Manager<T, R>` there is no TLS parameter: both
//! MySQL clients take TLS in their `Opts`.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use crate::{Address, Reset, DEFAULT_VALIDATE_IDLE_AFTER, DEFAULT_VALIDATION_TIMEOUT};

/// The client library a [`Manager`] opens its sessions with: [`Tokio`]
/// (`mysql_async`) or [`Threads`] (the synchronous `mysql` crate). Sealed.
pub trait Runtime: sealed::Sealed + Send + Sync + 'static {
    /// The library's connection options (`Opts`).
    type Opts: Send + Sync + 'static;
    /// The library's connection: what a pooled [`Connection`] derefs to.
    type Client: Client;
    /// The options' host, port, user and database, for
    /// [`Manager::address`] and `Debug` (the client's own `Debug` of its
    /// options prints the password).
    #[doc(hidden)]
    fn describe(opts: &Self::Opts) -> (String, u16, Option<&str>, Option<&str>);
}

/// A client library's connection, as a [`Connection`] holds it. Sealed.
pub trait Client: sealed::Sealed + Send + 'static {
    /// Whether the client knows its session is gone (after an I/O error,
    /// or a cancelled query).
    fn is_disconnected(&self) -> bool;
}

/// `mysql_async`, for a `cmap_tokio::Pool` (feature `tokio`).
#[cfg(feature = "tokio")]
#[derive(Debug)]
pub enum Tokio {}

/// The synchronous `mysql` crate, for a `cmap_blocking::Pool` (feature
/// `blocking`).
#[cfg(feature = "blocking")]
#[derive(Debug)]
pub enum Threads {}

mod sealed {
    pub trait Sealed {}
    #[cfg(feature = "tokio")]
    impl Sealed for super::Tokio {}
    #[cfg(feature = "tokio")]
    impl Sealed for mysql_async::Conn {}
    #[cfg(feature = "blocking")]
    impl Sealed for super::Threads {}
    #[cfg(feature = "blocking")]
    impl Sealed for mysql::Conn {}
}

/// Opens and looks after MySQL or MariaDB sessions. Use it as
/// [`MySqlManager`](crate::MySqlManager) (tokio) or
/// [`blocking::MySqlManager`](crate::blocking::MySqlManager) (threads).
///
/// ```no_run
/// # #[cfg(feature = "tokio")]
/// # fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use cmap_mysql::{MySqlManager, Reset};
///
/// let opts = mysql_async::OptsBuilder::default()
///     .ip_or_hostname("db")
///     .user(Some("app"))
///     .db_name(Some("app"))
///     .init(vec!["SET time_zone = '+00:00'"]);
/// let manager = MySqlManager::new(opts)
///     .validate_idle_after(Duration::from_secs(30))
///     .reset(Reset::ResetConnection);
/// let pool = cmap_tokio::Pool::builder().address(manager.address()).max_pool_size(10).build(manager)?;
/// # Ok(())
/// # }
/// ```
pub struct Manager<R: Runtime> {
    pub(crate) opts: R::Opts,
    pub(crate) reset: Reset,
    pub(crate) validate_idle_after: Option<Duration>,
    pub(crate) validation_timeout: Duration,
    _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> fmt::Debug for Manager<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the options themselves: their `Debug` shows the password.
        let (host, port, user, db) = R::describe(&self.opts);
        f.debug_struct("MySqlManager")
            .field("host", &host)
            .field("port", &port)
            .field("user", &user)
            .field("db", &db)
            .field("reset", &self.reset)
            .field("validate_idle_after", &self.validate_idle_after)
            .field("validation_timeout", &self.validation_timeout)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Manager<R> {
    /// A manager connecting with `opts` (an `Opts`, an `OptsBuilder`, or
    /// anything else the client turns into its `Opts`). The defaults:
    /// [`Reset::Rollback`] on check-in, and a ping on checkout for
    /// connections idle [`DEFAULT_VALIDATE_IDLE_AFTER`] (500 ms) or more.
    pub fn new(opts: impl Into<R::Opts>) -> Self {
        Manager {
            opts: opts.into(),
            reset: Reset::default(),
            validate_idle_after: Some(DEFAULT_VALIDATE_IDLE_AFTER),
            validation_timeout: DEFAULT_VALIDATION_TIMEOUT,
            _runtime: PhantomData,
        }
    }

    /// The options it connects with.
    pub fn opts(&self) -> &R::Opts {
        &self.opts
    }

    /// The server's address for the pool's builder: the options' host and
    /// port (`localhost:3306` unless they say otherwise).
    pub fn address(&self) -> Address {
        let (host, port, _, _) = R::describe(&self.opts);
        Address::new(host, port)
    }

    /// What the reset on check-in does (default [`Reset::Rollback`]).
    pub fn reset(mut self, reset: Reset) -> Self {
        self.reset = reset;
        self
    }

    /// Pings a connection before handing it out when it has been idle in
    /// the pool for at least `idle` (`Duration::ZERO`: on every checkout).
    /// A connection that fails it is closed and the checkout takes
    /// another. Neither client notices a session the server ended while
    /// it sat idle, so this is on by default (500 ms).
    pub fn validate_idle_after(mut self, idle: Duration) -> Self {
        self.validate_idle_after = Some(idle);
        self
    }

    /// No ping on checkout: a session the server ended while idle is
    /// handed out, and the application's first query on it fails.
    pub fn no_validation(mut self) -> Self {
        self.validate_idle_after = None;
        self
    }

    /// How long the ping may take (default [`DEFAULT_VALIDATION_TIMEOUT`],
    /// 5 s). The synchronous client cannot bound one call: for it, the
    /// `Opts`' read and write timeouts bound the ping instead.
    pub fn validation_timeout(mut self, timeout: Duration) -> Self {
        self.validation_timeout = timeout;
        self
    }

    /// Whether a connection idle since `last_used` is due a ping.
    pub(crate) fn due_validation(&self, last_used: Instant) -> bool {
        self.validate_idle_after
            .is_some_and(|idle| last_used.elapsed() >= idle)
    }
}

/// A pooled session: the client's connection (it derefs to it) and what
/// the pool knows about it.
pub struct Connection<C> {
    pub(crate) conn: C,
    pub(crate) thread_id: u32,
    pub(crate) last_used: Instant,
}

impl<C> Connection<C> {
    /// A session just opened, with the server's id `thread_id`.
    pub(crate) fn new(conn: C, thread_id: u32) -> Self {
        Connection {
            conn,
            thread_id,
            last_used: Instant::now(),
        }
    }

    /// The server's id of this session (`CONNECTION_ID()`): the `Id` of
    /// `SHOW PROCESSLIST`, for `KILL` or the server's log.
    pub fn thread_id(&self) -> u32 {
        self.thread_id
    }
}

impl<C: Client> Connection<C> {
    /// The check-in's `is_broken`: a client that knows its session is
    /// gone. Also notes when the session was last used, for the
    /// validation threshold.
    pub(crate) fn touch_and_test(&mut self) -> bool {
        self.last_used = Instant::now();
        self.conn.is_disconnected()
    }
}

impl<C: Client> fmt::Debug for Connection<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlConnection")
            .field("thread_id", &self.thread_id)
            .field("disconnected", &self.conn.is_disconnected())
            .finish_non_exhaustive()
    }
}

impl<C> Deref for Connection<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.conn
    }
}

impl<C> DerefMut for Connection<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.conn
    }
}
