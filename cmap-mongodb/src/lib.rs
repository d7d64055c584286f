//! # cmap-mongodb
//!
//! A ready-made MongoDB connection manager for the cmap pool: the CMAP
//! specification's "Establishing a Connection" over MongoDB's wire
//! protocol, written as the handshake, authentication and OP_MSG
//! specifications say.
//!
//! - [`MongoManager`] (feature `tokio`, on by default), for a
//!   `cmap_tokio::Pool`; [`AsyncIoManager`] (feature `smol` or
//!   `async-std`), for a `cmap_async_std::Pool`;
//!   [`blocking::MongoManager`] (feature `blocking`), for a
//!   `cmap_blocking::Pool`. One [`Manager`], generic over the runtime.
//! - Built from a `mongodb://` connection string: its one host is the
//!   pool's address; `appName`, `username`/`password`, `authSource`,
//!   `authMechanism` (SCRAM-SHA-256, SCRAM-SHA-1), `tls`/`ssl` with
//!   `tlsCAFile` (rustls), `connectTimeoutMS`, `loadBalanced`, `timeoutMS`,
//!   `maxAdaptiveRetries`, `retryReads`, `retryWrites` and
//!   `enableOverloadRetargeting` (no effect on one server) are read;
//!   any other driver option is refused by name ([`OptionsError`]); the
//!   pool options (`maxPoolSize`, ...) are the pool builder's.
//! - Each new connection: TCP (`TCP_NODELAY`), TLS, the handshake (legacy
//!   `hello` with `helloOk`, or `hello` in load-balanced mode, with the
//!   client metadata, `backpressure: "2"`, the mechanism negotiation and a
//!   speculative first SCRAM step), the reply checked (wire versions,
//!   `serviceId` in load-balanced mode), then SCRAM. Each step is bounded
//!   by what is left of `connectTimeoutMS`; under `timeoutMS`, by what the
//!   checkout that needs the connection has left (the socket by the
//!   shorter of the two), or for `minPoolSize` each handshake command by
//!   `timeoutMS`.
//! - [`Connection::run_command`]: one command, its reply or a typed error
//!   ([`Error::Command`] with the server's code, codeName and labels).
//! - [`MongoPool::run_command`] (and [`blocking::MongoPool`]): checkout and
//!   command under one deadline, `timeoutMS` (the client-side operations
//!   timeout specification): the checkout waits what is left, the command
//!   carries `maxTimeMS`, the write and the reads are bounded, and
//!   [`Error::TimedOut`] names the stage. With `maxAdaptiveRetries`, a
//!   command the server refused as overloaded is retried after the client
//!   backpressure specification's backoff, on a fresh checkout, unless
//!   `retryReads` or `retryWrites` is off.
//!
//! What the pool does with each kind of failure (the CMAP specification's
//! "Backpressure-enabled" rules) is [`Error::establish_kind`]:
//!
//! | failure | kind | the pool |
//! | --- | --- | --- |
//! | refused, reset, timed out: TCP, TLS I/O, `hello` | `Network` | labels it `SystemOverloadedError` and `RetryableError`, is not cleared, keeps checkouts waiting and retries with backoff |
//! | anything during authentication (wrong password, a cut) | `Authentication` | clears; the checkout that asked fails with the server's message |
//! | DNS, a TLS certificate or name refused, a server we cannot use | `Other` | clears; the checkout fails |
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cmap_mongodb::{bson::doc, MongoManager};
//!
//! let uri = "mongodb://app:secret@127.0.0.1:27017/shop?appName=shop&maxPoolSize=10";
//! let pool = cmap_tokio::Pool::builder().connection_string(uri).build(MongoManager::new(uri)?)?;
//! let mut conn = pool.get().await?;
//! conn.run_command("shop", &doc! { "insert": "orders", "documents": [{ "item": "tea" }] }).await?;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "tokio"))]
//! # fn main() {}
//! ```

// The crate docs link to both managers, each behind its feature.
#![cfg_attr(
    not(all(feature = "tokio", feature = "smol", feature = "blocking")),
    allow(rustdoc::broken_intra_doc_links)
)]
// Without a runtime feature, the protocol code has no manager to serve.
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "blocking")),
    allow(dead_code)
)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "smol")]
mod async_io_manager;
#[cfg(any(feature = "tokio", feature = "smol"))]
mod async_open;
mod auth;
#[cfg(feature = "blocking")]
pub mod blocking;
mod connection;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod handshake;
#[cfg(all(test, feature = "tokio"))]
mod hostile_tests;
mod manager;
mod metadata;
mod operation;
mod options;
mod scram;
mod settings;
#[cfg(test)]
mod test_server;
#[cfg(all(test, feature = "tokio", feature = "smol", feature = "blocking"))]
mod timeout_tests;
mod tls;
#[cfg(feature = "tokio")]
mod tokio_manager;
mod transport;
mod wire;

#[cfg(feature = "smol")]
pub use async_io_manager::{AsyncIoConnection, AsyncIoManager};
#[cfg(any(feature = "tokio", feature = "smol"))]
pub use async_open::Net;
pub use bson;
pub use cmap_core::{Address, EstablishErrorKind};
pub use connection::{Connection, ServerInfo};
pub use error::{CommandError, Error, ProtocolError, Stage};
pub use manager::{AsyncIo, Manager, Runtime, Threads, Tokio};
pub use metadata::{DriverInfo, MAX_APP_NAME_SIZE};
#[cfg(any(feature = "tokio", feature = "smol"))]
pub use operation::MongoPool;
pub use options::{Credential, MongoOptions, OptionsError, TlsOptions, DEFAULT_CONNECT_TIMEOUT};
pub use scram::{Mechanism, ScramError};
#[cfg(feature = "tokio")]
pub use tokio_manager::{MongoConnection, MongoManager};
#[cfg(feature = "smol")]
pub use transport::AsyncIoStream;
#[cfg(feature = "blocking")]
pub use transport::StdStream;
#[cfg(feature = "tokio")]
pub use transport::TokioStream;
pub use transport::Transport;
