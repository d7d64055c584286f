//! bb8, `max_size` M, `connection_timeout` long, its other defaults
//! (FIFO queue, `test_on_check_out`, which calls a no-op `is_valid`).

use std::future::Future;

use bb8::{ManageConnection, Pool, PooledConnection};

use super::{AsyncPool, Conn, Connector, Never, Setup, WAIT_TIMEOUT};
use crate::rt::Tokio;

pub struct Manager(Connector);

impl ManageConnection for Manager {
    type Connection = Conn;
    type Error = Never;

    fn connect(&self) -> impl Future<Output = Result<Conn, Never>> + Send {
        let connect = self.0.connect();
        async move { Ok(connect.await) }
    }

    fn is_valid(&self, _: &mut Conn) -> impl Future<Output = Result<(), Never>> + Send {
        std::future::ready(Ok(()))
    }

    fn has_broken(&self, _: &mut Conn) -> bool {
        false
    }
}

pub struct Bb8(Pool<Manager>);

impl AsyncPool for Bb8 {
    const NAME: &'static str = "bb8";
    const NATIVE_MIN: bool = true;
    type Rt = Tokio;
    type Guard<'a> = PooledConnection<'a, Manager>;

    fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
        let builder = Pool::builder()
            .max_size(setup.max)
            .min_idle((setup.min > 0).then_some(setup.min))
            .connection_timeout(WAIT_TIMEOUT);
        let manager = Manager(setup.connector.clone());
        async move { Bb8(builder.build(manager).await.expect("valid bb8 options")) }
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| format!("{e:?}"))
    }
}
