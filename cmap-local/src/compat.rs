//! Other pools' managers on a one-thread pool (features `bb8` and
//! `deadpool`): cmap-async's [`Bb8`] and [`Deadpool`] adapters serve a
//! [`Pool`](crate::Pool) too, mapped as the [`cmap_async::compat`] table
//! says, each hook the one cmap-async's pools call.

use std::future::Future;
use std::time::Instant;

pub use cmap_async::compat::*;
use cmap_async::ManageConnection as Async;

use crate::{EstablishErrorKind, ManageConnection};

/// One impl per adapter: every hook is the adapter's cmap-async one.
macro_rules! as_async {
    ($adapter:ident<$m:ident: $bound:path>) => {
        impl<$m: $bound> ManageConnection for $adapter<$m>
        where
            $adapter<$m>: Async,
        {
            type Connection = <Self as Async>::Connection;
            type Error = <Self as Async>::Error;
            const CHECKS: bool = <Self as Async>::CHECKS;
            const RESETS: bool = <Self as Async>::RESETS;

            fn connect(&self) -> impl Future<Output = Result<Self::Connection, Self::Error>> {
                Async::connect(self)
            }

            fn connect_until(
                &self,
                deadline: Option<Instant>,
            ) -> impl Future<Output = Result<Self::Connection, Self::Error>> {
                Async::connect_until(self, deadline)
            }

            fn classify(&self, error: &Self::Error) -> EstablishErrorKind {
                Async::classify(self, error)
            }

            fn check(
                &self,
                conn: &mut Self::Connection,
                deadline: Option<Instant>,
            ) -> impl Future<Output = Result<(), Self::Error>> {
                Async::check_until(self, conn, deadline)
            }

            fn is_broken(&self, conn: &mut Self::Connection) -> bool {
                Async::is_broken(self, conn)
            }
        }
    };
}

#[cfg(feature = "bb8")]
as_async!(Bb8<M: bb8::ManageConnection>);
#[cfg(feature = "deadpool")]
as_async!(Deadpool<M: deadpool::managed::Manager>);
