//! The async runtimes the pools run on, behind one small trait: a fresh
//! multi-thread runtime per configuration, spawn, yield and sleep.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Sleeps `duration` on async-io's timer, whatever the runtime: precise to
/// tens of microseconds, where tokio's own timer rounds up to the next
/// millisecond. The spike scenario's connects and uses are timed with it so
/// that the pools are compared on what they do, not on their runtime's timer.
pub async fn precise_sleep(duration: Duration) {
    smol::Timer::after(duration).await;
}

/// An async runtime, as the harness uses it.
pub trait AsyncRt: Clone + Send + Sync + 'static {
    /// Runs `main` to completion on a fresh multi-thread runtime with
    /// `threads` workers (the calling thread only waits, as with tokio's
    /// `block_on`), then shuts the runtime down.
    fn block_on<F: Future>(threads: usize, main: impl FnOnce(Self) -> F) -> F::Output;

    /// Spawns a task; the returned future is its output.
    fn spawn<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = T> + Send + 'static;

    /// Gives the worker to the other tasks once.
    fn yield_now() -> impl Future<Output = ()> + Send;

    fn sleep(duration: Duration) -> impl Future<Output = ()> + Send;

    /// Runs `task` to completion on the calling thread (not one of the
    /// runtime's workers), with the runtime's timers and I/O at hand.
    fn block_here<T>(&self, task: impl Future<Output = T>) -> T;
}

/// tokio's multi-thread runtime, built anew for every configuration.
#[derive(Clone)]
pub struct Tokio(tokio::runtime::Handle);

impl AsyncRt for Tokio {
    fn block_on<F: Future>(threads: usize, main: impl FnOnce(Self) -> F) -> F::Output {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let out = rt.block_on(main(Tokio(rt.handle().clone())));
        rt.shutdown_timeout(Duration::from_secs(1));
        out
    }

    fn spawn<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = T> + Send + 'static {
        let handle = self.0.spawn(task);
        async move { handle.await.expect("a benchmark task panicked") }
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        tokio::task::yield_now()
    }

    fn sleep(duration: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(duration)
    }

    fn block_here<T>(&self, task: impl Future<Output = T>) -> T {
        self.0.block_on(task)
    }
}

/// smol: a fresh `smol::Executor` run by `threads` OS threads per
/// configuration (timers come from async-io's process-wide reactor).
#[derive(Clone)]
pub struct Smol(Arc<smol::Executor<'static>>);

impl AsyncRt for Smol {
    fn block_on<F: Future>(threads: usize, main: impl FnOnce(Self) -> F) -> F::Output {
        let ex = Arc::new(smol::Executor::new());
        let (stop, stopped) = smol::channel::bounded::<()>(1);
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let ex = ex.clone();
                let stopped = stopped.clone();
                std::thread::Builder::new()
                    .name(format!("smol-{i}"))
                    .spawn(move || smol::block_on(ex.run(stopped.recv())))
                    .expect("a smol worker thread")
            })
            .collect();
        let out = smol::block_on(main(Smol(ex)));
        drop(stop);
        for worker in workers {
            let _ = worker.join();
        }
        out
    }

    fn spawn<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = T> + Send + 'static {
        self.0.spawn(task)
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        smol::future::yield_now()
    }

    async fn sleep(duration: Duration) {
        smol::Timer::after(duration).await;
    }

    fn block_here<T>(&self, task: impl Future<Output = T>) -> T {
        smol::block_on(task)
    }
}

/// async-std: its runtime is process-wide (async-global-executor, one
/// thread per core), so it cannot be built anew per configuration; `threads`
/// is ignored (its default: one thread per core).
#[derive(Clone)]
pub struct AsyncStd;

impl AsyncRt for AsyncStd {
    fn block_on<F: Future>(_threads: usize, main: impl FnOnce(Self) -> F) -> F::Output {
        async_std::task::block_on(main(AsyncStd))
    }

    fn spawn<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = T> + Send + 'static {
        async_std::task::spawn(task)
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        async_std::task::yield_now()
    }

    fn sleep(duration: Duration) -> impl Future<Output = ()> + Send {
        async_std::task::sleep(duration)
    }

    fn block_here<T>(&self, task: impl Future<Output = T>) -> T {
        async_std::task::block_on(task)
    }
}
