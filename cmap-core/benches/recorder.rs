//! The flight recorder's costs a user meets outside the checkout path
//! (that one is counted in instructions by `bench instructions`): taking a
//! recording of 10,000 entries (a copy, under the driver's lock), taking
//! and writing it as JSON lines (the rest outside the lock), and reading
//! and replaying the file.
//!
//! `cargo bench -p cmap-core --features recorder --bench recorder`

use std::hint::black_box;
use std::time::{Duration, Instant};

use cmap_core::{CheckOut, Pool, PoolOptions, Recording, Wait};
use criterion::{criterion_group, criterion_main, Criterion};

/// Entries the measured recordings hold.
const ENTRIES: usize = 10_000;

#[allow(clippy::disallowed_methods)]
fn origin() -> Instant {
    Instant::now()
}

/// A pool that recorded checkouts served at once and check-ins (events
/// on) until its ring holds about `ENTRIES` entries.
fn recorded_pool() -> Pool<()> {
    let t0 = origin();
    let options = PoolOptions::builder()
        .max_pool_size(4)
        .maintenance_interval(None)
        .build()
        .unwrap();
    let mut pool: Pool<()> = Pool::new(t0, "bench:27017".parse().unwrap(), options);
    pool.handle_ready(t0).unwrap();
    let waiter = pool.handle_check_out(t0);
    let _ = waiter;
    let mut id = None;
    while let Some(out) = pool.poll_output() {
        if let cmap_core::Output::Action(cmap_core::Action::Establish { id: i }) = out {
            id = Some(i);
        }
    }
    pool.handle_established(t0, id.unwrap(), (), None).unwrap();
    let mut held = None;
    while let Some(out) = pool.poll_output() {
        if let cmap_core::Output::Action(cmap_core::Action::Deliver { connection, .. }) = out {
            held = Some(connection);
        }
    }
    pool.handle_check_in(t0, held.unwrap()).unwrap();
    while pool.poll_output().is_some() {}
    // A ring twice as large, so that nothing is dropped.
    pool.start_recording(t0, 2 * ENTRIES);
    let mut now = t0;
    // Each cycle records 2 inputs and 4 outputs (started, served,
    // checked out, checked in).
    for _ in 0..ENTRIES / 6 {
        now += Duration::from_micros(10);
        let CheckOut::Ready(connection) = pool.handle_check_out_direct(now, Wait::Until(None)) else {
            unreachable!("an available connection, nobody waiting");
        };
        pool.handle_check_in(now, connection).unwrap();
        while pool.poll_output().is_some() {}
    }
    pool
}

fn recorder(c: &mut Criterion) {
    let pool = recorded_pool();
    let recording = pool.recording().unwrap();
    let lines = recording.inputs() + recording.outputs();
    assert!(lines > ENTRIES / 2, "{lines} lines recorded");
    eprintln!("the recording holds {lines} lines");
    let mut file = Vec::new();
    recording.write_to(&mut file).unwrap();
    let mut group = c.benchmark_group("recorder_10k_entries");
    group.sample_size(20);
    group.bench_function("take_recording", |b| b.iter(|| black_box(pool.recording())));
    group.bench_function("take_and_write_json_lines", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(file.len());
            pool.recording().unwrap().write_to(&mut out).unwrap();
            black_box(out)
        })
    });
    group.bench_function("read_and_replay", |b| {
        b.iter(|| {
            let read = Recording::read_from(&file[..]).unwrap();
            black_box(read.replay(origin()).unwrap())
        })
    });
    group.finish();
}

criterion_group!(benches, recorder);
criterion_main!(benches);
