//! The flight recorder on a real runtime: runs with real concurrency,
//! real timers and a server that refuses for a while, recorded through a
//! small ring, replay exactly on the core. Re-exported by
//! [`scenarios`](crate::scenarios), so that
//! [`pool_scenarios!`](crate::pool_scenarios) runs it on every runtime.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmap_async::{Recording, Runtime};

use crate::rt::{sleep, spawn};
use crate::scenarios::runtimes;
use crate::{builder, FakePool};

/// Checkouts each task makes in a recorded run.
const ROUNDS: usize = 40;
/// Tasks that check out concurrently.
const TASKS: u64 = 6;

/// Random real-time runs (tasks checking out with short timeouts, broken
/// connections, a server refusing for a while, a clear, a resize),
/// recorded through a ring small enough to roll, replay exactly: every
/// output of the core, in order, as recorded, through the file format.
pub async fn a_recorded_run_replays_exactly<R: Runtime + Default, T: Runtime + Default>() {
    for seed in 1..=3u64 {
        let (m, t) = runtimes::<R, T>();
        m.connect_us.store(300, Ordering::SeqCst);
        m.jitter.store(true, Ordering::SeqCst);
        let pool: Arc<FakePool<R>> = Arc::new(
            builder()
                .max_pool_size(3)
                .min_pool_size(1)
                .max_idle_time(Duration::from_millis(20))
                .flight_recorder(400)
                .build(m.clone())
                .unwrap(),
        );
        let mut tasks = Vec::new();
        for task in 0..TASKS {
            let pool = pool.clone();
            let t2 = t.clone();
            tasks.push(spawn(&t, async move {
                let mut rng = fastrand::Rng::with_seed(seed * 100 + task);
                for _ in 0..ROUNDS {
                    let timeout = Duration::from_millis(rng.u64(1..15));
                    if let Ok(mut conn) = pool.get_timeout(timeout).await {
                        conn.broken = rng.u8(..10) == 0;
                        sleep(&t2, Duration::from_micros(rng.u64(0..1500))).await;
                    }
                }
            }));
        }
        let mut rng = fastrand::Rng::with_seed(seed);
        sleep(&t, Duration::from_millis(rng.u64(5..20))).await;
        m.refuse.store(true, Ordering::SeqCst);
        sleep(&t, Duration::from_millis(rng.u64(5..20))).await;
        m.refuse.store(false, Ordering::SeqCst);
        pool.clear(rng.bool()).unwrap();
        pool.ready().unwrap();
        pool.resize(0, rng.u32(1..5)).unwrap();
        for task in tasks {
            task.await;
        }
        // Every connection back (a reset may still run on a task of its
        // own): the recording and the status are then final.
        assert_eq!(pool.close_gracefully(Duration::from_secs(10)).await, 0);
        let recording = pool.recording().expect("the recorder runs");
        assert_eq!(recording.incident(), None);
        assert!(
            recording.inputs() > 50,
            "seed {seed}: {} inputs",
            recording.inputs()
        );
        let mut file = Vec::new();
        recording.write_to(&mut file).unwrap();
        let read = Recording::read_from(&file[..]).unwrap();
        let replay = read
            .replay(Instant::now())
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(replay.steps().len(), recording.inputs());
        assert_eq!(
            replay.steps().last().map(|s| s.status),
            Some(pool.status()),
            "seed {seed}: the replay ends where the pool is"
        );
    }
}
