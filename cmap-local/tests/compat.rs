//! A bb8 manager on a one-thread pool (`compat::Bb8`): validated on every
//! checkout, closed on check-in when `has_broken` says so, and a refusal
//! below the driver's error waited through.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use cmap_local::compat::Bb8;
use cmap_local::{Pool, TokioLocal};

#[derive(Debug)]
struct Refused(std::io::Error);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "driver: {}", self.0)
    }
}

impl std::error::Error for Refused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

#[derive(Default)]
struct Seen {
    refuse: AtomicU32,
    validated: AtomicU32,
}

struct Manager(Arc<Seen>);

impl bb8::ManageConnection for Manager {
    type Connection = bool;
    type Error = Refused;

    async fn connect(&self) -> Result<bool, Refused> {
        if self
            .0
            .refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(Refused(std::io::ErrorKind::ConnectionRefused.into()));
        }
        Ok(false)
    }

    async fn is_valid(&self, _broken: &mut bool) -> Result<(), Refused> {
        self.0.validated.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn has_broken(&self, broken: &mut bool) -> bool {
        *broken
    }
}

#[test]
fn a_bb8_manager_serves_a_local_pool() {
    cmap_testkit::rt::on_local_set(async {
        let manager = Arc::new(Seen::default());
        manager.refuse.store(2, Ordering::SeqCst);
        let pool: Pool<Bb8<Manager>, TokioLocal> = Pool::builder()
            .address("fake:5432")
            .build(Bb8::new(Manager(manager.clone())))
            .unwrap();
        let conn = pool.get().await.unwrap();
        assert_eq!(
            manager.refuse.load(Ordering::SeqCst),
            0,
            "the refusals were waited through"
        );
        drop(conn);
        let mut conn = pool.get().await.unwrap();
        assert_eq!(
            manager.validated.load(Ordering::SeqCst),
            2,
            "bb8's test_on_check_out"
        );
        *conn = true;
        let closed = pool.stats().connections_closed;
        drop(conn);
        assert_eq!(
            pool.stats().connections_closed,
            closed + 1,
            "has_broken closed it"
        );
        assert_eq!(pool.status().available, 0);
    });
}
