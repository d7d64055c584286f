//! The blocking `Pool`'s controls each reach the core, and a synchronous
//! manager's hooks are called, defaults included.

mod common;

use std::time::Duration;

use cmap_blocking::{Address, Clear, GetError, ManageConnection, PoolState, ServiceId};
use cmap_testkit::FakeError;
use common::{builder, SyncFake};

/// A manager that keeps every default but `check`, and names its server
/// and the service each connection reached.
struct Minimal {
    check_fails: bool,
}

impl ManageConnection for Minimal {
    type Connection = u32;
    type Error = FakeError;

    fn connect(&self) -> Result<u32, FakeError> {
        Ok(7)
    }

    fn classify(&self, _: &FakeError) -> cmap_blocking::EstablishErrorKind {
        cmap_blocking::EstablishErrorKind::Network
    }

    fn check(&self, _: &mut u32) -> Result<(), FakeError> {
        if self.check_fails {
            Err(FakeError("check failed"))
        } else {
            Ok(())
        }
    }

    fn address(&self) -> Option<Address> {
        Some(Address::new("db.example", 5432))
    }

    fn service_id(&self, conn: &u32) -> Option<ServiceId> {
        Some(ServiceId([*conn as u8; 12]))
    }
}

#[test]
fn a_manager_that_overrides_only_check_is_checked() {
    // `check_within`'s default calls `check`.
    let pool = cmap_blocking::Pool::builder()
        .build(Minimal { check_fails: true })
        .unwrap();
    let err = pool.get().expect_err("a new connection that fails its check");
    assert!(matches!(err, GetError::CheckFailed { .. }), "{err:?}");
}

#[test]
fn the_managers_address_and_service_reach_the_pool() {
    let pool = cmap_blocking::Pool::builder()
        .configure(|o| o.load_balanced(true))
        .build(Minimal { check_fails: false })
        .unwrap();
    assert_eq!(pool.address(), &Address::new("db.example", 5432));
    let conn = pool.get().unwrap();
    assert_eq!(conn.service_id(), Some(ServiceId([7; 12])));
}

#[test]
fn the_facades_controls_reach_the_async_pool() {
    let pool = builder().max_pool_size(2).build(SyncFake::default()).unwrap();
    pool.resize(1, 5).unwrap();
    let options = pool.options();
    assert_eq!((options.min_pool_size(), options.max_pool_size()), (1, 5));
    assert!(pool.resize(6, 5).is_err(), "minPoolSize above maxPoolSize");
    pool.clear_with(Clear::default()).unwrap();
    assert_eq!(pool.status().state, PoolState::Paused);
    assert!(
        pool.clear_with(Clear {
            service_id: Some(ServiceId([1; 12])),
            ..Clear::default()
        })
        .is_err(),
        "a service id outside load-balanced mode"
    );
    assert!(format!("{pool:?}").contains("Pool"), "{pool:?}");
}

#[test]
fn close_gracefully_says_how_many_connections_it_forced() {
    let pool = builder().max_pool_size(2).build(SyncFake::default()).unwrap();
    let held = pool.get().unwrap();
    assert_eq!(pool.close_gracefully(Duration::from_millis(20)), 1);
    drop(held);
    let pool = builder().build(SyncFake::default()).unwrap();
    drop(pool.get().unwrap());
    assert_eq!(pool.close_gracefully(Duration::from_millis(20)), 0);
}

#[test]
fn the_flight_recorders_recording_reaches_the_facade() {
    let pool = builder()
        .flight_recorder(1_000)
        .build(SyncFake::default())
        .unwrap();
    drop(pool.get().unwrap());
    assert!(pool.recording().is_some());
    let plain = builder().build(SyncFake::default()).unwrap();
    assert!(plain.recording().is_none());
}

#[test]
fn try_next_takes_a_buffered_event_without_waiting() {
    let pool = builder().build(SyncFake::default()).unwrap();
    let mut events = pool.events();
    assert!(events.try_next().is_none(), "nothing happened yet");
    drop(pool.get().unwrap());
    let first = events.try_next().expect("the checkout's events are buffered");
    assert_eq!(first.name(), "ConnectionCheckOutStarted");
}

/// A manager whose check of an idle connection takes all the time left
/// and fails, as a validation round trip to a blackholed server does.
struct StallingCheck;

impl ManageConnection for StallingCheck {
    type Connection = u32;
    type Error = FakeError;

    fn connect(&self) -> Result<u32, FakeError> {
        Ok(1)
    }

    fn classify(&self, _: &FakeError) -> cmap_blocking::EstablishErrorKind {
        cmap_blocking::EstablishErrorKind::Network
    }

    fn check_within(&self, _: &mut u32, remaining: Option<Duration>) -> Result<(), FakeError> {
        std::thread::sleep(remaining.unwrap_or_default());
        Err(FakeError("no answer within the deadline"))
    }

    fn address(&self) -> Option<Address> {
        Some(Address::new("db.example", 5432))
    }
}

#[test]
fn a_timeout_after_a_check_that_ran_out_the_deadline_reports_the_whole_wait() {
    // minPoolSize makes the connection before any checkout: it is idle,
    // not made for the checkout, so its failed check is retried.
    let pool = cmap_blocking::Pool::builder()
        .max_pool_size(1)
        .min_pool_size(1)
        .wait_queue_timeout(Duration::from_millis(300))
        .build(StallingCheck)
        .unwrap();
    pool.wait_ready(Duration::from_secs(5)).unwrap();
    let err = pool
        .get()
        .expect_err("the idle connection's check ran out the deadline");
    assert!(err.is_timeout(), "{err:?}");
    assert!(err.to_string().contains("after 300 ms"), "{err}");
}
