//! The blocking floor: the simplest correct blocking pool. A `Mutex` over
//! the idle connections and the count, a `Condvar` to wait for a return;
//! a checkout that finds none idle below M connects (outside the lock).
//! No timeout, no FIFO order (a `Condvar` wakes whichever thread), no
//! events, no statistics.

use std::sync::{Condvar, Mutex};

use super::{BlockingPool, Conn, Connector, Setup};

struct State {
    idle: Vec<Conn>,
    total: u32,
}

pub struct BlockingFloor {
    state: Mutex<State>,
    returned: Condvar,
    max: u32,
    connector: Connector,
}

pub struct Guard<'a> {
    pool: &'a BlockingFloor,
    conn: Option<Conn>,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.state.lock().expect("pool state").idle.push(conn);
            self.pool.returned.notify_one();
        }
    }
}

impl BlockingPool for BlockingFloor {
    const NAME: &'static str = "floor-blocking";
    const NATIVE_MIN: bool = false;
    type Guard<'a> = Guard<'a>;

    fn build(setup: &Setup) -> Self {
        BlockingFloor {
            state: Mutex::new(State {
                idle: Vec::with_capacity(setup.max as usize),
                total: 0,
            }),
            returned: Condvar::new(),
            max: setup.max,
            connector: setup.connector.clone(),
        }
    }

    fn get(&self) -> Result<Self::Guard<'_>, String> {
        let mut state = self.state.lock().expect("pool state");
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Guard {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.total < self.max {
                state.total += 1;
                drop(state);
                let conn = self.connector.connect_blocking();
                return Ok(Guard {
                    pool: self,
                    conn: Some(conn),
                });
            }
            state = self.returned.wait(state).expect("pool state");
        }
    }
}
