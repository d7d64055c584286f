//! Managers of other pools, as they are: any `bb8::ManageConnection`
//! (feature `bb8`) or `deadpool::managed::Manager` (feature `deadpool`),
//! and in cmap-blocking any `r2d2::ManageConnection` (its feature `r2d2`),
//! becomes this crate's [`ManageConnection`](crate::ManageConnection) in one line, so that a
//! project switches pools without giving up the manager crate it uses
//! (bb8-postgres, bb8-redis, deadpool-redis, diesel-async, ...):
//!
//! ```ignore
//! let pool = cmap_tokio::Pool::builder().address("db:5432").build(Bb8::new(manager))?;
//! ```
//!
//! | their hook | ours |
//! | --- | --- |
//! | bb8 `connect`, deadpool `create` | `connect` |
//! | bb8 `is_valid` (bb8's `test_on_check_out`, on by default) | `check`, on every checkout (off: [`Bb8::test_on_check_out`]) |
//! | bb8 `has_broken` | `is_broken`, on check-in: a broken connection is closed |
//! | deadpool `recycle(obj, metrics)` | `check`, on every checkout of a connection that was used before (deadpool recycles when it takes an object from its idle queue), with deadpool's [`Metrics`](deadpool::managed::Metrics) kept per connection |
//!
//! A connect error is classified for the pool from its `source()` chain
//! ([`EstablishErrorKind::of_chain`]): a refused, reset, aborted or
//! timed-out I/O error at any depth is a network error (the pool keeps
//! trying and checkouts keep waiting through an outage), anything else
//! "other". A closure given to `classify_with` decides instead.

//!
//! [`EstablishErrorKind::of_chain`]: cmap_core::EstablishErrorKind::of_chain

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use cmap_core::EstablishErrorKind;

use crate::driver::{classify, Classify};

/// Another pool's manager as this pool's: what every adapter holds and
/// offers, written once. `K` names the other pool ([`Bb8`], [`Deadpool`],
/// and cmap-blocking's `R2d2`) and so the manager's error type.
pub struct Compat<M, K: Kind<M>> {
    manager: M,
    test_on_check_out: bool,
    classify: Option<Classify<K::Error>>,
    _kind: PhantomData<fn() -> K>,
}

/// Which pool a [`Compat`] manager comes from: its name and the error type
/// of its manager trait.
pub trait Kind<M>: 'static {
    /// The manager trait's error type.
    type Error;
    /// The pool's name, for `Debug`.
    const NAME: &'static str;
}

impl<M, K: Kind<M>> Compat<M, K> {
    /// `manager`, validated on every checkout, as the other pools do by
    /// default.
    pub fn new(manager: M) -> Self {
        Compat {
            manager,
            test_on_check_out: true,
            classify: None,
            _kind: PhantomData,
        }
    }

    /// Whether the manager's validation runs on every checkout (bb8's and
    /// r2d2's `test_on_check_out` with `is_valid`, deadpool's `recycle`;
    /// default `true`).
    pub fn test_on_check_out(mut self, test: bool) -> Self {
        self.test_on_check_out = test;
        self
    }

    /// Classifies connect errors with `classify` instead of their
    /// `source()` chain.
    pub fn classify_with(
        mut self,
        classify: impl Fn(&K::Error) -> EstablishErrorKind + Send + Sync + 'static,
    ) -> Self {
        self.classify = Some(Arc::new(classify));
        self
    }

    /// The manager.
    pub fn manager(&self) -> &M {
        &self.manager
    }

    /// Whether validation on checkout is on.
    pub fn tests_on_check_out(&self) -> bool {
        self.test_on_check_out
    }

    /// `error`'s kind: the closure of [`classify_with`](Self::classify_with),
    /// else its `source()` chain.
    pub fn kind_of(&self, error: &K::Error) -> EstablishErrorKind
    where
        K::Error: std::error::Error + 'static,
    {
        classify(self.classify.as_ref(), error)
    }
}

impl<M, K: Kind<M>> fmt::Debug for Compat<M, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(K::NAME)
            .field("manager", &std::any::type_name::<M>())
            .field("test_on_check_out", &self.test_on_check_out)
            .field("classify", &self.classify.as_ref().map(|_| "Fn"))
            .finish()
    }
}

#[cfg(feature = "bb8")]
pub use self::bb8_compat::{Bb8, Bb8Kind};
#[cfg(feature = "deadpool")]
pub use self::deadpool_compat::{Deadpool, DeadpoolError, DeadpoolKind, Recycled};

#[cfg(feature = "bb8")]
mod bb8_compat {
    use std::future::Future;

    use cmap_core::EstablishErrorKind;

    use super::{Compat, Kind};
    use crate::ManageConnection;

    /// A bb8 manager as this pool's: see the [module](crate::compat). Its
    /// error type must be a `std::error::Error` (as every maintained bb8
    /// manager's is), so that the pool can read its cause.
    pub type Bb8<M> = Compat<M, Bb8Kind>;

    /// The [`Kind`] of bb8's managers.
    #[derive(Debug)]
    pub enum Bb8Kind {}

    impl<M: bb8::ManageConnection> Kind<M> for Bb8Kind {
        type Error = M::Error;
        const NAME: &'static str = "Bb8";
    }

    impl<M> ManageConnection for Compat<M, Bb8Kind>
    where
        M: bb8::ManageConnection,
        M::Error: std::error::Error + Sync,
    {
        type Connection = M::Connection;
        type Error = M::Error;
        /// bb8 has no hook on return.
        const RESETS: bool = false;

        fn connect(&self) -> impl Future<Output = Result<M::Connection, M::Error>> + Send {
            self.manager().connect()
        }

        fn classify(&self, error: &M::Error) -> EstablishErrorKind {
            self.kind_of(error)
        }

        async fn check(&self, conn: &mut M::Connection) -> Result<(), M::Error> {
            if self.tests_on_check_out() {
                self.manager().is_valid(conn).await?;
            }
            Ok(())
        }

        fn is_broken(&self, conn: &mut M::Connection) -> bool {
            self.manager().has_broken(conn)
        }
    }
}

#[cfg(feature = "deadpool")]
mod deadpool_compat {
    use std::borrow::Cow;
    use std::fmt;
    use std::ops::{Deref, DerefMut};
    use std::time::Instant;

    use cmap_core::EstablishErrorKind;
    use deadpool::managed::{Manager, Metrics, RecycleError};

    use super::{Compat, Kind};
    use crate::ManageConnection;

    /// A deadpool manager as this pool's: see the [module](crate::compat).
    /// Its error type must be a `std::error::Error` (as every maintained
    /// deadpool manager's is), so that the pool can read its cause.
    pub type Deadpool<M> = Compat<M, DeadpoolKind>;

    /// The [`Kind`] of deadpool's managers.
    #[derive(Debug)]
    pub enum DeadpoolKind {}

    impl<M: Manager> Kind<M> for DeadpoolKind {
        type Error = M::Error;
        const NAME: &'static str = "Deadpool";
    }

    /// A connection of a deadpool manager, with the [`Metrics`] deadpool
    /// keeps for it (its `recycle` reads them). Derefs to the connection.
    pub struct Recycled<T> {
        value: T,
        metrics: Metrics,
        /// Handed out before: the next checkout recycles it first.
        used: bool,
    }

    impl<T> Recycled<T> {
        /// Deadpool's metrics of this connection.
        pub fn metrics(&self) -> &Metrics {
            &self.metrics
        }

        /// The connection itself, out of the wrapper.
        pub fn into_inner(self) -> T {
            self.value
        }
    }

    impl<T> Deref for Recycled<T> {
        type Target = T;
        fn deref(&self) -> &T {
            &self.value
        }
    }

    impl<T> DerefMut for Recycled<T> {
        fn deref_mut(&mut self) -> &mut T {
            &mut self.value
        }
    }

    impl<T> fmt::Debug for Recycled<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Recycled")
                .field("metrics", &self.metrics)
                .finish_non_exhaustive()
        }
    }

    /// Why a deadpool manager failed: its own error, or a recycle that
    /// refused the connection with a message.
    #[derive(Debug, thiserror::Error)]
    #[non_exhaustive]
    pub enum DeadpoolError<E: std::error::Error + 'static> {
        /// The manager's error (from `create`, or `recycle`'s `Backend`).
        #[error(transparent)]
        Backend(#[from] E),
        /// `recycle` refused the connection (`RecycleError::Message`).
        #[error("the connection could not be recycled: {0}")]
        Recycle(Cow<'static, str>),
    }

    impl<M> ManageConnection for Compat<M, DeadpoolKind>
    where
        M: Manager + 'static,
        M::Type: 'static,
        M::Error: std::error::Error + Sync + 'static,
    {
        type Connection = Recycled<M::Type>;
        type Error = DeadpoolError<M::Error>;
        /// deadpool has no hook on return (it recycles on the way out).
        const RESETS: bool = false;

        async fn connect(&self) -> Result<Recycled<M::Type>, DeadpoolError<M::Error>> {
            let value = self.manager().create().await?;
            Ok(Recycled {
                value,
                metrics: Metrics {
                    created: Instant::now(),
                    recycled: None,
                    recycle_count: 0,
                },
                used: false,
            })
        }

        fn classify(&self, error: &DeadpoolError<M::Error>) -> EstablishErrorKind {
            match error {
                DeadpoolError::Backend(error) => self.kind_of(error),
                DeadpoolError::Recycle(_) => EstablishErrorKind::Other,
            }
        }

        /// deadpool's `recycle`, for a connection handed out before; a new
        /// one goes out as it is, as from deadpool's own pool.
        async fn check(&self, conn: &mut Recycled<M::Type>) -> Result<(), DeadpoolError<M::Error>> {
            if !std::mem::replace(&mut conn.used, true) || !self.tests_on_check_out() {
                return Ok(());
            }
            match self.manager().recycle(&mut conn.value, &conn.metrics).await {
                Ok(()) => {
                    conn.metrics.recycled = Some(Instant::now());
                    conn.metrics.recycle_count += 1;
                    Ok(())
                }
                Err(RecycleError::Backend(error)) => Err(DeadpoolError::Backend(error)),
                Err(RecycleError::Message(message)) => Err(DeadpoolError::Recycle(message)),
            }
        }
    }
}
