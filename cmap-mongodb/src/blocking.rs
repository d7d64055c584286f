//! The synchronous manager, for a `cmap_blocking::Pool`: blocking `std`
//! sockets, rustls, the same handshake and authentication as the async
//! manager (the protocol code is written once, over [`Transport`](crate::Transport)).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cmap_mongodb::bson::doc;
//!
//! let uri = "mongodb://127.0.0.1:27017/?maxPoolSize=10";
//! let manager = cmap_mongodb::blocking::MongoManager::new(uri)?;
//! let pool = cmap_blocking::Pool::builder().connection_string(uri).build(manager)?;
//! let mut conn = pool.get()?;
//! let reply = conn.run_command("admin", &doc! { "ping": 1 })?;
//! assert_eq!(reply.get_f64("ok")?, 1.0);
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bson::Document;
use cmap_blocking::{EstablishErrorKind, ManageConnection};
use cmap_core::{Address, ServiceId};

use crate::connection::{Connection, ServerInfo};
use crate::error::{Error, Stage};
use crate::handshake::{hello, HandshakeTimeout, Limits};
use crate::manager::{Manager, Threads};
use crate::operation::{deadline, jitter, no_connection, overload_retries, OverloadRetry};
use crate::transport::StdStream;

/// A pooled connection of a [`MongoManager`].
#[derive(Debug)]
pub struct MongoConnection(Connection<StdStream>);

impl MongoConnection {
    /// Runs `command` on database `db`: see
    /// [`Connection::run_command`](crate::Connection::run_command).
    ///
    /// # Errors
    ///
    /// As [`Connection::run_command`](crate::Connection::run_command).
    pub fn run_command(&mut self, db: &str, command: &Document) -> Result<Document, Error> {
        finish(self.0.run_command(db, command))
    }

    /// [`run_command`](Self::run_command) by `deadline`: see
    /// [`Connection::run_command_until`](crate::Connection::run_command_until).
    ///
    /// # Errors
    ///
    /// As [`Connection::run_command_until`](crate::Connection::run_command_until).
    pub fn run_command_until(
        &mut self,
        db: &str,
        command: &Document,
        deadline: Instant,
    ) -> Result<Document, Error> {
        finish(self.0.run_command_until(db, command, deadline))
    }

    /// Whether an error broke it, or the server closed it.
    pub fn is_broken(&mut self) -> bool {
        self.0.is_broken()
    }

    /// What the server said of itself in the handshake.
    pub fn server(&self) -> &ServerInfo {
        self.0.server()
    }

    /// The underlying connection.
    pub fn get_ref(&self) -> &Connection<StdStream> {
        &self.0
    }
}

/// Runs commands on a blocking pool from the checkout to the reply, under
/// the manager's `timeoutMS`: the blocking twin of
/// [`MongoPool`](crate::MongoPool), with the same rules.
pub trait MongoPool {
    /// Checks out a connection and runs `command` on `db`, all within
    /// `timeoutMS` if the connection string set it.
    ///
    /// # Errors
    ///
    /// As [`crate::MongoPool::run_command`].
    fn run_command(&self, db: &str, command: &Document) -> Result<Document, Error>;

    /// [`run_command`](MongoPool::run_command) with its own deadline in
    /// place of `timeoutMS` (`None`: no limit).
    ///
    /// # Errors
    ///
    /// As [`crate::MongoPool::run_command`].
    fn run_command_until(
        &self,
        db: &str,
        command: &Document,
        deadline: Option<Instant>,
    ) -> Result<Document, Error>;
}

impl MongoPool for cmap_blocking::Pool<MongoManager> {
    fn run_command(&self, db: &str, command: &Document) -> Result<Document, Error> {
        self.run_command_until(db, command, deadline(self.manager().options()))
    }

    fn run_command_until(
        &self,
        db: &str,
        command: &Document,
        deadline: Option<Instant>,
    ) -> Result<Document, Error> {
        let mut retry = OverloadRetry::new(overload_retries(self.manager().options()));
        loop {
            let error = match attempt(self, db, command, deadline) {
                Err(error) => error,
                done => return done,
            };
            match retry.next(&error, deadline, jitter()) {
                Some(wait) => std::thread::sleep(wait),
                None => return Err(error),
            }
        }
    }
}

/// One attempt: a fresh checkout, then the command.
fn attempt(
    pool: &cmap_blocking::Pool<MongoManager>,
    db: &str,
    command: &Document,
    deadline: Option<Instant>,
) -> Result<Document, Error> {
    let checkout = match deadline {
        None => pool.get(),
        Some(deadline) => pool.get_timeout(deadline.saturating_duration_since(Instant::now())),
    };
    let mut conn = checkout.map_err(|e| {
        let timed_out = e.is_timeout();
        no_connection(e, timed_out, deadline)
    })?;
    match deadline {
        None => conn.run_command(db, command),
        Some(deadline) => conn.run_command_until(db, command, deadline),
    }
}

/// Drives a future over a [`StdStream`] to its end: its reads and writes
/// block and are ready at once, so one poll finishes it.
fn finish<F: Future>(future: F) -> F::Output {
    crate::transport::poll_once(future)
        .unwrap_or_else(|| unreachable!("a future over blocking sockets is ready when first polled"))
}

/// The manager of a `cmap_blocking::Pool`: see [`Manager`] for its
/// options.
pub type MongoManager = Manager<Threads>;

impl Manager<Threads> {
    /// Opens one connection: TCP, TLS, `hello`, authentication, each step
    /// given what is left of `connectTimeoutMS` as its socket timeout
    /// (under `timeoutMS`, the handshake's commands `timeoutMS` each, as
    /// for `minPoolSize`).
    pub fn open(&self) -> Result<MongoConnection, Error> {
        self.open_until(None)
    }

    /// [`open`](Self::open) for a checkout due by `checkout`: under
    /// `timeoutMS`, TCP and TLS get `min(connectTimeoutMS, what is left)`
    /// and each handshake command what is left (the async manager's
    /// `connect_until`, the same [`Limits`]).
    fn open_until(&self, checkout: Option<Instant>) -> Result<MongoConnection, Error> {
        let settings = &self.settings;
        let limits = Limits::new(&settings.options, checkout, Instant::now());
        let deadline = Deadline { limit: limits.socket };
        let tcp = connect(settings.address(), &deadline)?;
        let stream = match &settings.tls {
            None => StdStream::Plain(tcp),
            Some((config, name)) => {
                deadline.arm(&tcp, Stage::Tls)?;
                let tls = rustls::ClientConnection::new(config.clone(), name.clone()).map_err(Error::Tls)?;
                let mut stream = rustls::StreamOwned::new(tls, tcp);
                while stream.conn.is_handshaking() {
                    stream
                        .conn
                        .complete_io(&mut stream.sock)
                        .map_err(|e| match crate::tls::refusal(&e) {
                            Some(refused) => Error::Tls(refused),
                            None => deadline.network(Stage::Tls, e),
                        })?;
                }
                StdStream::Tls(Box::new(stream))
            }
        };
        let mut conn = Connection::new(stream, settings.address().clone());
        let auth = settings.authenticator()?;
        // Under timeoutMS, each handshake command bounds itself; without,
        // connectTimeoutMS goes on.
        conn.handshake_timeout = limits.commands;
        let deadline = Deadline {
            limit: limits.handshake,
        };
        deadline.arm(conn_tcp(&conn), Stage::Hello)?;
        let reply = finish(hello(
            &mut conn,
            &settings.options,
            &settings.metadata,
            auth.as_ref(),
        ))
        .map_err(|e| deadline.timed_out(e))?;
        if let Some(auth) = auth {
            deadline.arm(conn_tcp(&conn), Stage::Authentication)?;
            finish(auth.authenticate(&mut conn, &reply)).map_err(|e| deadline.timed_out(e))?;
        }
        conn.handshake_timeout = HandshakeTimeout::None;
        // Commands have no socket timeout, as with the async manager.
        let tcp = conn_tcp(&conn);
        let _ = tcp
            .set_read_timeout(None)
            .and_then(|()| tcp.set_write_timeout(None));
        Ok(MongoConnection(conn))
    }
}

fn conn_tcp(conn: &Connection<StdStream>) -> &TcpStream {
    conn.transport().tcp()
}

/// `connectTimeoutMS` as socket timeouts: each step gets what is left.
struct Deadline {
    limit: Option<(Instant, Duration)>,
}

impl Deadline {
    #[cfg(test)]
    fn new(timeout: Option<Duration>) -> Deadline {
        Deadline {
            limit: timeout.map(|t| (Instant::now() + t, t)),
        }
    }

    /// What is left, or the timeout error of `stage` if nothing is.
    fn left(&self, stage: Stage) -> Result<Option<Duration>, Error> {
        match self.limit {
            None => Ok(None),
            Some((at, after)) => match at.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Ok(Some(left)),
                _ => Err(Error::Timeout { during: stage, after }),
            },
        }
    }

    /// Gives `tcp` what is left as its read and write timeouts.
    fn arm(&self, tcp: &TcpStream, stage: Stage) -> Result<(), Error> {
        let left = self.left(stage)?;
        tcp.set_read_timeout(left)
            .and_then(|()| tcp.set_write_timeout(left))
            .map_err(|source| Error::Network {
                during: stage,
                source,
            })
    }

    /// An I/O error of `stage`: a socket timeout is the connect timeout.
    fn network(&self, stage: Stage, source: io::Error) -> Error {
        self.timed_out(Error::Network {
            during: stage,
            source,
        })
    }

    fn timed_out(&self, error: Error) -> Error {
        match (error, self.limit) {
            (Error::Network { during, source }, Some((_, after)))
                if matches!(source.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
            {
                Error::Timeout { during, after }
            }
            (error, _) => error,
        }
    }
}

/// Resolves the host, then tries its addresses in turn within the
/// deadline.
fn connect(address: &Address, deadline: &Deadline) -> Result<TcpStream, Error> {
    let host = address.host().trim_start_matches('[').trim_end_matches(']');
    let port = address.port().unwrap_or(cmap_core::DEFAULT_PORT);
    let resolved = (host, port).to_socket_addrs().map_err(|source| Error::Dns {
        host: host.to_owned(),
        source,
    })?;
    let mut last = None;
    for addr in resolved {
        let attempt = match deadline.left(Stage::Connect)? {
            Some(left) => TcpStream::connect_timeout(&addr, left),
            None => TcpStream::connect(addr),
        };
        match attempt {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    let source = last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"));
    Err(deadline.network(Stage::Connect, source))
}

impl ManageConnection for Manager<Threads> {
    type Connection = MongoConnection;
    type Error = Error;
    const RESETS: bool = false;

    fn connect(&self) -> Result<MongoConnection, Error> {
        self.open()
    }

    /// [`open`](Manager::open), bounded as `timeoutMS` says for a checkout
    /// due by `deadline` (see the async manager's `connect_until`).
    fn connect_until(&self, deadline: Option<Instant>) -> Result<MongoConnection, Error> {
        self.open_until(deadline)
    }

    fn classify(&self, error: &Error) -> EstablishErrorKind {
        error.establish_kind()
    }

    fn check(&self, conn: &mut MongoConnection) -> Result<(), Error> {
        finish(self.settings.check(&mut conn.0))
    }

    fn is_broken(&self, conn: &mut MongoConnection) -> bool {
        conn.0.is_broken()
    }

    fn address(&self) -> Option<Address> {
        Some(Manager::address(self))
    }

    fn service_id(&self, conn: &MongoConnection) -> Option<ServiceId> {
        conn.0.service_id()
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;
    use crate::test_server::{closed_port, load_balancer, mongod, serve, silent};

    #[test]
    fn the_blocking_manager_opens_connections_and_names_what_fails() {
        let server = serve(mongod);
        let manager = MongoManager::new(&format!("mongodb://app:secret@{server}/shop"))
            .unwrap()
            .validate_idle_after(Duration::ZERO);
        // TCP, the hello and SCRAM: a connection ready for commands.
        let mut conn = ManageConnection::connect(&manager).unwrap();
        assert_eq!(conn.server().max_wire_version, 25);
        assert_eq!(conn.get_ref().address().port(), Some(server.port()));
        assert!(!ManageConnection::is_broken(&manager, &mut conn));
        assert!(!conn.is_broken());
        ManageConnection::check(&manager, &mut conn).unwrap();
        assert_eq!(
            conn.run_command("shop", &doc! { "ping": 1 }).unwrap(),
            doc! { "ok": 1.0 }
        );
        // Commands have no socket timeout once the connection is made.
        assert_eq!(conn_tcp(conn.get_ref()).read_timeout().unwrap(), None);
        assert_eq!(ManageConnection::service_id(&manager, &conn), None);
        assert_eq!(
            ManageConnection::address(&manager),
            Some(Address::new("127.0.0.1", server.port()))
        );
        // The server hangs up: the command fails, the connection is broken.
        let err = conn.run_command("admin", &doc! { "hangUp": 1 }).unwrap_err();
        assert!(err.is_network(), "{err:?}");
        assert!(conn.is_broken());
        assert!(ManageConnection::is_broken(&manager, &mut conn));
        assert!(ManageConnection::check(&manager, &mut conn).is_err());

        // In load-balanced mode the reply's serviceId is the connection's.
        let oid = bson::oid::ObjectId::new();
        let lb = MongoManager::new(&format!("mongodb://{}/?loadBalanced=true", load_balancer(oid))).unwrap();
        let conn = lb.open().unwrap();
        assert_eq!(
            ManageConnection::service_id(&lb, &conn),
            Some(ServiceId(oid.bytes()))
        );

        // A wrong password is an authentication failure.
        let wrong = MongoManager::new(&format!("mongodb://app:wrong@{server}/shop")).unwrap();
        let err = wrong.open().unwrap_err();
        assert_eq!(
            ManageConnection::classify(&wrong, &err),
            EstablishErrorKind::Authentication,
            "{err}"
        );
        assert_eq!(err.command_error().map(|e| e.code), Some(18), "{err}");

        // Nobody listening: a network error while connecting.
        let refused = MongoManager::new(&format!("mongodb://{}/", closed_port())).unwrap();
        let err = refused.open().unwrap_err();
        assert!(
            matches!(
                err,
                Error::Network {
                    during: Stage::Connect,
                    ..
                }
            ),
            "{err:?}"
        );

        // A server that does not answer the hello in time: connectTimeoutMS.
        let slow = MongoManager::new(&format!("mongodb://{}/?connectTimeoutMS=200", silent())).unwrap();
        let started = Instant::now();
        let err = slow.open().unwrap_err();
        assert!(
            matches!(err, Error::Timeout { during: Stage::Hello, after } if after == Duration::from_millis(200)),
            "{err:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn the_deadline_gives_each_step_what_is_left_and_names_a_socket_timeout() {
        let none = Deadline::new(None);
        assert!(matches!(none.left(Stage::Hello), Ok(None)));
        let later = Deadline::new(Some(Duration::from_secs(60)));
        let left = later.left(Stage::Hello).unwrap().unwrap();
        assert!(
            left <= Duration::from_secs(60) && left > Duration::from_secs(50),
            "{left:?}"
        );
        let past = Deadline::new(Some(Duration::ZERO));
        assert!(matches!(
            past.left(Stage::Tls),
            Err(Error::Timeout { during: Stage::Tls, after }) if after.is_zero()
        ));
        for kind in [io::ErrorKind::WouldBlock, io::ErrorKind::TimedOut] {
            assert!(matches!(
                later.network(Stage::Hello, kind.into()),
                Error::Timeout { during: Stage::Hello, after } if after == Duration::from_secs(60)
            ));
            // Without connectTimeoutMS there is no timeout to blame.
            assert!(matches!(
                none.network(Stage::Hello, kind.into()),
                Error::Network {
                    during: Stage::Hello,
                    ..
                }
            ));
        }
        assert!(matches!(
            later.network(Stage::Connect, io::ErrorKind::ConnectionRefused.into()),
            Error::Network {
                during: Stage::Connect,
                ..
            }
        ));
    }
}
