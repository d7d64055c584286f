//! The uncontended cost of one cycle: one task (or thread) checks out and
//! checks in, back to back, with no hold and nobody else. No scheduler
//! hand-off and no second core take part, so this is each pool's own
//! per-checkout cost, which the sweep mixes with the runtime's.
//!
//! The pair cycle is the same loop on two threads at once, each pinned to
//! its own core: every line the pool writes per checkout crosses between
//! the cores, with no scheduler in the way and no chance of both threads
//! sharing one core. It is what a pool costs when its users really run in
//! parallel, the regime the sweep at T <= M falls into only some of the
//! time on a two-core machine.

use std::hint::black_box;
use std::sync::Barrier;
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

/// `n` check out + check in of an async pool, back to back.
async fn run_async<P: AsyncPool>(pool: &P, n: u64) {
    for _ in 0..n {
        black_box(pool.get().await.expect("a checkout with a connection to spare"));
    }
}

/// `n` check out + check in of a blocking pool, back to back.
fn run_blocking<P: BlockingPool>(pool: &P, n: u64) {
    for _ in 0..n {
        black_box(pool.get().expect("a checkout with a connection to spare"));
    }
}

/// Nanoseconds per cycle of the second of two rounds of `cycles` (the
/// first warms up).
fn second_round(cycles: u64, mut round: impl FnMut(u64)) -> f64 {
    round(cycles);
    let began = Instant::now();
    round(cycles);
    began.elapsed().as_nanos() as f64 / cycles as f64
}

/// Nanoseconds per cycle of an async pool, on a one-worker runtime.
pub fn cycle_async<P: AsyncPool>(cycles: u64) -> f64 {
    let setup = setup();
    P::Rt::block_on(1, |_| async move {
        let pool = P::build(&setup).await;
        // The rounds of `second_round`, awaited on the runtime's worker.
        run_async(&pool, cycles).await;
        let began = Instant::now();
        run_async(&pool, cycles).await;
        began.elapsed().as_nanos() as f64 / cycles as f64
    })
}

/// Nanoseconds per cycle of a blocking pool, on the calling thread.
pub fn cycle_blocking<P: BlockingPool>(cycles: u64) -> f64 {
    let pool = P::build(&setup());
    second_round(cycles, |n| run_blocking(&pool, n))
}

/// Runs `cycle` on two threads pinned to cores 0 and 1, released together:
/// the wall time of the second round over `cycles` is the nanoseconds per
/// cycle of each thread while the other runs too.
fn pair(cycles: u64, cycle: impl Fn(u64) + Sync) -> f64 {
    let start = Barrier::new(2);
    second_round(cycles, |n| {
        std::thread::scope(|s| {
            for core in 0..2 {
                let (start, cycle) = (&start, &cycle);
                s.spawn(move || {
                    pin_to_core(core);
                    start.wait();
                    cycle(n);
                });
            }
        })
    })
}

/// Nanoseconds per cycle of an async pool, two threads at once (see
/// [`pair`]), each driving its loop on its own thread within the runtime.
pub fn pair_async<P: AsyncPool>(cycles: u64) -> f64 {
    let setup = setup();
    P::Rt::block_on(1, |rt| async move {
        let pool = P::build(&setup).await;
        pair(cycles, |n| rt.block_here(run_async(&pool, n)))
    })
}

/// Nanoseconds per cycle of a blocking pool, two threads at once.
pub fn pair_blocking<P: BlockingPool>(cycles: u64) -> f64 {
    let pool = P::build(&setup());
    pair(cycles, |n| run_blocking(&pool, n))
}

/// Pins the calling thread to `core`; on a machine with fewer cores, or
/// where pinning is not supported, it stays where the scheduler puts it.
fn pin_to_core(core: usize) {
    let _ = core_affinity::set_for_current(core_affinity::CoreId { id: core });
}
