//! cmap-local on compio, a thread-per-core runtime (feature `compio`):
//! connections established in local tasks, a waiter served by a check-in,
//! a deadline that expires on compio's timer.

use std::rc::Rc;
use std::time::Duration;

use cmap_local::{Compio, EstablishErrorKind, ManageConnection, Pool};

struct Slow;

impl ManageConnection for Slow {
    type Connection = Rc<()>;
    type Error = std::io::Error;
    const CHECKS: bool = false;
    const RESETS: bool = false;

    async fn connect(&self) -> Result<Rc<()>, std::io::Error> {
        compio_runtime::time::sleep(Duration::from_millis(5)).await;
        Ok(Rc::new(()))
    }

    fn classify(&self, e: &std::io::Error) -> EstablishErrorKind {
        EstablishErrorKind::of_io(e)
    }
}

#[test]
fn a_pool_serves_waits_and_times_out_on_compio() {
    compio_runtime::Runtime::new().unwrap().block_on(async {
        let pool: Pool<Slow, Compio> = Pool::builder()
            .address("localhost:5432")
            .max_pool_size(1)
            .build(Slow)
            .unwrap();
        let held = pool.get().await.unwrap();
        // A waiter, served when the connection comes back.
        let waiter = compio_runtime::spawn(pool.get());
        compio_runtime::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(pool.status().waiting, 1);
        drop(held);
        let served = waiter.await.unwrap().unwrap();
        assert_eq!(served.connection_id().0, 1, "the same connection, reused");
        // A deadline that expires while the connection is held.
        let error = pool.get_timeout(Duration::from_millis(30)).await.unwrap_err();
        assert!(error.is_timeout(), "{error}");
        drop(served);
        assert_eq!(pool.status().available, 1);
    });
}
