//! The threads that run a [`ThreadRuntime`](crate::ThreadRuntime)'s
//! tasks: each spawned future runs to completion in [`block_on`] on a
//! thread of its own, taken from the idle ones or started for it. Idle
//! threads wait on a condition variable and end after [`KEEP_ALIVE`].
//!
//! A pool keeps one thread for its background task while it lives; the
//! rest are short (a connect, a close) and reuse idle threads.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::Duration;

use crate::block_on::block_on;
use crate::fork;

/// A task.
pub(crate) type Job = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// How long an idle thread waits for work before it ends.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(10);

struct State {
    queue: VecDeque<Job>,
    /// Threads waiting for work.
    idle: usize,
    /// Threads alive.
    threads: usize,
    /// The fork generation these counts are of.
    generation: u64,
}

struct Workers {
    state: Mutex<State>,
    work: Condvar,
}

static WORKERS: Workers = Workers {
    state: Mutex::new(State {
        queue: VecDeque::new(),
        idle: 0,
        threads: 0,
        generation: 0,
    }),
    work: Condvar::new(),
};

fn lock() -> MutexGuard<'static, State> {
    let mut state = WORKERS.state.lock().unwrap_or_else(PoisonError::into_inner);
    let generation = fork::generation();
    if state.generation != generation {
        // A forked child: the threads counted are the parent's.
        state.generation = generation;
        state.idle = 0;
        state.threads = 0;
    }
    state
}

/// Runs `job` on a worker thread.
pub(crate) fn spawn(job: Job) {
    fork::watch();
    let start = {
        let mut state = lock();
        state.queue.push_back(job);
        let start = state.idle < state.queue.len();
        if start {
            state.threads += 1;
        }
        start
    };
    if !start {
        WORKERS.work.notify_one();
        return;
    }
    let started = thread::Builder::new().name("cmap-blocking".into()).spawn(run);
    if started.is_err() {
        // The system refused a thread: the job waits for a busy one to
        // come free (every pool task ends, or waits on a timer).
        lock().threads -= 1;
    }
}

/// A worker's life: take jobs until none comes for `KEEP_ALIVE`.
fn run() {
    loop {
        let job = {
            let mut state = lock();
            loop {
                if let Some(job) = state.queue.pop_front() {
                    break Some(job);
                }
                state.idle += 1;
                let (next, waited) = WORKERS
                    .work
                    .wait_timeout(state, KEEP_ALIVE)
                    .unwrap_or_else(PoisonError::into_inner);
                state = next;
                state.idle = state.idle.saturating_sub(1);
                if waited.timed_out() && state.queue.is_empty() {
                    state.threads = state.threads.saturating_sub(1);
                    break None;
                }
            }
        };
        let Some(job) = job else { return };
        // A panicking task is its own business (the pool's tasks clean up
        // when dropped); the thread goes on serving.
        let _ = catch_unwind(AssertUnwindSafe(|| block_on(job)));
    }
}

/// Threads alive and threads idle, now.
pub(crate) fn counts() -> (usize, usize) {
    let state = lock();
    (state.threads, state.idle)
}
