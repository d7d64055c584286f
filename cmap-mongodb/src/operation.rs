//! One operation from checkout to reply under one deadline: `timeoutMS`
//! (the client-side operations timeout specification, as far as one
//! server's pool goes). [`MongoPool`] for the async pools,
//! [`blocking::MongoPool`](crate::blocking::MongoPool) for the blocking one.

use std::future::Future;
use std::time::Instant;

use bson::Document;

use crate::error::{Error, Stage};
use crate::options::MongoOptions;

/// The deadline of an operation started now: `timeoutMS` from now, or
/// none without it.
pub(crate) fn deadline(options: &MongoOptions) -> Option<Instant> {
    options.timeout.map(|timeout| Instant::now() + timeout)
}

/// A checkout that gave no connection: with a deadline, a wait that ran
/// out is [`Error::TimedOut`] (at [`Stage::CheckOut`], the pool's error
/// inside); anything else is [`Error::Pool`].
pub(crate) fn no_connection<E>(error: E, timed_out: bool, deadline: Option<Instant>) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    let pool = Error::Pool(Box::new(error));
    if deadline.is_some() && timed_out {
        Error::TimedOut {
            during: Stage::CheckOut,
            cause: Some(Box::new(pool)),
        }
    } else {
        pool
    }
}

/// Runs commands on a pool of this crate's connections, from the
/// checkout to the reply, under the manager's `timeoutMS`.
///
/// With `timeoutMS` (or a deadline given), the checkout waits at most
/// what is left, then [`Connection::run_command_until`](crate::Connection::run_command_until)
/// bounds the command; without, the checkout waits `waitQueueTimeoutMS`
/// and the command has no limit, as before.
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cmap_mongodb::{bson::doc, MongoManager, MongoPool};
///
/// let uri = "mongodb://127.0.0.1:27017/?timeoutMS=5000&maxPoolSize=10";
/// let pool = cmap_tokio::Pool::builder().connection_string(uri).build(MongoManager::new(uri)?)?;
/// let reply = pool.run_command("admin", &doc! { "ping": 1 }).await?;
/// # Ok(())
/// # }
/// ```
#[cfg(any(feature = "tokio", feature = "smol"))]
pub trait MongoPool {
    /// Checks out a connection and runs `command` on `db`, all within
    /// `timeoutMS` if the connection string set it.
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`], naming the stage; [`Error::Pool`] when the
    /// pool gave no connection; anything
    /// [`Connection::run_command`](crate::Connection::run_command) gives.
    fn run_command<'a>(
        &'a self,
        db: &'a str,
        command: &'a Document,
    ) -> impl Future<Output = Result<Document, Error>> + Send + 'a;

    /// [`run_command`](MongoPool::run_command) with its own deadline in
    /// place of `timeoutMS` (`None`: no limit).
    ///
    /// # Errors
    ///
    /// As [`run_command`](MongoPool::run_command).
    fn run_command_until<'a>(
        &'a self,
        db: &'a str,
        command: &'a Document,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Document, Error>> + Send + 'a;
}

#[cfg(any(feature = "tokio", feature = "smol"))]
impl<N: crate::async_open::Net, R: cmap_async::Runtime> MongoPool for cmap_async::Pool<crate::Manager<N>, R> {
    fn run_command<'a>(
        &'a self,
        db: &'a str,
        command: &'a Document,
    ) -> impl Future<Output = Result<Document, Error>> + Send + 'a {
        self.run_command_until(db, command, deadline(self.manager().options()))
    }

    async fn run_command_until<'a>(
        &'a self,
        db: &'a str,
        command: &'a Document,
        deadline: Option<Instant>,
    ) -> Result<Document, Error> {
        let checkout = match deadline {
            None => self.get().await,
            Some(deadline) => {
                self.get_timeout(deadline.saturating_duration_since(Instant::now()))
                    .await
            }
        };
        let mut conn = checkout.map_err(|e| {
            let timed_out = e.is_timeout();
            no_connection(e, timed_out, deadline)
        })?;
        match deadline {
            None => conn.run_command(db, command).await,
            Some(deadline) => conn.run_command_until(db, command, deadline).await,
        }
    }
}
