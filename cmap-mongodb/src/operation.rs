//! One operation from checkout to reply under one deadline: `timeoutMS`
//! (the client-side operations timeout specification, as far as one
//! server's pool goes). [`MongoPool`] for the async pools,
//! [`blocking::MongoPool`](crate::blocking::MongoPool) for the blocking one.

use std::future::Future;
use std::time::{Duration, Instant};

use bson::Document;

use crate::error::{Error, Stage};
use crate::options::MongoOptions;

/// The deadline of an operation started now: `timeoutMS` from now, or
/// none without it.
pub(crate) fn deadline(options: &MongoOptions) -> Option<Instant> {
    options.timeout.map(|timeout| Instant::now() + timeout)
}

/// The client backpressure specification's `BASE_BACKOFF`.
const BASE_BACKOFF: Duration = Duration::from_millis(100);
/// Its `MAX_BACKOFF`.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// `backoff = jitter * min(MAX_BACKOFF, base * 2^attempt)`, the client
/// backpressure specification's formula, `attempt` counting retries from 1
/// and `jitter` in `[0, 1)`.
pub(crate) fn backoff(attempt: u32, base: Duration, jitter: f64) -> Duration {
    let doubled = base.saturating_mul(2u32.saturating_pow(attempt));
    doubled.min(MAX_BACKOFF).mul_f64(jitter.clamp(0.0, 1.0))
}

/// The overload retry policy of one operation ("Overload retry policy"):
/// after a failed attempt, whether to try again and after how long.
pub(crate) struct OverloadRetry {
    max_retries: u32,
    attempt: u32,
}

impl OverloadRetry {
    /// A policy allowing `max_retries` retries (`maxAdaptiveRetries`).
    pub(crate) fn new(max_retries: u32) -> OverloadRetry {
        OverloadRetry {
            max_retries,
            attempt: 0,
        }
    }

    /// After an attempt failed with `error`: the backoff before the next
    /// attempt, or `None` to give `error` to the caller. Only a retryable
    /// overload error from the server is retried, at most `max_retries`
    /// times, and never when the backoff would end past `deadline`;
    /// `baseBackoffMS` replaces the base when the server gave one.
    pub(crate) fn next(&mut self, error: &Error, deadline: Option<Instant>, jitter: f64) -> Option<Duration> {
        let Error::Command(refused) = error else {
            return None;
        };
        if !refused.is_retryable_overload() || self.attempt >= self.max_retries {
            return None;
        }
        self.attempt += 1;
        let base = refused
            .base_backoff_ms
            .map_or(BASE_BACKOFF, Duration::from_millis);
        let wait = backoff(self.attempt, base, jitter);
        match deadline {
            Some(deadline) if Instant::now() + wait >= deadline => None,
            _ => Some(wait),
        }
    }
}

/// How many overload retries `options` allow a [`MongoPool`] command:
/// `maxAdaptiveRetries`, if both `retryReads` and `retryWrites` are on
/// (the client backpressure specification, "Overload retry policy" 2.4:
/// "To retry `runCommand`, both ... MUST be enabled"), else none.
pub(crate) fn overload_retries(options: &MongoOptions) -> u32 {
    if options.retry_reads && options.retry_writes {
        options.max_adaptive_retries
    } else {
        0
    }
}

/// A jitter in `[0, 1)` from the operating system's random source (0.5
/// if it fails: the average).
pub(crate) fn jitter() -> f64 {
    getrandom::u64().map_or(0.5, |bits| (bits >> 11) as f64 / (1u64 << 53) as f64)
}

/// A checkout that gave no connection: with a deadline, a wait that ran
/// out, or any failure at or past the deadline (the connect the checkout
/// started, cut at that deadline, may report first), is
/// [`Error::TimedOut`] (at [`Stage::CheckOut`], the pool's error inside);
/// anything else is [`Error::Pool`].
pub(crate) fn no_connection<E>(error: E, timed_out: bool, deadline: Option<Instant>) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    let pool = Error::Pool(Box::new(error));
    if deadline.is_some_and(|deadline| timed_out || Instant::now() >= deadline) {
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
        let mut retry = OverloadRetry::new(overload_retries(self.manager().options()));
        loop {
            let error = match attempt(self, db, command, deadline).await {
                Err(error) => error,
                done => return done,
            };
            match retry.next(&error, deadline, jitter()) {
                // The runtime's timer, through `within`: nothing to race.
                Some(wait) => {
                    let _ = N::within(Instant::now() + wait, std::future::pending::<()>()).await;
                }
                None => return Err(error),
            }
        }
    }
}

/// One attempt: a fresh checkout, then the command.
#[cfg(any(feature = "tokio", feature = "smol"))]
async fn attempt<N: crate::async_open::Net, R: cmap_async::Runtime>(
    pool: &cmap_async::Pool<crate::Manager<N>, R>,
    db: &str,
    command: &Document,
    deadline: Option<Instant>,
) -> Result<Document, Error> {
    let checkout = match deadline {
        None => pool.get().await,
        Some(deadline) => {
            pool.get_timeout(deadline.saturating_duration_since(Instant::now()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CommandError;

    fn overloaded(base_backoff_ms: Option<i64>) -> Error {
        let mut reply = bson::doc! {
            "ok": 0.0, "code": 462, "errorLabels": ["SystemOverloadedError", "RetryableError"],
        };
        if let Some(ms) = base_backoff_ms {
            reply.insert("baseBackoffMS", ms);
        }
        Error::Command(CommandError::from_reply(&reply).unwrap())
    }

    #[test]
    fn the_backoff_is_the_specifications_formula() {
        let ms = Duration::from_millis;
        // The average jitter gives the specification's 100 ms and 200 ms.
        assert_eq!(backoff(1, BASE_BACKOFF, 0.5), ms(100));
        assert_eq!(backoff(2, BASE_BACKOFF, 0.5), ms(200));
        assert_eq!(backoff(3, BASE_BACKOFF, 1.0), ms(800));
        assert_eq!(backoff(10, BASE_BACKOFF, 1.0), MAX_BACKOFF, "capped");
        assert_eq!(backoff(40, BASE_BACKOFF, 1.0), MAX_BACKOFF, "no overflow");
        assert_eq!(backoff(1, ms(250), 0.0), Duration::ZERO);
    }

    #[test]
    fn only_overload_errors_are_retried_at_most_max_times_and_with_the_servers_base() {
        let mut retry = OverloadRetry::new(2);
        assert_eq!(
            retry.next(&overloaded(Some(30)), None, 1.0),
            Some(Duration::from_millis(60))
        );
        assert_eq!(
            retry.next(&overloaded(None), None, 1.0),
            Some(Duration::from_millis(400))
        );
        assert_eq!(
            retry.next(&overloaded(None), None, 1.0),
            None,
            "maxAdaptiveRetries reached"
        );

        let mut retry = OverloadRetry::new(5);
        let one_label = Error::Command(
            CommandError::from_reply(
                &bson::doc! { "ok": 0, "code": 462, "errorLabels": ["SystemOverloadedError"] },
            )
            .unwrap(),
        );
        assert_eq!(retry.next(&one_label, None, 1.0), None);
        assert_eq!(retry.next(&Error::Broken, None, 1.0), None);
        assert_eq!(
            OverloadRetry::new(0).next(&overloaded(None), None, 1.0),
            None,
            "opt-in"
        );
    }

    #[test]
    fn no_retry_whose_backoff_ends_past_the_deadline() {
        let mut retry = OverloadRetry::new(2);
        let soon = Instant::now() + Duration::from_millis(150);
        assert_eq!(
            retry.next(&overloaded(Some(100)), Some(soon), 1.0),
            None,
            "200 ms > 150 ms"
        );
        let mut retry = OverloadRetry::new(2);
        assert!(retry.next(&overloaded(Some(10)), Some(soon), 1.0).is_some());
    }

    #[test]
    fn a_checkout_failing_at_its_deadline_is_a_timeout() {
        let refused = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let past = Some(Instant::now());
        let err = no_connection(refused(), false, past);
        assert!(
            matches!(err, Error::TimedOut { during: Stage::CheckOut, cause: Some(ref c) } if matches!(**c, Error::Pool(_))),
            "{err:?}"
        );
        let ahead = Some(Instant::now() + Duration::from_secs(60));
        assert!(matches!(no_connection(refused(), false, ahead), Error::Pool(_)));
        assert!(matches!(
            no_connection(refused(), true, ahead),
            Error::TimedOut { .. }
        ));
        assert!(
            matches!(no_connection(refused(), true, None), Error::Pool(_)),
            "no deadline"
        );
    }

    #[test]
    fn the_jitter_is_in_zero_to_one() {
        for _ in 0..1000 {
            assert!((0.0..1.0).contains(&jitter()));
        }
    }
}
