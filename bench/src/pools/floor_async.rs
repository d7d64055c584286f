//! The async floor: the simplest correct async pool. A tokio `Semaphore`
//! of M permits (FIFO, so fair) bounds the connections; idle ones sit in a
//! `Mutex<Vec>`; a checkout that finds none idle while holding a permit
//! connects. No timeout, no events, no statistics, no maintenance: what
//! any pool costs at least.

use std::future::Future;
use std::sync::Mutex;

use tokio::sync::{Semaphore, SemaphorePermit};

use super::{AsyncPool, Conn, Connector, Setup};
use crate::rt::Tokio;

pub struct AsyncFloor {
    permits: Semaphore,
    idle: Mutex<Vec<Conn>>,
    connector: Connector,
}

pub struct Guard<'a> {
    pool: &'a AsyncFloor,
    conn: Option<Conn>,
    _permit: SemaphorePermit<'a>,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.idle.lock().expect("idle list").push(conn);
        }
        // The permit goes back after the connection (field drop order).
    }
}

impl AsyncPool for AsyncFloor {
    const NAME: &'static str = "floor-async";
    const NATIVE_MIN: bool = false;
    type Rt = Tokio;
    type Guard<'a> = Guard<'a>;

    fn build(setup: &Setup) -> impl Future<Output = Self> + Send {
        std::future::ready(AsyncFloor {
            permits: Semaphore::new(setup.max as usize),
            idle: Mutex::new(Vec::with_capacity(setup.max as usize)),
            connector: setup.connector.clone(),
        })
    }

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        let permit = self.permits.acquire().await.map_err(|e| e.to_string())?;
        let idle = self.idle.lock().expect("idle list").pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.connector.connect().await,
        };
        Ok(Guard {
            pool: self,
            conn: Some(conn),
            _permit: permit,
        })
    }
}
