//! cmap-async-std, under smol and under async-std, with the shared
//! options of `cmap_async.rs`. The pool's own tasks run on
//! async-global-executor (the executor async-std spawns on) whichever
//! runtime drives the benchmark's tasks.

use std::future::Future;

use cmap_async_std::{Pool, PooledConnection};

use super::cmap_async::{configured, get, Manager};
use super::{AsyncPool, Setup};
use crate::rt::{AsyncStd, Smol};

fn build(setup: &Setup) -> Pool<Manager> {
    let (builder, manager) = configured(setup);
    builder.build(manager).expect("valid cmap-async-std options")
}

/// cmap-async-std with the benchmark's tasks on a smol executor.
pub struct CmapSmol(Pool<Manager>);

impl AsyncPool for CmapSmol {
    const NAME: &'static str = "cmap-async-std/smol";
    const NATIVE_MIN: bool = true;
    type Rt = Smol;
    type Guard<'a> = PooledConnection<'a, Manager>;

    fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
        std::future::ready(CmapSmol(build(setup)))
    }

    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send {
        get(&self.0)
    }
}

/// cmap-async-std with the benchmark's tasks on async-std.
pub struct CmapAsyncStd(Pool<Manager>);

impl AsyncPool for CmapAsyncStd {
    const NAME: &'static str = "cmap-async-std/async-std";
    const NATIVE_MIN: bool = true;
    type Rt = AsyncStd;
    type Guard<'a> = PooledConnection<'a, Manager>;

    fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
        std::future::ready(CmapAsyncStd(build(setup)))
    }

    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send {
        get(&self.0)
    }
}
