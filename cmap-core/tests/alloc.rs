//! The fast paths allocate nothing: with events off and the pool warm,
//! checking out an available connection (by action or directly) and
//! checking it back in makes no heap allocation at all.
//!
//! This binary has its own global allocator, which counts the allocations
//! made by the thread under test; keep this file to this one test.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cmap_core::{Action, CheckOut, Output, Pool, PoolOptions, Wait};
use support::{origin, Conn};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Only the thread under test counts (the test harness has others).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn note() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed through to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn check_out_and_in_of_an_available_connection_allocates_nothing() {
    let mut now = origin();
    let options = PoolOptions::builder().max_pool_size(4).build().unwrap();
    let mut pool: Pool<Conn> = Pool::new(now, "test:27017".parse().unwrap(), options);
    pool.set_events_enabled(false);
    pool.handle_ready(now).unwrap();
    while pool.poll_output().is_some() {}

    // Warm up: one connection established, then used a few times.
    let waiter = pool.handle_check_out(now);
    let mut connection = None;
    while let Some(output) = pool.poll_output() {
        match output {
            Output::Action(Action::Establish { id }) => {
                pool.handle_established(now, id, Conn(id.0), None).unwrap();
            }
            Output::Action(Action::Deliver {
                waiter: w,
                connection: c,
            }) if w == waiter => {
                connection = Some(c);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    pool.handle_check_in(now, connection.expect("delivered")).unwrap();
    while pool.poll_output().is_some() {}

    // Every other pair takes the direct path the adapters use.
    let mut direct = false;
    let mut cycle = |now| {
        direct = !direct;
        let connection = if direct {
            match pool.handle_check_out_direct(now, Wait::Until(None)) {
                CheckOut::Ready(connection) => connection,
                other => panic!("expected a connection at once, got {other:?}"),
            }
        } else {
            let waiter = pool.handle_check_out(now);
            match pool.poll_output() {
                Some(Output::Action(Action::Deliver {
                    waiter: w,
                    connection,
                })) if w == waiter => connection,
                other => panic!("expected a delivery, got {other:?}"),
            }
        };
        assert!(pool.poll_output().is_none());
        pool.handle_check_in(now, connection).unwrap();
        assert!(pool.poll_output().is_none());
    };
    for _ in 0..100 {
        now += Duration::from_micros(1);
        cycle(now);
    }

    COUNTING.with(|c| c.set(true));
    for _ in 0..10_000 {
        now += Duration::from_micros(1);
        cycle(now);
    }
    COUNTING.with(|c| c.set(false));
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    assert_eq!(
        allocations, 0,
        "10,000 check-out/check-in pairs allocated {allocations} times"
    );
}
