//! # cmap-redis
//!
//! A ready-made Redis (and Valkey) connection manager for the cmap pool,
//! over the [`redis`] crate: one [`Manager`], generic over the runtime,
//! with the same options on each:
//!
//! - [`RedisManager`] (features `tokio`, on by default, `smol` and
//!   `async-std`): a [`MultiplexedConnection`](redis::aio::MultiplexedConnection)
//!   per pooled connection, for a `cmap_tokio::Pool` or a
//!   `cmap_async_std::Pool` (async-std and smol). The feature chooses the
//!   runtime redis drives its sockets on; with both, redis uses tokio
//!   inside a tokio runtime and smol's executor elsewhere.
//! - [`blocking::RedisManager`] (feature `blocking`): a synchronous
//!   [`redis::Connection`], for a `cmap_blocking::Pool`.
//! - With the feature `local`, [`RedisManager`] also serves a
//!   `cmap_local::Pool` (one pool per core, on tokio's current-thread
//!   runtime with a `LocalSet`).
//!
//! One line to a working pool:
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cmap_redis::{redis::AsyncCommands, RedisManager};
//!
//! let manager = RedisManager::new("redis://127.0.0.1:6379/")?;
//! let pool = cmap_tokio::Pool::builder().address(manager.address()).max_pool_size(10).build(manager)?;
//!
//! let mut conn = pool.get().await?;
//! let () = conn.set("greeting", "hello").await?;
//! let greeting: String = conn.get("greeting").await?;
//! assert_eq!(greeting, "hello");
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "tokio"))]
//! # fn main() {}
//! ```
//!
//! What the managers do, and the options that change it:
//!
//! | hook | by default | option |
//! | --- | --- | --- |
//! | connect | TCP or Unix socket, TLS if the URL says `rediss://` and redis was built with a TLS feature, `AUTH`, `SELECT`, `HELLO` | - |
//! | check (checkout) | no round trip: a connection on which a command failed with an error that needs a reconnect (I/O, the connection dropped) is refused | `validate_idle_after`: a `PING` for connections idle at least that long |
//! | reset (check-in) | nothing, and no reset task at all (`RESETS` is `false`) | `reset_with(redis::cmd("UNWATCH"))`, or any commands, run on every check-in |
//! | classify | I/O errors, `LOADING`, "max number of clients reached" → network (the pool keeps trying); authentication failures, `NOPERM` → authentication; anything else → other | - |
//!
//! `RESET` (Redis 6.2) as a reset command returns the connection to a
//! fresh state, but also to database 0 and to the `default` user: use it
//! only with a URL that selects neither a database nor a user.
//!
//! ## The pool's address
//!
//! The pool's builder needs the server's address for its events and logs;
//! `address()` gives the one of the manager's URL.

// The crate docs describe every manager, each behind its feature; built
// without one of them (docs.rs builds with all features, and so does
// `.ci/run`), their links have nothing to point to.
#![cfg_attr(
    not(all(feature = "aio", feature = "blocking")),
    allow(rustdoc::broken_intra_doc_links)
)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(any(feature = "aio", feature = "blocking")))]
compile_error!("cmap-redis needs a runtime feature (`tokio`, `smol`, `async-std`), `blocking`, or both");

#[cfg(feature = "aio")]
mod aio_manager;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
#[cfg(feature = "local")]
mod local_manager;
mod manager;

#[cfg(feature = "aio")]
use cmap_async as cmap;
#[cfg(all(feature = "blocking", not(feature = "aio")))]
use cmap_blocking as cmap;

#[cfg(feature = "aio")]
pub use aio_manager::{RedisConnection, RedisManager};
pub use cmap::{Address, EstablishErrorKind};
#[cfg(feature = "aio")]
pub use manager::Async;
#[cfg(feature = "blocking")]
pub use manager::Threads;
pub use manager::{Manager, Runtime};
pub use redis;

use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, ServerErrorKind};

/// The kind of a failed connect, as the pool's `classify` wants it:
///
/// - [`Network`](EstablishErrorKind::Network), which the pool treats as
///   possible overload (it keeps retrying and checkouts keep waiting): I/O
///   errors (refused, reset, timed out, dropped), a server still loading
///   its data set (`LOADING`), and "max number of clients reached";
/// - [`Authentication`](EstablishErrorKind::Authentication): the
///   credentials were refused (`WRONGPASS`, `NOAUTH`), or the user may not
///   run a setup command (`NOPERM`);
/// - [`Other`](EstablishErrorKind::Other): anything else (a bad URL, a
///   database index out of range, TLS).
pub fn classify(error: &RedisError) -> EstablishErrorKind {
    match error.kind() {
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm) => {
            return EstablishErrorKind::Authentication
        }
        ErrorKind::Io | ErrorKind::Server(ServerErrorKind::BusyLoading) => {
            return EstablishErrorKind::Network
        }
        _ => {}
    }
    let text = error.to_string();
    if text.contains("WRONGPASS") || text.contains("NOAUTH") {
        return EstablishErrorKind::Authentication;
    }
    if text.contains("max number of clients reached")
        || error.is_io_error()
        || error.is_timeout()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
    {
        return EstablishErrorKind::Network;
    }
    EstablishErrorKind::of_chain(error)
}

/// The address the pool reports for a connection's settings.
fn address_of(info: &ConnectionInfo) -> Address {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) => Address::new(host, *port),
        ConnectionAddr::TcpTls { host, port, .. } => Address::new(host, *port),
        ConnectionAddr::Unix(path) => Address::unix(path.to_string_lossy()),
        // `ConnectionAddr` is non-exhaustive: its `Display` is the address.
        #[allow(unreachable_patterns)]
        other => Address::unix(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use redis::IntoConnectionInfo;

    use super::*;

    #[test]
    fn the_address_is_the_urls() {
        let info = "redis://:secret@cache.example:6380/2"
            .into_connection_info()
            .unwrap();
        assert_eq!(address_of(&info), Address::new("cache.example", 6380));
        let info = "redis://127.0.0.1".into_connection_info().unwrap();
        assert_eq!(address_of(&info), Address::new("127.0.0.1", 6379));
        #[cfg(unix)]
        {
            let info = "unix:///run/redis.sock".into_connection_info().unwrap();
            assert_eq!(address_of(&info).to_string(), "/run/redis.sock");
        }
    }

    #[test]
    fn errors_are_classified() {
        let refused: RedisError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
        assert_eq!(classify(&refused), EstablishErrorKind::Network);
        let auth: RedisError = (ErrorKind::AuthenticationFailed, "Password authentication failed").into();
        assert_eq!(classify(&auth), EstablishErrorKind::Authentication);
        let config: RedisError = (ErrorKind::InvalidClientConfig, "bad URL").into();
        assert_eq!(classify(&config), EstablishErrorKind::Other);
    }
}
