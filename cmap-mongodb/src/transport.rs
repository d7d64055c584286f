//! The socket under a connection, one per runtime: the protocol code
//! ([`Connection`](crate::Connection), the handshake, authentication) is
//! written once against [`Transport`].

use std::future::Future;
use std::io;
use std::time::Instant;

/// A byte stream a [`Connection`](crate::Connection) runs on: tokio's TCP
/// or TLS stream (feature `tokio`), the async-io stack's (feature `smol`),
/// or a blocking `std` socket (feature `blocking`). Sealed: the crate implements it for its own streams.
pub trait Transport: Send + sealed::Sealed {
    /// Writes all of `bytes`, failing with [`io::ErrorKind::TimedOut`] if
    /// that is not done by `deadline`.
    fn write_all<'a>(
        &'a mut self,
        bytes: &'a [u8],
        deadline: Option<Instant>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a;

    /// Fills `buf` exactly, failing with [`io::ErrorKind::TimedOut`] if
    /// that is not done by `deadline` (all the reads it takes together).
    fn read_exact<'a>(
        &'a mut self,
        buf: &'a mut [u8],
        deadline: Option<Instant>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a;

    /// Whether the peer has closed the connection (or sent bytes nobody
    /// asked for), seen without a round trip and without waiting.
    fn is_closed(&mut self) -> bool;
}

/// Polls `future` once with a waker that does nothing: the futures over
/// blocking sockets and in-memory bytes are ready when first polled
/// (`None` if it was not).
#[cfg(any(feature = "blocking", feature = "fuzzing", test))]
pub(crate) fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    use std::task::{Context, Poll, Waker};
    match std::pin::pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// The error of a transport whose deadline came first.
pub(crate) fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the operation's deadline passed")
}

pub(crate) mod sealed {
    /// Keeps [`Transport`](super::Transport) to this crate's streams.
    pub trait Sealed {}
}

#[cfg(feature = "blocking")]
mod std_stream {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::*;

    /// A blocking socket, plain or TLS. Its futures are ready when
    /// polled: the blocking manager polls them once.
    #[derive(Debug)]
    pub enum StdStream {
        /// Plain TCP.
        Plain(TcpStream),
        /// TLS over TCP.
        Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    }

    impl StdStream {
        pub(crate) fn tcp(&self) -> &TcpStream {
            match self {
                StdStream::Plain(tcp) => tcp,
                StdStream::Tls(tls) => tls.get_ref(),
            }
        }

        /// Runs `step` (which moves some of `len` bytes from offset `at`
        /// and says how many) until all are moved, each call given what
        /// is left before `deadline` as the socket's timeout (set with
        /// `arm`, and cleared after): the deadline bounds all the calls
        /// together. Without a deadline the socket has none.
        fn bounded(
            &mut self,
            deadline: Option<Instant>,
            len: usize,
            arm: fn(&TcpStream, Option<std::time::Duration>) -> io::Result<()>,
            mut step: impl FnMut(&mut StdStream, usize) -> io::Result<usize>,
        ) -> io::Result<()> {
            let mut at = 0;
            let result = loop {
                if at >= len {
                    break Ok(());
                }
                if let Some(deadline) = deadline {
                    match deadline.checked_duration_since(Instant::now()) {
                        Some(left) if !left.is_zero() => arm(self.tcp(), Some(left))?,
                        _ => break Err(timed_out()),
                    }
                }
                match step(self, at) {
                    Ok(n) => at += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e)
                        if deadline.is_some()
                            && matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
                    {
                        break Err(timed_out())
                    }
                    Err(e) => break Err(e),
                }
            };
            if deadline.is_some() {
                arm(self.tcp(), None)?;
            }
            result
        }
    }

    impl sealed::Sealed for StdStream {}

    impl Transport for StdStream {
        fn write_all<'a>(
            &'a mut self,
            bytes: &'a [u8],
            deadline: Option<Instant>,
        ) -> impl Future<Output = io::Result<()>> + Send + 'a {
            let len = bytes.len();
            std::future::ready(
                self.bounded(deadline, len, TcpStream::set_write_timeout, |stream, at| {
                    let n = match stream {
                        StdStream::Plain(tcp) => tcp.write(&bytes[at..])?,
                        StdStream::Tls(tls) => tls.write(&bytes[at..])?,
                    };
                    if n == 0 {
                        return Err(io::ErrorKind::WriteZero.into());
                    }
                    if at + n == len {
                        match stream {
                            StdStream::Plain(tcp) => tcp.flush()?,
                            StdStream::Tls(tls) => tls.flush()?,
                        }
                    }
                    Ok(n)
                }),
            )
        }

        fn read_exact<'a>(
            &'a mut self,
            buf: &'a mut [u8],
            deadline: Option<Instant>,
        ) -> impl Future<Output = io::Result<()>> + Send + 'a {
            let len = buf.len();
            std::future::ready(
                self.bounded(deadline, len, TcpStream::set_read_timeout, |stream, at| {
                    let n = match stream {
                        StdStream::Plain(tcp) => tcp.read(&mut buf[at..])?,
                        StdStream::Tls(tls) => tls.read(&mut buf[at..])?,
                    };
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    Ok(n)
                }),
            )
        }

        fn is_closed(&mut self) -> bool {
            let tcp = self.tcp();
            if tcp.set_nonblocking(true).is_err() {
                return true;
            }
            let mut byte = [0u8; 1];
            let peeked = tcp.peek(&mut byte);
            let restored = tcp.set_nonblocking(false).is_ok();
            !restored || peer_closed(peeked, matches!(self, StdStream::Tls(_)))
        }
    }
}

#[cfg(feature = "blocking")]
pub use std_stream::StdStream;

#[cfg(feature = "tokio")]
mod tokio_stream {
    use std::task::{Context, Poll, Waker};

    use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};
    use tokio::net::TcpStream;

    use super::*;

    /// A tokio socket, plain or TLS.
    #[derive(Debug)]
    pub enum TokioStream {
        /// Plain TCP.
        Plain(TcpStream),
        /// TLS over TCP.
        Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    }

    impl sealed::Sealed for TokioStream {}

    impl Transport for TokioStream {
        async fn write_all<'a>(&'a mut self, bytes: &'a [u8], deadline: Option<Instant>) -> io::Result<()> {
            let write = async {
                match self {
                    TokioStream::Plain(tcp) => tcp.write_all(bytes).await,
                    TokioStream::Tls(tls) => {
                        tls.write_all(bytes).await?;
                        tls.flush().await
                    }
                }
            };
            until(deadline, write).await
        }

        async fn read_exact<'a>(
            &'a mut self,
            buf: &'a mut [u8],
            deadline: Option<Instant>,
        ) -> io::Result<()> {
            let read = async {
                match self {
                    TokioStream::Plain(tcp) => tcp.read_exact(buf).await.map(drop),
                    TokioStream::Tls(tls) => tls.read_exact(buf).await.map(drop),
                }
            };
            until(deadline, read).await
        }

        fn is_closed(&mut self) -> bool {
            let (tcp, tls) = match self {
                TokioStream::Plain(tcp) => (&*tcp, false),
                TokioStream::Tls(stream) => (stream.get_ref().0, true),
            };
            // A peek polled once with a waker that does nothing: ready
            // only if the socket has something to say.
            let mut byte = [0u8; 1];
            let mut buf = ReadBuf::new(&mut byte);
            match tcp.poll_peek(&mut Context::from_waker(Waker::noop()), &mut buf) {
                Poll::Pending => false,
                Poll::Ready(peeked) => peer_closed(peeked, tls),
            }
        }
    }
}

#[cfg(feature = "tokio")]
pub use tokio_stream::TokioStream;

/// `work`, unless tokio's timer reaches `deadline` first.
#[cfg(feature = "tokio")]
async fn until(deadline: Option<Instant>, work: impl Future<Output = io::Result<()>>) -> io::Result<()> {
    match deadline {
        None => work.await,
        Some(deadline) => tokio::time::timeout_at(deadline.into(), work)
            .await
            .unwrap_or_else(|_| Err(timed_out())),
    }
}

#[cfg(feature = "smol")]
mod async_io_stream {
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use async_net::TcpStream;
    use futures_lite::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// `work`, unless async-io's timer reaches `deadline` first.
    async fn until(deadline: Option<Instant>, work: impl Future<Output = io::Result<()>>) -> io::Result<()> {
        match deadline {
            None => work.await,
            Some(deadline) => {
                let timer = async {
                    async_io::Timer::at(deadline).await;
                    Err(timed_out())
                };
                futures_lite::future::or(work, timer).await
            }
        }
    }

    /// A socket of the async-io stack (smol, async-std), plain or TLS.
    #[derive(Debug)]
    pub enum AsyncIoStream {
        /// Plain TCP.
        Plain(TcpStream),
        /// TLS over TCP.
        Tls(Box<futures_rustls::client::TlsStream<TcpStream>>),
    }

    impl sealed::Sealed for AsyncIoStream {}

    impl Transport for AsyncIoStream {
        async fn write_all<'a>(&'a mut self, bytes: &'a [u8], deadline: Option<Instant>) -> io::Result<()> {
            let write = async {
                match self {
                    AsyncIoStream::Plain(tcp) => tcp.write_all(bytes).await,
                    AsyncIoStream::Tls(tls) => {
                        tls.write_all(bytes).await?;
                        tls.flush().await
                    }
                }
            };
            until(deadline, write).await
        }

        async fn read_exact<'a>(
            &'a mut self,
            buf: &'a mut [u8],
            deadline: Option<Instant>,
        ) -> io::Result<()> {
            let read = async {
                match self {
                    AsyncIoStream::Plain(tcp) => tcp.read_exact(buf).await,
                    AsyncIoStream::Tls(tls) => tls.read_exact(buf).await,
                }
            };
            until(deadline, read).await
        }

        fn is_closed(&mut self) -> bool {
            let (tcp, tls) = match self {
                AsyncIoStream::Plain(tcp) => (&*tcp, false),
                AsyncIoStream::Tls(stream) => (stream.get_ref().0, true),
            };
            // A peek polled once with a waker that does nothing: ready
            // only if the socket has something to say.
            let mut byte = [0u8; 1];
            let peeked = pin!(tcp.peek(&mut byte)).poll(&mut Context::from_waker(Waker::noop()));
            match peeked {
                Poll::Pending => false,
                Poll::Ready(peeked) => peer_closed(peeked, tls),
            }
        }
    }
}

#[cfg(feature = "smol")]
pub use async_io_stream::AsyncIoStream;

/// What a peek at an idle connection says: the end of the stream or an
/// error is a closed connection; bytes on a plain connection that
/// nobody asked for mean it is out of step. Under TLS the server may
/// send records of its own (a TLS 1.3 session ticket), so bytes alone do
/// not condemn it.
#[cfg(any(feature = "tokio", feature = "smol", feature = "blocking"))]
fn peer_closed(peeked: io::Result<usize>, tls: bool) -> bool {
    match peeked {
        Ok(0) => true,
        Ok(_) => !tls,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_peek_says_closed_on_end_of_stream_an_error_or_plain_bytes_nobody_asked_for() {
        for tls in [false, true] {
            assert!(peer_closed(Ok(0), tls), "end of stream");
            assert!(
                !peer_closed(Err(io::ErrorKind::WouldBlock.into()), tls),
                "nothing to read"
            );
            assert!(
                peer_closed(Err(io::ErrorKind::ConnectionReset.into()), tls),
                "reset"
            );
        }
        assert!(peer_closed(Ok(1), false), "plain bytes: out of step");
        assert!(!peer_closed(Ok(1), true), "TLS records of the server's own");
    }

    /// A connected pair of sockets on the loopback: ours, and the peer's.
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (peer, _) = listener.accept().unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        (ours, peer)
    }

    /// Waits until `closed` says so: the peer's FIN takes a moment to
    /// arrive.
    fn eventually(mut closed: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if closed() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[cfg(feature = "blocking")]
    #[test]
    fn a_std_stream_moves_bytes_and_sees_the_peer_hang_up() {
        use crate::test_server::block_on;
        let (ours, mut peer) = pair();
        let mut stream = StdStream::Plain(ours);
        block_on(stream.write_all(b"ping", None)).unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        peer.write_all(b"pong").unwrap();
        let mut reply = [0u8; 4];
        block_on(stream.read_exact(&mut reply, None)).unwrap();
        assert_eq!(&reply, b"pong");
        assert!(!stream.is_closed(), "an idle, open connection");
        drop(peer);
        assert!(eventually(|| stream.is_closed()));
    }

    #[cfg(feature = "tokio")]
    #[test]
    fn a_tokio_stream_moves_bytes_and_sees_the_peer_hang_up() {
        let (ours, mut peer) = pair();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut stream = runtime.block_on(async {
            ours.set_nonblocking(true).unwrap();
            TokioStream::Plain(tokio::net::TcpStream::from_std(ours).unwrap())
        });
        runtime.block_on(stream.write_all(b"ping", None)).unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        peer.write_all(b"pong").unwrap();
        let mut reply = [0u8; 4];
        runtime.block_on(stream.read_exact(&mut reply, None)).unwrap();
        assert_eq!(&reply, b"pong");
        assert!(!runtime.block_on(async { stream.is_closed() }));
        drop(peer);
        // The runtime's reactor learns of the hang-up while it runs.
        assert!(eventually(|| runtime.block_on(async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            stream.is_closed()
        })));
    }

    #[cfg(feature = "smol")]
    #[test]
    fn an_async_io_stream_moves_bytes_and_sees_the_peer_hang_up() {
        let (ours, mut peer) = pair();
        let mut stream = AsyncIoStream::Plain(async_net::TcpStream::try_from(ours).unwrap());
        smol::block_on(stream.write_all(b"ping", None)).unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        peer.write_all(b"pong").unwrap();
        let mut reply = [0u8; 4];
        smol::block_on(stream.read_exact(&mut reply, None)).unwrap();
        assert_eq!(&reply, b"pong");
        assert!(!stream.is_closed());
        drop(peer);
        assert!(eventually(|| stream.is_closed()));
    }
}
