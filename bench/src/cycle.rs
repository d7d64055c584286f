//! The uncontended cost of one cycle: one task (or thread) checks out and
//! checks in, back to back, with no hold and nobody else. No scheduler
//! hand-off and no second core take part, so this is each pool's own
//! per-checkout cost, which the sweep mixes with the runtime's.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::pools::{AsyncPool, BlockingPool, Connector, Setup};
use crate::rt::AsyncRt;

/// Cycles per timed run, after as many untimed.
pub const CYCLES: u64 = 1_000_000;

fn setup() -> Setup {
    Setup {
        max: 16,
        connector: Connector::new(Duration::ZERO),
        ..Setup::default()
    }
}

/// Nanoseconds per cycle of an async pool, on a one-worker runtime.
pub fn cycle_async<P: AsyncPool>(cycles: u64) -> f64 {
    let setup = setup();
    P::Rt::block_on(1, |_| async move {
        let pool = P::build(&setup).await;
        let mut timed = 0.0;
        for round in 0..2 {
            let began = Instant::now();
            for _ in 0..cycles {
                black_box(pool.get().await.expect("a checkout of an idle pool"));
            }
            if round == 1 {
                timed = began.elapsed().as_nanos() as f64 / cycles as f64;
            }
        }
        timed
    })
}

/// Nanoseconds per cycle of a blocking pool, on the calling thread.
pub fn cycle_blocking<P: BlockingPool>(cycles: u64) -> f64 {
    let pool = P::build(&setup());
    let mut timed = 0.0;
    for round in 0..2 {
        let began = Instant::now();
        for _ in 0..cycles {
            black_box(pool.get().expect("a checkout of an idle pool"));
        }
        if round == 1 {
            timed = began.elapsed().as_nanos() as f64 / cycles as f64;
        }
    }
    timed
}
