//! The pool's threads: one timer thread per pool, gone with it; a waiting
//! `get()` and an idle pool park, never spin. A test binary of its own, so
//! that no other test's threads are counted.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{builder, eventually, SyncFake};

/// CPU time used so far by this process, or by this thread.
fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// This process's threads named `name` (Linux: `/proc/self/task`).
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

#[test]
fn one_timer_thread_per_pool_gone_with_it_and_nothing_spins() {
    // 1. A pool has one timer thread, and an idle pool costs next to no CPU.
    let pool = builder().min_pool_size(2).build(SyncFake::default()).unwrap();
    eventually("populated", || pool.status().available == 2);
    eventually("one timer", || threads_named("cmap-timer") == 1);
    eventually("the connects are done", || threads_named("cmap-connect") == 0);
    let cpu0 = cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID);
    thread::sleep(Duration::from_millis(300));
    let cpu = cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    assert!(
        cpu < Duration::from_millis(30),
        "an idle pool cost {cpu:?} of CPU in 300 ms"
    );

    // 2. A `get()` waiting 200 ms parks: almost no CPU, and it fails on time.
    let one = builder().max_pool_size(1).build(SyncFake::default()).unwrap();
    let _held = one.get().unwrap();
    let (t0, cpu0) = (Instant::now(), cpu_time(libc::CLOCK_THREAD_CPUTIME_ID));
    assert!(one
        .get_timeout(Duration::from_millis(200))
        .unwrap_err()
        .is_timeout());
    let (took, cpu) = (t0.elapsed(), cpu_time(libc::CLOCK_THREAD_CPUTIME_ID) - cpu0);
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(300),
        "{took:?}"
    );
    assert!(cpu < Duration::from_millis(20), "waiting cost {cpu:?} of CPU");
    eventually("two pools, two timers", || threads_named("cmap-timer") == 2);

    // 3. ... and each timer ends with its pool.
    drop(pool);
    eventually("one pool, one timer", || threads_named("cmap-timer") == 1);
    drop(_held);
    drop(one);
    eventually("no pool, no timer", || threads_named("cmap-timer") == 0);
}
