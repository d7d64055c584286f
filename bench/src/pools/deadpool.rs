//! deadpool's managed pool (`deadpool::managed`), `max_size` M, a wait
//! timeout on the tokio runtime, the default FIFO queue mode.

use std::future::Future;

use deadpool::managed::{self, Metrics, Object, Pool, RecycleResult, Timeouts};
use deadpool::Runtime;

use super::{AsyncPool, Conn, Connector, Never, Setup, WAIT_TIMEOUT};
use crate::rt::Tokio;

pub struct Manager(Connector);

impl managed::Manager for Manager {
    type Type = Conn;
    type Error = Never;

    fn create(&self) -> impl Future<Output = Result<Conn, Never>> + Send {
        let connect = self.0.connect();
        async move { Ok(connect.await) }
    }

    fn recycle(&self, _: &mut Conn, _: &Metrics) -> impl Future<Output = RecycleResult<Never>> + Send {
        std::future::ready(Ok(()))
    }
}

pub struct Deadpool(Pool<Manager>);

impl AsyncPool for Deadpool {
    const NAME: &'static str = "deadpool";
    const NATIVE_MIN: bool = false;
    type Rt = Tokio;
    type Guard<'a> = Object<Manager>;

    fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
        let pool = Pool::builder(Manager(setup.connector.clone()))
            .max_size(setup.max as usize)
            .timeouts(Timeouts {
                wait: Some(WAIT_TIMEOUT),
                ..Timeouts::default()
            })
            .runtime(Runtime::Tokio1)
            .build()
            .expect("valid deadpool options");
        std::future::ready(Deadpool(pool))
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| format!("{e:?}"))
    }
}

/// deadpool as a metrics exporter watches it: its `status()` read after
/// every checkout, as gauges of size, available and waiting kept current
/// would need (deadpool has no events to count from).
pub struct DeadpoolStatus(Deadpool);

impl AsyncPool for DeadpoolStatus {
    const NAME: &'static str = "deadpool+status";
    const NATIVE_MIN: bool = false;
    type Rt = Tokio;
    type Guard<'a> = Object<Manager>;

    async fn build(setup: &Setup) -> Self {
        DeadpoolStatus(Deadpool::build(setup).await)
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        let conn = self.0.get().await;
        std::hint::black_box(self.0 .0.status());
        conn
    }
}
