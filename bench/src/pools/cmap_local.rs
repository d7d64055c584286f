//! cmap-local for `bench instructions`: the pool for one thread on tokio's
//! current-thread runtime with a `LocalSet`, its tasks local, its manager
//! the others' (no check, no reset, a trivial connection). It is not an
//! [`AsyncPool`](super::AsyncPool), whose pools are shared between worker
//! threads: it runs its own loop here, the same loop as
//! `instructions::task`, with an `Rc` where the others have an `Arc`.

use std::cell::Cell;
use std::future::Future;
use std::hint::black_box;
use std::rc::Rc;

use cmap_local::{Pool, TokioLocal};

use super::{Conn, Connector, Never, WAIT_TIMEOUT};

pub const NAME: &str = "cmap-local";

struct Manager(Connector);

impl cmap_local::ManageConnection for Manager {
    type Connection = Conn;
    type Error = Never;
    const CHECKS: bool = false;
    const RESETS: bool = false;

    fn connect(&self) -> impl Future<Output = Result<Conn, Never>> {
        let connect = self.0.connect();
        async move { Ok(connect.await) }
    }

    fn classify(&self, never: &Never) -> cmap_local::EstablishErrorKind {
        let _ = never;
        cmap_local::EstablishErrorKind::Other
    }
}

/// A pool of `max` as the bench builds it (inside a `LocalSet`).
pub fn build(max: u32) -> Pool<impl cmap_local::ManageConnection<Connection = Conn>, TokioLocal> {
    Pool::builder()
        .address("bench.invalid:27017")
        .max_pool_size(max)
        .wait_queue_timeout(WAIT_TIMEOUT)
        .build(Manager(Connector::new(std::time::Duration::ZERO)))
        .expect("the bench's options are valid")
}

/// `n` cycles by `tasks` local tasks on a pool of `max`, each holding its
/// connection across one `yield_now` if `hold`.
pub fn cycles(max: u32, tasks: usize, hold: bool, n: u64) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    tokio::task::LocalSet::new().block_on(&rt, async move {
        let pool = build(max);
        let left = Rc::new(Cell::new(n as i64));
        let tasks: Vec<_> = (0..tasks)
            .map(|_| {
                let pool = pool.clone();
                let left = left.clone();
                tokio::task::spawn_local(async move {
                    while left.replace(left.get() - 1) > 0 {
                        let conn = pool.get().await.expect("a checkout within the wait timeout");
                        if hold {
                            tokio::task::yield_now().await;
                        }
                        drop(black_box(conn));
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("a task of the bench");
        }
    });
    0
}
