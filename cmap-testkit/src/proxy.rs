//! A loopback TCP fault proxy in front of a local server, for the tests
//! and for `bench outage`. It runs on a current-thread tokio runtime of its own,
//! on a thread of its own, so that the load on the pools' runtime does not
//! delay it, and its mode is switched at run time from the scenario's
//! thread:
//!
//! - [`Mode::Pass`]: forward every connection;
//! - [`Mode::Refuse`]: the listener is closed (a connect is refused); it is
//!   bound again, on the same port, when the mode leaves `Refuse`.
//!   Existing connections are left alone: [`Proxy::cut`] closes them;
//! - [`Mode::Blackhole`]: new connections are accepted but not forwarded
//!   (no upstream connection until the mode changes), and existing ones
//!   stop forwarding (nothing is read, so nothing is lost: they resume
//!   when the mode changes);
//! - [`Mode::Delay`]: a new connection waits that long before it is
//!   connected upstream.
//!
//! [`Proxy::cut`] closes every existing proxied connection and keeps
//! accepting (the brief's "cut" mode).
//!
//! [`Proxy::set_latency`], apart from the mode, makes every connection a
//! long link: each chunk read from either side is written to the other
//! that much later, in order, while the next ones are already read (a
//! latency line, not a stall: a round trip takes twice the latency
//! whatever the traffic). The end of a stream travels the line too.
//!
//! Only loopback addresses are accepted, and every loop ends by itself:
//! the proxy stops when its handle is dropped or after `MAX_LIFETIME`,
//! whichever comes first; dropping its runtime closes every socket.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// A command's acknowledgement: the instant it took effect. A std
/// channel, so that callers inside an async runtime may wait on it too.
type Ack = std::sync::mpsc::Sender<Instant>;

/// How long a proxy may run at most, whatever happens to its handle
/// (unless started with [`Proxy::start_for`]).
const MAX_LIFETIME: Duration = Duration::from_secs(300);

/// Chunks in flight on one direction of a latency line: what a reader may
/// run ahead of its writer (each chunk up to `CHUNK` bytes).
const LINE: usize = 256;
const CHUNK: usize = 16 * 1024;

/// What the proxy does with connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward every connection.
    Pass,
    /// Refuse new connections (the listener is closed).
    Refuse,
    /// Accept and forward nothing.
    Blackhole,
    /// Wait this long before connecting a new connection upstream.
    Delay(Duration),
}

enum Command {
    Mode(Mode),
    Cut,
    Latency(Duration),
}

/// The handle: switches the mode; dropping it stops the proxy.
pub struct Proxy {
    port: u16,
    commands: mpsc::Sender<(Command, Ack)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Starts a proxy on a free loopback port, forwarding to `upstream`
    /// (which must be a loopback address), in mode `Pass`; it stops by
    /// itself after 300 s.
    pub fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        Proxy::start_for(upstream, MAX_LIFETIME)
    }

    /// [`start`](Self::start), stopping by itself after `lifetime` instead
    /// (a benchmark longer than 300 s whose clients cannot follow a new
    /// port).
    pub fn start_for(upstream: SocketAddr, lifetime: Duration) -> std::io::Result<Proxy> {
        if !upstream.ip().is_loopback() {
            return Err(std::io::Error::other(
                "the fault proxy forwards to loopback addresses only",
            ));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // Bound here with std, made a tokio listener on the proxy's own
        // thread: the caller may be inside a runtime of its own.
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let (commands, rx) = mpsc::channel(8);
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{port}"))
            .spawn(move || {
                rt.block_on(async {
                    if let Ok(listener) = TcpListener::from_std(listener) {
                        serve(listener, port, upstream, rx, lifetime).await;
                    }
                });
                // Dropping the runtime drops every connection task, and with
                // them every socket.
                drop(rt);
            })?;
        Ok(Proxy {
            port,
            commands,
            thread: Some(thread),
        })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Switches the mode; returns once it is in effect (for `Pass` after
    /// `Refuse`: the listener is bound again), with the instant it was.
    pub fn set(&self, mode: Mode) -> Instant {
        self.send(Command::Mode(mode))
    }

    /// Closes every existing proxied connection (new ones are accepted as
    /// the mode says); returns the instant it was done.
    pub fn cut(&self) -> Instant {
        self.send(Command::Cut)
    }

    /// Delays every chunk forwarded from now on, either way, on every
    /// connection, by `latency` (zero: none, the start); returns the
    /// instant it was in effect.
    pub fn set_latency(&self, latency: Duration) -> Instant {
        self.send(Command::Latency(latency))
    }

    /// Runs `work` while every new connection waits `delay` before it is
    /// connected upstream and the proxy cuts what it holds every `every`:
    /// a connection `work` opens meets the end of the stream in its
    /// handshake, whenever it starts. Needs a multi-thread tokio runtime
    /// (the cuts block in place).
    pub async fn cutting_handshakes<T>(
        &self,
        delay: Duration,
        every: Duration,
        work: impl Future<Output = T>,
    ) -> T {
        self.set(Mode::Delay(delay));
        let cutter = async {
            loop {
                tokio::time::sleep(every).await;
                tokio::task::block_in_place(|| self.cut());
            }
        };
        tokio::select! {
            out = work => out,
            () = cutter => unreachable!("the cutter never ends"),
        }
    }

    fn send(&self, command: Command) -> Instant {
        let (ack, done) = std::sync::mpsc::channel();
        if self.commands.try_send((command, ack)).is_err() {
            return Instant::now();
        }
        done.recv().unwrap_or_else(|_| Instant::now())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Closing the command channel ends `serve`.
        let (tx, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.commands, tx));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: TcpListener,
    port: u16,
    upstream: SocketAddr,
    mut commands: mpsc::Receiver<(Command, Ack)>,
    lifetime: Duration,
) {
    let deadline = tokio::time::Instant::now() + lifetime;
    let (mode_tx, mode_rx) = watch::channel(Mode::Pass);
    let (cut_tx, cut_rx) = watch::channel(0u64);
    let (latency_tx, latency_rx) = watch::channel(Duration::ZERO);
    let mut listener = Some(listener);
    loop {
        tokio::select! {
            command = commands.recv() => {
                let Some((command, ack)) = command else { break };
                match command {
                    Command::Mode(Mode::Refuse) => {
                        listener = None;
                        mode_tx.send_replace(Mode::Refuse);
                    }
                    Command::Mode(mode) => {
                        if listener.is_none() {
                            // SO_REUSEADDR is set by tokio on Unix, so the
                            // port is free again at once.
                            match TcpListener::bind(("127.0.0.1", port)).await {
                                Ok(l) => listener = Some(l),
                                Err(e) => eprintln!("fault proxy: cannot bind 127.0.0.1:{port} again: {e}"),
                            }
                        }
                        mode_tx.send_replace(mode);
                    }
                    Command::Cut => {
                        cut_tx.send_modify(|epoch| *epoch += 1);
                    }
                    Command::Latency(latency) => {
                        latency_tx.send_replace(latency);
                    }
                }
                let _ = ack.send(Instant::now());
            }
            accepted = accept(listener.as_ref()) => {
                if let Ok((client, _)) = accepted {
                    let _ = client.set_nodelay(true);
                    let watches = Watches {
                        mode: mode_rx.clone(),
                        cut: cut_rx.clone(),
                        latency: latency_rx.clone(),
                    };
                    tokio::spawn(forward(client, upstream, watches));
                }
            }
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
}

async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// What a connection follows of the proxy's settings.
struct Watches {
    mode: watch::Receiver<Mode>,
    cut: watch::Receiver<u64>,
    latency: watch::Receiver<Duration>,
}

/// One proxied connection, until either side closes it (its end through
/// the latency line), it is cut, or the proxy stops.
async fn forward(client: TcpStream, upstream: SocketAddr, watches: Watches) {
    let Watches {
        mut mode,
        mut cut,
        latency,
    } = watches;
    let epoch = *cut.borrow_and_update();
    // Before connecting upstream: hold the connection through a blackhole,
    // wait out a delay.
    loop {
        let current = *mode.borrow_and_update();
        match current {
            Mode::Blackhole => {
                tokio::select! {
                    changed = mode.changed() => if changed.is_err() { return },
                    _ = cut.changed() => return,
                }
            }
            Mode::Delay(d) => {
                tokio::time::sleep(d).await;
                break;
            }
            Mode::Pass | Mode::Refuse => break,
        }
    }
    if *cut.borrow() != epoch {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = line(client_read, server_write, mode.clone(), latency.clone());
    let down = line(server_read, client_write, mode, latency);
    tokio::select! {
        () = up => {}
        () = down => {}
        () = async {
            while cut.changed().await.is_ok() && *cut.borrow() == epoch {}
        } => {}
    }
}

/// One direction of a connection: every chunk read from `from` at `t` is
/// written to `to` at `t` + the latency then set, in order; the reader
/// goes on meanwhile (up to `LINE` chunks ahead). In a blackhole neither
/// side moves: nothing is read, and what is on the line waits. Ends when
/// `from` has ended and the line is empty, or on an error.
async fn line(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mode: watch::Receiver<Mode>,
    latency: watch::Receiver<Duration>,
) {
    let (tx, mut rx) = mpsc::channel::<(tokio::time::Instant, Vec<u8>)>(LINE);
    let mut read_mode = mode.clone();
    // Owns `tx`: when it ends, the writer ends once the line is empty.
    let read = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            if !forwarding(&mut read_mode).await {
                return;
            }
            tokio::select! {
                read = from.read(&mut buf) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        let due = tokio::time::Instant::now() + *latency.borrow();
                        if tx.send((due, buf[..n].to_vec())).await.is_err() {
                            return;
                        }
                    }
                },
                // A blackhole stops the reading at once.
                changed = read_mode.changed() => if changed.is_err() { return },
            }
        }
    };
    let mut write_mode = mode;
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if !forwarding(&mut write_mode).await || to.write_all(&chunk).await.is_err() {
                return;
            }
        }
    };
    // The writer ends the line: on an error, or once the reader has ended
    // (dropping `tx`) and the line is empty.
    tokio::select! {
        () = write => {}
        () = async { read.await; std::future::pending().await } => {}
    }
}

/// Waits out a blackhole; false when the proxy stopped meanwhile.
async fn forwarding(mode: &mut watch::Receiver<Mode>) -> bool {
    while *mode.borrow_and_update() == Mode::Blackhole {
        if mode.changed().await.is_err() {
            return false;
        }
    }
    true
}
