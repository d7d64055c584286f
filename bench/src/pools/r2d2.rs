//! r2d2, `max_size` M, `connection_timeout` long, its other defaults
//! (`min_idle` = `max_size` unless the scenario sets one; `test_on_check_out`
//! with a no-op `is_valid`).

use r2d2::{ManageConnection, Pool, PooledConnection};

use super::{BlockingPool, Conn, Connector, Never, Setup, WAIT_TIMEOUT};

pub struct Manager(Connector);

impl ManageConnection for Manager {
    type Connection = Conn;
    type Error = Never;

    fn connect(&self) -> Result<Conn, Never> {
        Ok(self.0.connect_blocking())
    }

    fn is_valid(&self, _: &mut Conn) -> Result<(), Never> {
        Ok(())
    }

    fn has_broken(&self, _: &mut Conn) -> bool {
        false
    }
}

pub struct R2d2(Pool<Manager>);

impl BlockingPool for R2d2 {
    const NAME: &'static str = "r2d2";
    const NATIVE_MIN: bool = true;
    type Guard<'a> = PooledConnection<Manager>;

    fn build(setup: &Setup) -> Self {
        let mut builder = Pool::builder()
            .max_size(setup.max)
            .connection_timeout(WAIT_TIMEOUT);
        if setup.min > 0 {
            builder = builder.min_idle(Some(setup.min));
        }
        R2d2(
            builder
                .build(Manager(setup.connector.clone()))
                .expect("valid r2d2 options"),
        )
    }

    fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().map_err(|e| e.to_string())
    }
}
