//! An r2d2 manager on cmap-blocking (`compat::R2d2`): `is_valid` on every
//! checkout, `has_broken` on check-in, and connect errors classified from
//! their `source()` chain so that a refusing server is waited through.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cmap_blocking::compat::R2d2;
use cmap_blocking::{EstablishErrorKind, Pool};

#[derive(Debug)]
struct DriverError(Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "driver: {}", self.0)
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

#[derive(Default)]
struct Seen {
    made: AtomicU32,
    refuse: AtomicU32,
    validated: AtomicU32,
    invalid: AtomicBool,
}

#[derive(Debug)]
struct Conn {
    id: u32,
    broken: bool,
}

struct Manager(Arc<Seen>);

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = DriverError;

    fn connect(&self) -> Result<Conn, DriverError> {
        let seen = &self.0;
        if seen
            .refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(DriverError(Box::new(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            ))));
        }
        let id = seen.made.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(Conn { id, broken: false })
    }

    fn is_valid(&self, _conn: &mut Conn) -> Result<(), DriverError> {
        self.0.validated.fetch_add(1, Ordering::SeqCst);
        if self.0.invalid.swap(false, Ordering::SeqCst) {
            return Err(DriverError("connection lost".into()));
        }
        Ok(())
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken
    }
}

fn pool(seen: &Arc<Seen>, adapt: impl FnOnce(R2d2<Manager>) -> R2d2<Manager>) -> Pool<R2d2<Manager>> {
    Pool::builder()
        .address("fake:5432")
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(5))
        .build(adapt(R2d2::new(Manager(seen.clone()))))
        .unwrap()
}

#[test]
fn is_valid_runs_on_every_checkout_and_a_failure_replaces_the_connection() {
    let seen = Arc::new(Seen::default());
    let pool = pool(&seen, |m| m);
    drop(pool.get().unwrap());
    drop(pool.get().unwrap());
    assert_eq!(
        seen.validated.load(Ordering::SeqCst),
        2,
        "r2d2's test_on_check_out"
    );
    seen.invalid.store(true, Ordering::SeqCst);
    let conn = pool.get().unwrap();
    assert_eq!(conn.id, 2, "the invalid one was closed and another made");

    let seen = Arc::new(Seen::default());
    let pool = self::pool(&seen, |m| m.test_on_check_out(false));
    drop(pool.get().unwrap());
    drop(pool.get().unwrap());
    assert_eq!(seen.validated.load(Ordering::SeqCst), 0);
}

#[test]
fn has_broken_closes_the_connection_on_check_in() {
    let seen = Arc::new(Seen::default());
    let pool = pool(&seen, |m| m);
    let mut conn = pool.get().unwrap();
    conn.broken = true;
    drop(conn);
    assert_eq!(pool.status().available, 0);
    assert_eq!(pool.stats().connections_closed, 1);
}

#[test]
fn a_refusal_below_the_drivers_error_is_waited_through_unless_classified_otherwise() {
    let seen = Arc::new(Seen::default());
    seen.refuse.store(3, Ordering::SeqCst);
    let refusing = pool(&seen, |m| m);
    assert_eq!(refusing.get().unwrap().id, 1);
    assert_eq!(seen.refuse.load(Ordering::SeqCst), 0, "every refusal was retried");

    let seen = Arc::new(Seen::default());
    seen.refuse.store(1, Ordering::SeqCst);
    let pool = pool(&seen, |m| m.classify_with(|_| EstablishErrorKind::Other));
    let error = pool.get().unwrap_err();
    assert!(error.to_string().contains("driver"), "{error}");
}
