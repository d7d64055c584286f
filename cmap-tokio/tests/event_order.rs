//! A checkout served or failed by another input (a connect that finished
//! on a runtime worker) returns only once that input's events are
//! delivered: the spec emits `ConnectionCheckedOut` or
//! `ConnectionCheckOutFailed` (and its log message), then returns or
//! throws. The callbacks below are slow on purpose: a checkout woken
//! before delivery would return while they still sleep.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cmap_tokio::{Event, ManageConnection, Pool};

/// Connects after a short delay, or fails after it.
struct Slow {
    fail: bool,
}

impl ManageConnection for Slow {
    type Connection = ();
    type Error = std::io::Error;
    fn classify(&self, e: &std::io::Error) -> cmap_tokio::EstablishErrorKind {
        cmap_tokio::EstablishErrorKind::of_io(e)
    }

    fn connect(&self) -> impl Future<Output = Result<(), std::io::Error>> + Send {
        let fail = self.fail;
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            match fail {
                true => Err(std::io::Error::other("refused")),
                false => Ok(()),
            }
        }
    }
}

/// A pool whose callback takes 50 ms over each event `name`, counting it
/// once done.
fn pool(fail: bool, name: &'static str) -> (Pool<Slow>, Arc<AtomicUsize>) {
    let delivered = Arc::new(AtomicUsize::new(0));
    let counter = delivered.clone();
    let pool = Pool::builder()
        .address("slow:27017")
        .on_event(move |event: &Event| {
            if event.name() == name {
                std::thread::sleep(Duration::from_millis(50));
                counter.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build(Slow { fail })
        .unwrap();
    (pool, delivered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_checkout_returns_after_its_event_is_delivered() {
    let (pool, delivered) = pool(true, "ConnectionCheckOutFailed");
    assert!(pool.get().await.is_err());
    assert_eq!(delivered.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_checkout_returns_after_its_event_is_delivered() {
    let (pool, delivered) = pool(false, "ConnectionCheckedOut");
    let conn = pool.get().await.unwrap();
    assert_eq!(delivered.load(Ordering::SeqCst), 1);
    drop(conn);
}
