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
//! Only loopback addresses are accepted, and every loop ends by itself:
//! the proxy stops when its handle is dropped or after `MAX_LIFETIME`,
//! whichever comes first; dropping its runtime closes every socket.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// A command's acknowledgement: the instant it took effect. A std
/// channel, so that callers inside an async runtime may wait on it too.
type Ack = std::sync::mpsc::Sender<Instant>;

/// How long a proxy may run at most, whatever happens to its handle.
const MAX_LIFETIME: Duration = Duration::from_secs(300);

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
}

/// The handle: switches the mode; dropping it stops the proxy.
pub struct Proxy {
    port: u16,
    commands: mpsc::Sender<(Command, Ack)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Starts a proxy on a free loopback port, forwarding to `upstream`
    /// (which must be a loopback address), in mode `Pass`.
    pub fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
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
                        serve(listener, port, upstream, rx).await;
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
) {
    let deadline = tokio::time::Instant::now() + MAX_LIFETIME;
    let (mode_tx, mode_rx) = watch::channel(Mode::Pass);
    let (cut_tx, cut_rx) = watch::channel(0u64);
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
                }
                let _ = ack.send(Instant::now());
            }
            accepted = accept(listener.as_ref()) => {
                if let Ok((client, _)) = accepted {
                    let _ = client.set_nodelay(true);
                    tokio::spawn(forward(client, upstream, mode_rx.clone(), cut_rx.clone()));
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

/// One proxied connection, until either side closes it, it is cut, or the
/// proxy stops.
async fn forward(
    client: TcpStream,
    upstream: SocketAddr,
    mut mode: watch::Receiver<Mode>,
    mut cut: watch::Receiver<u64>,
) {
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
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let mut up = vec![0u8; 16 * 1024];
    let mut down = vec![0u8; 16 * 1024];
    loop {
        let forwarding = *mode.borrow_and_update() != Mode::Blackhole;
        tokio::select! {
            read = client_read.read(&mut up), if forwarding => {
                match read {
                    Ok(0) | Err(_) => return,
                    Ok(n) => if server_write.write_all(&up[..n]).await.is_err() { return },
                }
            }
            read = server_read.read(&mut down), if forwarding => {
                match read {
                    Ok(0) | Err(_) => return,
                    Ok(n) => if client_write.write_all(&down[..n]).await.is_err() { return },
                }
            }
            changed = mode.changed() => if changed.is_err() { return },
            changed = cut.changed() => if changed.is_err() || *cut.borrow() != epoch { return },
        }
    }
}
