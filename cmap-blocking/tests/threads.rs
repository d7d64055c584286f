//! `ThreadRuntime`'s threads: one per pool for its background work, gone
//! with the pool; `block_on` and `Sleep` park, never spin. A test binary
//! of its own, so that no other test's threads are counted.

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Wake};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use cmap_blocking::{block_on, unblock, Runtime, Sleep, ThreadRuntime};
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

fn busy_threads() -> usize {
    let (threads, idle) = ThreadRuntime::threads();
    threads - idle
}

#[test]
fn threads_one_per_pool_gone_with_it_and_nothing_spins() {
    // 1. `block_on` of a sleep parks: 200 ms asleep cost almost no CPU.
    let rt = ThreadRuntime;
    let cpu0 = cpu_time(libc::CLOCK_THREAD_CPUTIME_ID);
    let t0 = Instant::now();
    block_on(rt.sleep_until(t0 + Duration::from_millis(200)));
    let (took, cpu) = (t0.elapsed(), cpu_time(libc::CLOCK_THREAD_CPUTIME_ID) - cpu0);
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(260),
        "{took:?}"
    );
    assert!(cpu < Duration::from_millis(20), "sleeping cost {cpu:?} of CPU");

    // 2. Nested calls, each with its own deadlines.
    let t0 = Instant::now();
    let inner = block_on(async {
        let inner = block_on(async {
            rt.sleep_until(Instant::now() + Duration::from_millis(20)).await;
            7
        });
        rt.sleep_until(Instant::now() + Duration::from_millis(20)).await;
        inner * 6
    });
    assert_eq!(inner, 42);
    assert!(t0.elapsed() >= Duration::from_millis(40));

    // 3. A sleep polled outside `block_on` is woken all the same (a worker
    //    thread waits for it).
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    let t0 = Instant::now();
    let mut sleep = pin!(Sleep::until(t0 + Duration::from_millis(30)));
    while sleep.as_mut().poll(&mut cx).is_pending() {
        thread::park();
    }
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert!(t0.elapsed() < Duration::from_millis(130), "{:?}", t0.elapsed());

    // 4. `unblock` runs the call on a worker thread.
    let worker = block_on(unblock(|| thread::current().name().map(str::to_owned)));
    assert_eq!(worker.as_deref(), Some("cmap-blocking"));

    // 5. A pool holds one worker thread for its background work while it
    //    lives, and an idle pool costs next to no CPU.
    eventually("the helpers above are done", || busy_threads() == 0);
    let pool = builder().min_pool_size(2).build(SyncFake::default()).unwrap();
    eventually("populated", || pool.status().available == 2);
    eventually("the connects are done", || busy_threads() == 1);
    let cpu0 = cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID);
    thread::sleep(Duration::from_millis(300));
    let cpu = cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    assert!(
        cpu < Duration::from_millis(30),
        "an idle pool cost {cpu:?} of CPU in 300 ms"
    );
    let other = builder().build(SyncFake::default()).unwrap();
    eventually("two pools, two threads", || busy_threads() == 2);

    // 6. ... and ends with it.
    drop(pool);
    eventually("one pool, one thread", || busy_threads() == 1);
    drop(other);
    eventually("no pool, no thread busy", || busy_threads() == 0);
}

#[test]
fn a_sleep_carried_from_one_block_on_to_the_next_still_fires() {
    // Each thread reuses its `block_on` state from call to call: a sleep
    // registered with an earlier call must register again with the next
    // one, not be taken for one of its own.
    let rt = ThreadRuntime;
    let mut sleep = Box::pin(rt.sleep_until(Instant::now() + Duration::from_millis(30)));
    let first_poll = block_on(std::future::poll_fn(|cx| {
        std::task::Poll::Ready(sleep.as_mut().poll(cx).is_pending())
    }));
    assert!(first_poll, "not due yet");
    // Another call in between, with a sleep of its own.
    block_on(rt.sleep_until(Instant::now() + Duration::from_millis(5)));
    let t0 = Instant::now();
    block_on(sleep);
    assert!(t0.elapsed() < Duration::from_secs(5), "the carried sleep fired");
}
