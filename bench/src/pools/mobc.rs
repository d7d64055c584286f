//! mobc, `max_open` M and `max_idle` M (its default `max_idle` of 2 would
//! close every connection past the second on return: a misconfiguration,
//! not the pool's cost), `get_timeout` long, its other defaults.

use std::future::Future;

use mobc::{Connection, Pool};

use super::{AsyncPool, Conn, Connector, Never, Setup, WAIT_TIMEOUT};
use crate::rt::Tokio;

pub struct Manager(Connector);

#[mobc::async_trait]
impl mobc::Manager for Manager {
    type Connection = Conn;
    type Error = Never;

    async fn connect(&self) -> Result<Conn, Never> {
        Ok(self.0.connect().await)
    }

    async fn check(&self, conn: Conn) -> Result<Conn, Never> {
        Ok(conn)
    }
}

pub struct Mobc(Pool<Manager>);

impl AsyncPool for Mobc {
    const NAME: &'static str = "mobc";
    const NATIVE_MIN: bool = false;
    type Rt = Tokio;
    type Guard<'a> = Connection<Manager>;

    fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
        let pool = Pool::builder()
            .max_open(u64::from(setup.max))
            .max_idle(u64::from(setup.max))
            .get_timeout(Some(WAIT_TIMEOUT))
            .build(Manager(setup.connector.clone()));
        std::future::ready(Mobc(pool))
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| format!("{e:?}"))
    }
}
