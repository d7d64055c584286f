//! The runtimes the tests' own tasks run on: the user's, as a program on
//! async-std or on smol would spawn them. The pool itself always runs on
//! `AsyncStdRuntime`.
#![allow(dead_code)]

use std::future::Future;
use std::time::Instant;

use cmap_async_std::Runtime;

/// Test tasks spawned with `async_std::task::spawn`, sleeping with
/// `async_std::task::sleep`.
#[derive(Clone, Copy, Default)]
pub struct AsyncStdTasks;

impl Runtime for AsyncStdTasks {
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, future: F) {
        drop(async_std::task::spawn(future));
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        async_std::task::sleep(deadline.saturating_duration_since(Instant::now()))
    }
}

/// Test tasks spawned with `smol::spawn`, sleeping with `smol::Timer`.
#[derive(Clone, Copy, Default)]
pub struct SmolTasks;

impl Runtime for SmolTasks {
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, future: F) {
        smol::spawn(future).detach();
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        let timer = smol::Timer::at(deadline);
        async move {
            timer.await;
        }
    }
}
