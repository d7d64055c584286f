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

/// Runs `cycle` on two threads pinned to cores 0 and 1, started together;
/// the wall time of the timed round over `cycles`: nanoseconds per cycle
/// of each thread while the other runs too.
fn pair(cycles: u64, cycle: impl Fn(u64) + Sync) -> f64 {
    let start = Barrier::new(2);
    let mut timed = 0.0;
    for round in 0..2 {
        let began = std::thread::scope(|s| {
            let threads: Vec<_> = (0..2)
                .map(|core| {
                    let (start, cycle) = (&start, &cycle);
                    s.spawn(move || {
                        pin_to_core(core);
                        start.wait();
                        cycle(cycles);
                    })
                })
                .collect();
            let began = Instant::now();
            for thread in threads {
                thread.join().expect("a pair thread panicked");
            }
            began
        });
        if round == 1 {
            timed = began.elapsed().as_nanos() as f64 / cycles as f64;
        }
    }
    timed
}

/// Nanoseconds per cycle of an async pool, two threads at once (see
/// [`pair`]), each driving its loop on its own thread within the runtime.
pub fn pair_async<P: AsyncPool>(cycles: u64) -> f64 {
    let setup = setup();
    P::Rt::block_on(1, |rt| async move {
        let pool = P::build(&setup).await;
        pair(cycles, |n| {
            rt.block_here(async {
                for _ in 0..n {
                    black_box(pool.get().await.expect("a checkout with a connection to spare"));
                }
            })
        })
    })
}

/// Nanoseconds per cycle of a blocking pool, two threads at once.
pub fn pair_blocking<P: BlockingPool>(cycles: u64) -> f64 {
    let pool = P::build(&setup());
    pair(cycles, |n| {
        for _ in 0..n {
            black_box(pool.get().expect("a checkout with a connection to spare"));
        }
    })
}

/// Pins the calling thread to `core`; on a machine with fewer cores, or
/// where pinning is not supported, it stays where the scheduler puts it.
fn pin_to_core(core: usize) {
    let _ = core_affinity::set_for_current(core_affinity::CoreId { id: core });
}
