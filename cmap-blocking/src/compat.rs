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
//! | `is_valid` (r2d2's `test_on_check_out`, on by default) | `check`, on every checkout (off: [`R2d2::test_on_check_out`]) |
//! | `has_broken` | `is_broken`, on check-in: a broken connection is closed |
//!
//! A connect error is classified for the pool from its `source()` chain
//! ([`EstablishErrorKind::of_chain`]): a refused, reset, aborted or
//! timed-out I/O error at any depth is a network error (the pool keeps
//! trying and checkouts keep waiting through an outage), anything else
//! "other". A closure given to [`R2d2::classify_with`] decides instead.

use std::fmt;
use std::sync::Arc;

use cmap_async::driver::{classify, Classify};

use crate::{EstablishErrorKind, ManageConnection};

/// An r2d2 manager as this pool's: see the [module](self). Its error type
/// must be `Send + Sync`, as this pool's errors cross threads.
pub struct R2d2<M: r2d2::ManageConnection> {
    manager: M,
    test_on_check_out: bool,
    classify: Option<Classify<M::Error>>,
}

impl<M: r2d2::ManageConnection> R2d2<M> {
    /// `manager`, validated on every checkout as r2d2 does by default.
    pub fn new(manager: M) -> Self {
        R2d2 {
            manager,
            test_on_check_out: true,
            classify: None,
        }
    }

    /// Whether `is_valid` runs on every checkout (r2d2's
    /// `test_on_check_out`, default `true`).
    pub fn test_on_check_out(mut self, test: bool) -> Self {
        self.test_on_check_out = test;
        self
    }

    /// Classifies connect errors with `classify` instead of their
    /// `source()` chain.
    pub fn classify_with(
        mut self,
        classify: impl Fn(&M::Error) -> EstablishErrorKind + Send + Sync + 'static,
    ) -> Self {
        self.classify = Some(Arc::new(classify));
        self
    }

    /// The manager.
    pub fn manager(&self) -> &M {
        &self.manager
    }
}

impl<M: r2d2::ManageConnection> fmt::Debug for R2d2<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("R2d2")
            .field("manager", &std::any::type_name::<M>())
            .field("test_on_check_out", &self.test_on_check_out)
            .field("classify", &self.classify.as_ref().map(|_| "Fn"))
            .finish()
    }
}

impl<M> ManageConnection for R2d2<M>
where
    M: r2d2::ManageConnection,
    M::Error: Send + Sync,
{
    type Connection = M::Connection;
    type Error = M::Error;
    /// r2d2 has no hook on return.
    const RESETS: bool = false;

    fn connect(&self) -> Result<M::Connection, M::Error> {
        self.manager.connect()
    }

    fn classify(&self, error: &M::Error) -> EstablishErrorKind {
        classify(self.classify.as_ref(), error)
    }

    fn check(&self, conn: &mut M::Connection) -> Result<(), M::Error> {
        if self.test_on_check_out {
            self.manager.is_valid(conn)?;
        }
        Ok(())
    }

    fn is_broken(&self, conn: &mut M::Connection) -> bool {
        self.manager.has_broken(conn)
    }
}
