//! cmap-local in `bench outage --refuse-only`: the pool for one thread, on
//! tokio's current-thread runtime with a `LocalSet`, with the same
//! PostgreSQL manager as the others (`tokio-postgres`, a closed session
//! refused before it is handed out) and the same load: 50 local tasks
//! looping over `get()` and `select 1`, a 10 ms pause after an error.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use cmap_local::{EstablishErrorKind, Pool, TokioLocal};
use tokio_postgres::Client;

use super::pg::{self, PgError, PgSetup};
use super::{Rec, PAUSE, QUERY_TIMEOUT};

pub const NAME: &str = "cmap-local";
pub const ADAPTIVE: &str = "cmap-local, adaptive";

struct Manager(PgSetup);

impl cmap_local::ManageConnection for Manager {
    type Connection = Client;
    type Error = PgError;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Client, PgError>> {
        pg::connect(self.0.clone())
    }

    fn classify(&self, error: &PgError) -> EstablishErrorKind {
        pg::classify(error)
    }

    async fn check(&self, conn: &mut Client, _deadline: Option<Instant>) -> Result<(), PgError> {
        pg::check(conn, self.0.round_trip_check).await
    }

    fn is_broken(&self, conn: &mut Client) -> bool {
        conn.is_closed()
    }
}

fn build(setup: &PgSetup, adaptive: bool) -> Pool<Manager, TokioLocal> {
    let mut builder = Pool::builder()
        .address(format!("127.0.0.1:{}", setup.port).as_str())
        .max_pool_size(setup.max)
        .min_pool_size(setup.min);
    if adaptive {
        builder = builder.adaptive_connecting(super::adaptive::PACE);
    }
    if let Some(wait) = setup.wait {
        builder = builder.wait_queue_timeout(wait);
    }
    builder
        .build(Manager(setup.clone()))
        .expect("valid cmap-local options")
}

/// Runs the load on a thread of its own until `stop` (or `until`), and
/// returns every `get()` and the count of query failures.
pub fn load(
    setup: PgSetup,
    adaptive: bool,
    tasks: usize,
    stop: Arc<AtomicBool>,
    until: Instant,
) -> std::thread::JoinHandle<(Vec<Rec>, u64)> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime");
        tokio::task::LocalSet::new().block_on(&rt, async move {
            let pool = build(&setup, adaptive);
            let recs = Rc::new(RefCell::new(Vec::new()));
            let failures = Rc::new(RefCell::new(0u64));
            let handles: Vec<_> = (0..tasks)
                .map(|_| {
                    let (pool, stop, recs, failures) =
                        (pool.clone(), stop.clone(), recs.clone(), failures.clone());
                    tokio::task::spawn_local(async move {
                        while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                            let start = Instant::now();
                            match pool.get().await {
                                Ok(conn) => {
                                    recs.borrow_mut().push(Rec {
                                        start,
                                        end: Instant::now(),
                                        ok: true,
                                        err: None,
                                    });
                                    let done =
                                        tokio::time::timeout(QUERY_TIMEOUT, conn.simple_query("select 1"))
                                            .await;
                                    drop(conn);
                                    if !matches!(done, Ok(Ok(_))) {
                                        *failures.borrow_mut() += 1;
                                        tokio::time::sleep(PAUSE).await;
                                    }
                                }
                                Err(e) => {
                                    recs.borrow_mut().push(Rec {
                                        start,
                                        end: Instant::now(),
                                        ok: false,
                                        err: Some(e.to_string()),
                                    });
                                    tokio::time::sleep(PAUSE).await;
                                }
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                let _ = h.await;
            }
            drop(pool);
            let recs = std::mem::take(&mut *recs.borrow_mut());
            let failures = *failures.borrow();
            (recs, failures)
        })
    })
}
