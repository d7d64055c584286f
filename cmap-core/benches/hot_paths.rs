//! The pool's hot paths: checking an available connection out and back in
//! (events off and on), and the wait-queue operations that must stay
//! O(log n) in the queue length: cancelling a queued checkout and expiring
//! a deadline.
//!
//! `cargo bench -p cmap-core --bench hot_paths`

use std::hint::black_box;
use std::time::{Duration, Instant};

use cmap_core::{Action, Output, Pool, PoolOptions, Pooled, WaiterId};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// A fake connection.
#[derive(Debug)]
struct Conn;

/// Benchmarks need one real instant as the origin of their virtual time.
#[allow(clippy::disallowed_methods)]
fn origin() -> Instant {
    Instant::now()
}

/// A ready pool of at most `max` connections, without background runs,
/// holding one established connection that is available.
fn warm_pool(now: Instant, max: u32, events: bool) -> Pool<Conn> {
    let options = PoolOptions::builder()
        .max_pool_size(max)
        .maintenance_interval(None)
        .build()
        .unwrap();
    let mut pool = Pool::new(now, "bench:27017".parse().unwrap(), options);
    pool.set_events_enabled(events);
    pool.handle_ready(now).unwrap();
    let connection = check_out_establishing(&mut pool, now);
    pool.handle_check_in(now, connection).unwrap();
    while pool.poll_output().is_some() {}
    pool
}

/// Checks out a connection, establishing it if the pool must.
fn check_out_establishing(pool: &mut Pool<Conn>, now: Instant) -> Pooled<Conn> {
    let waiter = pool.handle_check_out_until(now, None);
    let mut delivered = None;
    while let Some(output) = pool.poll_output() {
        match output {
            Output::Action(Action::Establish { id }) => pool.handle_established(now, id, Conn, None).unwrap(),
            Output::Action(Action::Deliver {
                waiter: w,
                connection,
            }) if w == waiter => delivered = Some(connection),
            _ => {}
        }
    }
    delivered.expect("a connection")
}

fn check_out_check_in(c: &mut Criterion) {
    let mut group = c.benchmark_group("check_out_check_in");
    for events in [false, true] {
        let now = origin();
        let mut pool = warm_pool(now, 10, events);
        let name = if events { "events_on" } else { "events_off" };
        group.bench_function(name, |b| {
            b.iter(|| {
                let waiter = pool.handle_check_out(black_box(now));
                let mut connection = None;
                while let Some(output) = pool.poll_output() {
                    if let Output::Action(Action::Deliver {
                        waiter: w,
                        connection: c,
                    }) = output
                    {
                        debug_assert_eq!(w, waiter);
                        connection = Some(c);
                    }
                }
                let connection = connection.expect("an available connection");
                pool.handle_check_in(black_box(now), connection).unwrap();
                while let Some(output) = pool.poll_output() {
                    black_box(output);
                }
            })
        });
    }
    group.finish();
}

/// A pool of one connection, checked out, and `n` checkouts queued behind
/// it with the deadlines `deadline(i)` gives the i-th (0-based). Returns
/// the pool, the held connection (kept alive) and the first queued id.
fn queued_pool(
    now: Instant,
    n: u64,
    deadline: impl Fn(u64) -> Option<Instant>,
) -> (Pool<Conn>, Pooled<Conn>, WaiterId) {
    let mut pool = warm_pool(now, 1, false);
    let held = check_out_establishing(&mut pool, now);
    let first = pool.handle_check_out_until(now, deadline(0));
    for i in 1..n {
        pool.handle_check_out_until(now, deadline(i));
    }
    assert!(pool.poll_output().is_none());
    assert_eq!(pool.status().waiting as u64, n);
    (pool, held, first)
}

const QUEUE_LENGTHS: [u64; 3] = [1_000, 10_000, 100_000];

/// Cancels the checkout in the middle of a queue of `n` and queues a new
/// one, so the queue stays at `n`. The ids cancelled are consecutive, so
/// the one cancelled is always the `n/2`-th in the queue.
fn cancel_in_the_middle(c: &mut Criterion) {
    let mut group = c.benchmark_group("cancel_middle_of_queue");
    for n in QUEUE_LENGTHS {
        let now = origin();
        let (mut pool, _held, first) = queued_pool(now, n, |_| None);
        let mut next = first.0 + n / 2;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                pool.handle_cancel(now, WaiterId(next)).unwrap();
                next += 1;
                black_box(pool.handle_check_out_until(now, None));
            })
        });
        assert_eq!(pool.status().waiting as u64, n);
    }
    group.finish();
}

/// Expires the earliest of `n` deadlines (1 µs apart) with `handle_timeout`
/// at that deadline, and queues a new checkout with the latest deadline, so
/// the queue stays at `n`.
fn expire_one_deadline(c: &mut Criterion) {
    let mut group = c.benchmark_group("expire_one_of_queue");
    let step = Duration::from_micros(1);
    for n in QUEUE_LENGTHS {
        let t0 = origin();
        let at = |i: u64| t0 + step * u32::try_from(i + 1).unwrap();
        let (mut pool, _held, _first) = queued_pool(t0, n, |i| Some(at(i)));
        let mut i = 0u64;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let now = t0 + step * u32::try_from(i + 1).unwrap();
                pool.handle_timeout(now);
                match pool.poll_output() {
                    Some(Output::Action(Action::Fail { .. })) => {}
                    other => panic!("expected one timeout, got {other:?}"),
                }
                debug_assert!(pool.poll_output().is_none());
                pool.handle_check_out_until(now, Some(now + step * u32::try_from(n).unwrap()));
                i += 1;
            })
        });
        assert_eq!(pool.status().waiting as u64, n);
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = check_out_check_in, cancel_in_the_middle, expire_one_deadline
}
criterion_main!(benches);
