//! The spec's fork rule with a real fork: a pool used in a forked child
//! resets itself on its first checkout there and leaves the parent's
//! connections alone (neither reset nor dropped), while the parent's pool
//! goes on untouched. A test binary of its own: a fork copies only the
//! forking thread, so the fewer threads the better.
#![cfg(unix)]

mod common;

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use cmap_blocking::PoolState;
use cmap_testkit::Names;
use common::{builder, SyncFake};

/// What the child checks; its exit status is the number of the first
/// check that failed (0: all passed). It must not panic or print: the
/// test harness's machinery is the parent's.
fn in_child(
    pool: &cmap_blocking::Pool<SyncFake>,
    m: &SyncFake,
    lent: cmap_blocking::PooledConnection<SyncFake>,
    names: &Names,
) -> i32 {
    names.take();
    // 1. The first checkout notices the fork and gets a new connection.
    let Ok(conn) = pool.get_timeout(Duration::from_secs(5)) else {
        return 1;
    };
    if conn.n != 3 {
        return 2;
    }
    let seen = names.take();
    if seen.first() != Some(&"ConnectionPoolCleared") || !seen.contains(&"ConnectionPoolReady") {
        return 3;
    }
    let s = pool.status();
    if (s.state, s.total, s.in_use) != (PoolState::Ready, 1, 1) {
        return 4;
    }
    // 2. The parent's two connections were forgotten, not dropped.
    if m.alive() != 3 {
        return 5;
    }
    // 3. The one checked out across the fork comes back without a reset
    //    and is not dropped either.
    if !lent.is_interrupted() {
        return 6;
    }
    let resets = m.resets.load(Ordering::SeqCst);
    drop(lent);
    if m.resets.load(Ordering::SeqCst) != resets || m.alive() != 3 {
        return 7;
    }
    // 4. The child's own connection is pooled, and closed on close.
    drop(conn);
    if pool.status().available != 1 {
        return 8;
    }
    // 5. The background thread runs again: timeouts fire.
    let held = (pool.get().ok(), pool.get().ok());
    if held.0.is_none() || held.1.is_none() {
        return 11;
    }
    let t0 = Instant::now();
    match pool.get_timeout(Duration::from_millis(30)) {
        Err(e) if e.is_timeout() && t0.elapsed() < Duration::from_secs(1) => {}
        _ => return 9,
    }
    drop(held);
    pool.close();
    let t0 = Instant::now();
    while m.alive() != 2 {
        if t0.elapsed() > Duration::from_secs(5) {
            return 10;
        }
        thread::sleep(Duration::from_millis(1));
    }
    0
}

#[test]
fn a_forked_child_resets_the_pool_and_the_parent_keeps_its_own() {
    let m = SyncFake::default();
    let names = Names::default();
    let pool = builder()
        .max_pool_size(2)
        .on_event(names.callback())
        .build(m.clone())
        .unwrap();
    let lent = pool.get().unwrap();
    drop(pool.get().unwrap()); // connection 2, idle
    assert_eq!(m.alive(), 2);
    // Let the connect threads go idle before forking.
    thread::sleep(Duration::from_millis(50));

    // SAFETY: the child runs only `in_child` and leaves with `_exit`, never
    // returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| in_child(&pool, &m, lent, &names)))
                .unwrap_or(100);
        // SAFETY: ends the child at once, running nothing of the parent's.
        unsafe { libc::_exit(code) };
    }

    // The parent waits (at most 20 s) for the child's verdict.
    let mut status = 0;
    let t0 = Instant::now();
    loop {
        // SAFETY: waits for our own child, `status` is a valid int.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            break;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            // SAFETY: kills our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked child hung");
        }
        thread::sleep(Duration::from_millis(5));
    }
    assert!(libc::WIFEXITED(status), "the child died: status {status}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child's check that failed");

    // The parent's pool never saw the fork.
    let s = pool.status();
    assert_eq!(
        (s.state, s.total, s.in_use, s.available),
        (PoolState::Ready, 2, 1, 1)
    );
    assert!(!lent.is_interrupted());
    drop(lent);
    let again = pool.get().unwrap();
    assert!(again.n <= 2, "one of the parent's own connections");
    assert!(!names.take().contains(&"ConnectionPoolCleared"));
}
