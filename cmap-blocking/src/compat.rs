//! r2d2's managers, as they are (feature `r2d2`): any
//! `r2d2::ManageConnection` (diesel's `ConnectionManager`, r2d2_sqlite,
//! r2d2_postgres, ...) becomes this crate's [`ManageConnection`] in one
//! line, so that a project switches pools without giving up its manager:
//!
//! ```ignore
//! let pool = cmap_blocking::Pool::builder().address("db:5432").build(R2d2::new(manager))?;
//! ```
//!
//! | r2d2's hook | ours |
//! | --- | --- |
//! | `connect` | `connect` |
//! | `is_valid` (r2d2's `test_on_check_out`, on by default) | `check`, on every checkout (off: [`Compat::test_on_check_out`]) |
//! | `has_broken` | `is_broken`, on check-in: a broken connection is closed |
//!
//! A connect error is classified for the pool from its `source()` chain
//! ([`EstablishErrorKind::of_chain`]): a refused, reset, aborted or
//! timed-out I/O error at any depth is a network error (the pool keeps
//! trying and checkouts keep waiting through an outage), anything else
//! "other". A closure given to [`Compat::classify_with`] decides instead.

pub use cmap_async::compat::Compat;
use cmap_async::compat::Kind;

use crate::{EstablishErrorKind, ManageConnection};

/// An r2d2 manager as this pool's: see the [module](self). Its error type
/// must be `Send + Sync`, as this pool's errors cross threads.
pub type R2d2<M> = Compat<M, R2d2Kind>;

/// The [`Kind`] of r2d2's managers.
#[derive(Debug)]
pub enum R2d2Kind {}

impl<M: r2d2::ManageConnection> Kind<M> for R2d2Kind {
    type Error = M::Error;
    const NAME: &'static str = "R2d2";
}

impl<M> ManageConnection for Compat<M, R2d2Kind>
where
    M: r2d2::ManageConnection,
    M::Error: Send + Sync,
{
    type Connection = M::Connection;
    type Error = M::Error;
    /// r2d2 has no hook on return.
    const RESETS: bool = false;

    fn connect(&self) -> Result<M::Connection, M::Error> {
        self.manager().connect()
    }

    fn classify(&self, error: &M::Error) -> EstablishErrorKind {
        self.kind_of(error)
    }

    fn check(&self, conn: &mut M::Connection) -> Result<(), M::Error> {
        if self.tests_on_check_out() {
            self.manager().is_valid(conn)?;
        }
        Ok(())
    }

    fn is_broken(&self, conn: &mut M::Connection) -> bool {
        self.manager().has_broken(conn)
    }
}
