//! Other pools' managers on cmap-tokio (`cmap_async::compat`): a bb8
//! manager's `is_valid` and `has_broken`, a deadpool manager's `recycle`
//! with its metrics, and connect errors classified from their `source()`
//! chain so that a refusing server is waited through.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cmap_tokio::compat::{Bb8, Deadpool, DeadpoolError};
use cmap_tokio::{EstablishErrorKind, GetError, Pool};

/// A driver's error, wrapping its cause as real drivers do: the pool must
/// look below it.
#[derive(Debug, thiserror::Error)]
#[error("driver: {0}")]
struct DriverError(#[source] Box<dyn std::error::Error + Send + Sync>);

fn refused() -> DriverError {
    DriverError(Box::new(std::io::Error::from(
        std::io::ErrorKind::ConnectionRefused,
    )))
}

/// A connection: its number, and whether the test broke it.
#[derive(Debug)]
struct Conn {
    id: u32,
    broken: Arc<AtomicBool>,
}

/// What the managers saw, shared with the test.
#[derive(Default)]
struct Seen {
    made: AtomicU32,
    /// Connects still to refuse.
    refuse: AtomicU32,
    /// Refuse with an error that is not I/O.
    refuse_other: AtomicBool,
    validated: AtomicU32,
    /// The connection ids whose validation fails.
    invalid: Mutex<Vec<u32>>,
    /// The recycle counts deadpool's `recycle` was shown.
    recycle_counts: Mutex<Vec<usize>>,
    /// How `recycle` fails: none, a message, the backend.
    recycle_fails: Mutex<Option<bool>>,
}

impl Seen {
    fn connect(&self) -> Result<Conn, DriverError> {
        if self
            .refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            if self.refuse_other.load(Ordering::SeqCst) {
                return Err(DriverError("authentication failed".into()));
            }
            return Err(refused());
        }
        Ok(Conn {
            id: self.made.fetch_add(1, Ordering::SeqCst) + 1,
            broken: Arc::default(),
        })
    }
}

struct Bb8Manager(Arc<Seen>);

impl bb8::ManageConnection for Bb8Manager {
    type Connection = Conn;
    type Error = DriverError;

    async fn connect(&self) -> Result<Conn, DriverError> {
        self.0.connect()
    }

    async fn is_valid(&self, conn: &mut Conn) -> Result<(), DriverError> {
        self.0.validated.fetch_add(1, Ordering::SeqCst);
        if self.0.invalid.lock().unwrap().contains(&conn.id) {
            return Err(DriverError("connection lost".into()));
        }
        Ok(())
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken.load(Ordering::SeqCst)
    }
}

struct DeadpoolManager(Arc<Seen>);

impl deadpool::managed::Manager for DeadpoolManager {
    type Type = Conn;
    type Error = DriverError;

    async fn create(&self) -> Result<Conn, DriverError> {
        self.0.connect()
    }

    async fn recycle(
        &self,
        _conn: &mut Conn,
        metrics: &deadpool::managed::Metrics,
    ) -> deadpool::managed::RecycleResult<DriverError> {
        self.0.recycle_counts.lock().unwrap().push(metrics.recycle_count);
        match *self.0.recycle_fails.lock().unwrap() {
            None => Ok(()),
            Some(true) => Err(deadpool::managed::RecycleError::message("stale")),
            Some(false) => Err(deadpool::managed::RecycleError::Backend(DriverError(
                "gone".into(),
            ))),
        }
    }
}

fn bb8_pool(
    seen: &Arc<Seen>,
    adapt: impl FnOnce(Bb8<Bb8Manager>) -> Bb8<Bb8Manager>,
) -> Pool<Bb8<Bb8Manager>> {
    Pool::builder()
        .address("fake:5432")
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(5))
        .build(adapt(Bb8::new(Bb8Manager(seen.clone()))))
        .unwrap()
}

#[tokio::test]
async fn bb8_is_valid_runs_on_every_checkout_unless_turned_off() {
    let seen = Arc::new(Seen::default());
    let pool = bb8_pool(&seen, |m| m);
    for _ in 0..3 {
        drop(pool.get().await.unwrap());
    }
    assert_eq!(
        seen.validated.load(Ordering::SeqCst),
        3,
        "bb8's test_on_check_out"
    );
    assert_eq!(seen.made.load(Ordering::SeqCst), 1);

    let seen = Arc::new(Seen::default());
    let pool = bb8_pool(&seen, |m| m.test_on_check_out(false));
    for _ in 0..3 {
        drop(pool.get().await.unwrap());
    }
    assert_eq!(seen.validated.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn bb8_a_connection_failing_is_valid_is_replaced() {
    let seen = Arc::new(Seen::default());
    let pool = bb8_pool(&seen, |m| m);
    let first = pool.get().await.unwrap();
    let id = first.id;
    drop(first);
    seen.invalid.lock().unwrap().push(id);
    let second = pool.get().await.unwrap();
    assert_ne!(second.id, id, "the invalid one was closed and another made");
    assert_eq!(pool.stats().connections_closed, 1);
}

#[tokio::test]
async fn bb8_has_broken_closes_the_connection_on_check_in() {
    let seen = Arc::new(Seen::default());
    let pool = bb8_pool(&seen, |m| m);
    let conn = pool.get().await.unwrap();
    conn.broken.store(true, Ordering::SeqCst);
    drop(conn);
    let status = pool.status();
    assert_eq!((status.available, status.in_use), (0, 0), "closed, not pooled");
    assert_eq!(pool.stats().connections_closed, 1);
}

#[tokio::test]
async fn a_refusal_deep_in_the_error_chain_is_waited_through() {
    // Three refused connects (an I/O error below the driver's own): the
    // pool labels them network errors, keeps the checkout waiting and
    // retries, and the checkout is served.
    let seen = Arc::new(Seen::default());
    seen.refuse.store(3, Ordering::SeqCst);
    let pool = bb8_pool(&seen, |m| m);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.id, 1);
    assert_eq!(seen.refuse.load(Ordering::SeqCst), 0, "every refusal was retried");
}

#[tokio::test]
async fn an_error_with_no_io_cause_fails_the_checkout() {
    let seen = Arc::new(Seen::default());
    seen.refuse.store(1, Ordering::SeqCst);
    seen.refuse_other.store(true, Ordering::SeqCst);
    let pool = bb8_pool(&seen, |m| m);
    let error = pool.get().await.unwrap_err();
    assert!(matches!(error, GetError::CheckOut(_)), "{error}");
    assert!(error.to_string().contains("authentication failed"), "{error}");
}

#[tokio::test]
async fn classify_with_overrides_the_chain() {
    // The same refusal, classified "other" by the user: the checkout fails.
    let seen = Arc::new(Seen::default());
    seen.refuse.store(1, Ordering::SeqCst);
    let pool = bb8_pool(&seen, |m| m.classify_with(|_| EstablishErrorKind::Other));
    let error = pool.get().await.unwrap_err();
    assert!(error.to_string().contains("driver"), "{error}");
}

fn deadpool_pool(seen: &Arc<Seen>) -> Pool<Deadpool<DeadpoolManager>> {
    Pool::builder()
        .address("fake:6379")
        .max_pool_size(1)
        .build(Deadpool::new(DeadpoolManager(seen.clone())))
        .unwrap()
}

#[tokio::test]
async fn deadpool_recycles_a_used_connection_with_its_metrics() {
    let seen = Arc::new(Seen::default());
    let pool = deadpool_pool(&seen);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.metrics().recycle_count, 0);
    assert!(
        seen.recycle_counts.lock().unwrap().is_empty(),
        "a new one is not recycled"
    );
    drop(conn);
    drop(pool.get().await.unwrap());
    let conn = pool.get().await.unwrap();
    assert_eq!(
        *seen.recycle_counts.lock().unwrap(),
        [0, 1],
        "deadpool's counts, before each recycle"
    );
    assert_eq!(conn.metrics().recycle_count, 2);
    assert!(conn.metrics().recycled.is_some());
    assert_eq!(seen.made.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn deadpool_a_failed_recycle_closes_the_connection() {
    for message in [true, false] {
        let seen = Arc::new(Seen::default());
        let pool = deadpool_pool(&seen);
        drop(pool.get().await.unwrap());
        *seen.recycle_fails.lock().unwrap() = Some(message);
        let conn = pool.get().await.unwrap();
        assert_eq!(conn.id, 2, "the first was closed and another made");
        assert_eq!(pool.stats().connections_closed, 1);
    }
}

#[test]
fn deadpool_errors_say_which_failed() {
    let recycle: DeadpoolError<DriverError> = DeadpoolError::Recycle("stale".into());
    assert_eq!(recycle.to_string(), "the connection could not be recycled: stale");
    let backend = DeadpoolError::Backend(refused());
    assert_eq!(
        EstablishErrorKind::of_chain(&backend),
        EstablishErrorKind::Network,
        "the cause is read through the wrapper"
    );
}
