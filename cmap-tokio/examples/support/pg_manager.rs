//! A `ManageConnection` for PostgreSQL through `tokio-postgres`, shared by
//! the `postgres` example and the `postgres` integration tests.

use std::future::Future;
use std::ops::{Deref, DerefMut};

use cmap_tokio::{EstablishErrorKind, ManageConnection};
use tokio_postgres::{Client, Config, NoTls};

/// Opens PostgreSQL connections from a `tokio_postgres::Config`.
pub struct PgManager {
    config: Config,
}

impl PgManager {
    /// A manager connecting with `config` (set an `application_name` to
    /// find the pool's sessions in `pg_stat_activity`).
    pub fn new(config: Config) -> PgManager {
        PgManager { config }
    }
}

/// A pooled PostgreSQL session: the client, and its server process id,
/// learnt once when connecting (a per-connection setup step lives in
/// `connect` the same way).
pub struct PgConnection {
    pub client: Client,
    pub backend_pid: i32,
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

/// Why a PostgreSQL connection could not be made or used.
#[derive(Debug)]
pub enum PgError {
    /// The driver's error (connecting, authenticating, a query).
    Postgres(tokio_postgres::Error),
    /// The session is gone (the server closed it).
    Closed,
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PgError::Postgres(e) => write!(f, "postgres: {e}"),
            PgError::Closed => f.write_str("the PostgreSQL session is closed"),
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PgError::Postgres(e) => Some(e),
            PgError::Closed => None,
        }
    }
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> PgError {
        PgError::Postgres(e)
    }
}

impl ManageConnection for PgManager {
    type Connection = PgConnection;
    type Error = PgError;

    /// TCP, startup and authentication; the socket is driven by a task of
    /// its own, which ends when the client is dropped or the server closes
    /// the session.
    fn connect(&self) -> impl Future<Output = Result<PgConnection, PgError>> + Send {
        let config = self.config.clone();
        async move {
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            let backend_pid = client.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
            Ok(PgConnection { client, backend_pid })
        }
    }

    /// The server's own answers by SQLSTATE (class 28: the credentials;
    /// 53300 too many connections and 57P03 cannot connect now: overload),
    /// otherwise the socket's error.
    fn classify(&self, error: &PgError) -> EstablishErrorKind {
        let PgError::Postgres(e) = error else {
            return EstablishErrorKind::Network;
        };
        match e.as_db_error().map(|db| db.code().code()) {
            Some(code) if code.starts_with("28") => EstablishErrorKind::Authentication,
            Some("53300" | "57P03") => EstablishErrorKind::Network,
            Some(_) => EstablishErrorKind::Other,
            None => EstablishErrorKind::of_chain(e),
        }
    }

    /// No round trip: a session the server closed (its socket task ended)
    /// is refused before it is handed out.
    fn check(&self, conn: &mut PgConnection) -> impl Future<Output = Result<(), PgError>> + Send {
        std::future::ready(if conn.client.is_closed() {
            Err(PgError::Closed)
        } else {
            Ok(())
        })
    }

    fn is_broken(&self, conn: &mut PgConnection) -> bool {
        conn.client.is_closed()
    }
}
