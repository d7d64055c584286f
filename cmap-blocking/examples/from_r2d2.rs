//! Switching from r2d2 to cmap-blocking with the same manager
//! (docs/migrating.md): `before` is the r2d2 pool, `after` the cmap pool,
//! option for option. Needs no server.

use std::time::Duration;

use cmap_blocking::compat::R2d2;

/// A manager as r2d2's docs write one.
struct Numbers;

impl r2d2::ManageConnection for Numbers {
    type Connection = u64;
    type Error = std::io::Error;

    fn connect(&self) -> Result<u64, std::io::Error> {
        Ok(42)
    }

    fn is_valid(&self, _: &mut u64) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn has_broken(&self, _: &mut u64) -> bool {
        false
    }
}

fn before() -> Result<u64, Box<dyn std::error::Error>> {
    let pool = r2d2::Pool::builder()
        .max_size(10)
        .min_idle(Some(2))
        .connection_timeout(Duration::from_secs(5))
        .idle_timeout(Some(Duration::from_secs(600)))
        .max_lifetime(Some(Duration::from_secs(1800)))
        .test_on_check_out(true)
        .build(Numbers)?;
    let conn = pool.get()?;
    Ok(*conn)
}

fn after() -> Result<u64, Box<dyn std::error::Error>> {
    let pool = cmap_blocking::Pool::builder()
        .address("numbers:0")
        .max_pool_size(10)
        .min_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(5))
        .max_idle_time(Duration::from_secs(600))
        .configure(|o| o.max_lifetime(Duration::from_secs(1800), 0.1))
        .build(R2d2::new(Numbers).test_on_check_out(true))?;
    let conn = pool.get()?;
    Ok(*conn)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("r2d2: {}, cmap: {}", before()?, after()?);
    Ok(())
}
