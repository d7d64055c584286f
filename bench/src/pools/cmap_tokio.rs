//! cmap-tokio, with the shared options of `cmap_async.rs`.
//! `CmapTokioEvents` is the same pool with a subscriber that counts every
//! event: the event path's cost.

use std::future::Future;
use std::sync::atomic::Ordering;

use cmap_tokio::{Pool, PooledConnection, TokioRuntime};

use super::cmap_async::{configured, get, Manager};
use super::{AsyncPool, Setup};
use crate::rt::Tokio;

fn build<const RS: bool>(setup: &Setup, subscribe: bool) -> Pool<Manager<RS>> {
    let (mut builder, manager) = configured(setup);
    if subscribe {
        let events = setup.events.clone();
        builder = builder.on_event(move |_| {
            events.fetch_add(1, Ordering::Relaxed);
        });
    }
    builder
        .build_on(manager, TokioRuntime::new(tokio::runtime::Handle::current()))
        .expect("valid cmap-tokio options")
}

pub struct CmapTokio(Pool<Manager>);

impl AsyncPool for CmapTokio {
    const NAME: &'static str = "cmap-tokio";
    const NATIVE_MIN: bool = true;
    type Rt = Tokio;
    type Guard<'a> = PooledConnection<'a, Manager>;

    fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
        std::future::ready(CmapTokio(build(setup, false)))
    }

    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send {
        get(&self.0)
    }
}

pub struct CmapTokioEvents(Pool<Manager>);

impl AsyncPool for CmapTokioEvents {
    const NAME: &'static str = "cmap-tokio+events";
    const NATIVE_MIN: bool = true;
    type Rt = Tokio;
    type Guard<'a> = PooledConnection<'a, Manager>;

    fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
        std::future::ready(CmapTokioEvents(build(setup, true)))
    }

    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send {
        get(&self.0)
    }
}

pub struct CmapTokioResets(Pool<Manager<true>>);

impl AsyncPool for CmapTokioResets {
    const NAME: &'static str = "cmap-tokio+resets";
    const NATIVE_MIN: bool = true;
    type Rt = Tokio;
    type Guard<'a> = PooledConnection<'a, Manager<true>>;

    fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
        std::future::ready(CmapTokioResets(build(setup, false)))
    }

    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send {
        get(&self.0)
    }
}
