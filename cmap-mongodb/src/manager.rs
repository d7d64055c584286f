//! The manager's user-facing shape, written once for every runtime:
//! [`Manager<R>`], named `MongoManager` on tokio and
//! `blocking::MongoManager` on threads. How a connection is opened is the
//! runtime's (`tokio_manager.rs`, `blocking.rs`).

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use cmap_core::Address;

use crate::metadata::DriverInfo;
use crate::options::{MongoOptions, OptionsError};
use crate::settings::Settings;

/// The runtime a [`Manager`] opens its connections on: [`Tokio`],
/// [`AsyncIo`] or [`Threads`]. Sealed.
pub trait Runtime: sealed::Sealed + Send + Sync + 'static {
    /// The runtime's name in the handshake's `platform`.
    const NAME: &'static str;
}

/// tokio's sockets, for a `cmap_tokio::Pool` (feature `tokio`).
#[derive(Debug)]
pub enum Tokio {}

/// The async-io stack's sockets, for a `cmap_async_std::Pool` under smol
/// or async-std (feature `smol` or `async-std`).
#[derive(Debug)]
pub enum AsyncIo {}

/// Blocking `std` sockets, for a `cmap_blocking::Pool` (feature
/// `blocking`).
#[derive(Debug)]
pub enum Threads {}

impl Runtime for Tokio {
    const NAME: &'static str = "tokio";
}

impl Runtime for AsyncIo {
    const NAME: &'static str = "async-io";
}

impl Runtime for Threads {
    const NAME: &'static str = "threads";
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Tokio {}
    impl Sealed for super::AsyncIo {}
    impl Sealed for super::Threads {}
}

/// Opens and looks after MongoDB connections: TCP, TLS, the `hello` and
/// SCRAM authentication, as the connection string says. Use it as
/// [`MongoManager`](crate::MongoManager) (tokio) or
/// [`blocking::MongoManager`](crate::blocking::MongoManager) (threads).
pub struct Manager<R> {
    pub(crate) settings: Settings,
    _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> fmt::Debug for Manager<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MongoManager")
            .field("runtime", &R::NAME)
            .field("options", &self.settings.options)
            .field("validate_idle_after", &self.settings.validate_idle_after)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Manager<R> {
    /// A manager for the server of a `mongodb://` connection string. Its
    /// pool options (`maxPoolSize`, ...) are the pool builder's: give it
    /// the same string with `connection_string`.
    ///
    /// # Errors
    ///
    /// A string that is not one, or that asks for what this manager does
    /// not do, naming the option ([`OptionsError`]); an unreadable
    /// `tlsCAFile`.
    pub fn new(uri: &str) -> Result<Self, OptionsError> {
        Self::from_options(MongoOptions::parse(uri)?)
    }

    /// A manager with options built by hand.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn from_options(options: MongoOptions) -> Result<Self, OptionsError> {
        Ok(Manager {
            settings: Settings::new(options, R::NAME)?,
            _runtime: PhantomData,
        })
    }

    /// The server's address: the connection string's host.
    pub fn address(&self) -> Address {
        self.settings.address().clone()
    }

    /// The options it connects with.
    pub fn options(&self) -> &MongoOptions {
        &self.settings.options
    }

    /// Sends a `ping` before handing out a connection that has been idle
    /// at least `idle` (default: never; `Duration::ZERO`: on every
    /// checkout). One that fails it is closed and the checkout takes
    /// another.
    pub fn validate_idle_after(mut self, idle: Duration) -> Self {
        self.settings.validate_idle_after = Some(idle);
        self
    }

    /// Adds a wrapping library to the handshake's driver name, version
    /// and platform (the handshake specification's `DriverInfoOptions`).
    pub fn driver_info(mut self, info: DriverInfo) -> Self {
        self.settings.add_driver_info(info);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names_the_runtime_and_the_options_but_not_the_password() {
        let manager = Manager::<Threads>::new("mongodb://app:Qx7Zq9@db:27018/shop?appName=shop")
            .unwrap()
            .validate_idle_after(Duration::from_secs(30));
        let debug = format!("{manager:?}");
        for part in [
            "MongoManager",
            r#"runtime: "threads""#,
            "27018",
            r#"app_name: Some("shop")"#,
            "validate_idle_after: Some(30s)",
        ] {
            assert!(debug.contains(part), "{part} in {debug}");
        }
        assert!(!debug.contains("Qx7Zq9"), "{debug}");
    }
}
