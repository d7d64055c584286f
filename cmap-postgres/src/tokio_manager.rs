//! The async manager: `tokio-postgres` for cmap-tokio.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use cmap_tokio::{EstablishErrorKind, ManageConnection};
use tokio_postgres::error::SqlState;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, NoTls, Socket};

use crate::manager::{Connection, Manager, Tokio};
use crate::{Address, PgError, Reset, IN_NO_TRANSACTION};

/// The future a [`configure`](PgManager::configure) hook returns.
pub type ConfigureFuture<'a> = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send + 'a>>;

#[doc(hidden)]
pub type ConfigureFn = dyn for<'a> Fn(&'a Client) -> ConfigureFuture<'a> + Send + Sync;

/// Opens and looks after PostgreSQL sessions through `tokio-postgres`, for
/// a [`cmap_tokio::Pool`] (or a `cmap_local::Pool`, feature `local`): the
/// [`Manager`] of the [`Tokio`] runtime. Each new session's socket is
/// driven by a task spawned on tokio, which ends when the session is
/// closed.
pub type PgManager<T = NoTls> = Manager<T, Tokio>;

/// A pooled PostgreSQL session of a [`PgManager`]: the `tokio-postgres`
/// client (it derefs to it) and what the pool knows about it.
pub type PgConnection = Connection<Client>;

impl Connection<Client> {
    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

impl<T> Manager<T, Tokio> {
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

impl<T> ManageConnection for Manager<T, Tokio>
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
        conn.touch_and_test()
    }
}

impl<T> Manager<T, Tokio> {
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
        Ok(Connection::new(client, backend_pid))
    }

    /// The body of `check` (shared with the cmap-local manager).
    pub(crate) fn validate<'a>(
        &self,
        conn: &'a mut PgConnection,
    ) -> impl Future<Output = Result<(), PgError>> + Send + 'a {
        let validate = self.due_validation(conn.last_used);
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

    /// The body of `reset` (shared with the cmap-local manager).
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
}
