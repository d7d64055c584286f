//! The socket under a connection, one per runtime: the protocol code
//! ([`Connection`](crate::Connection), the handshake, authentication) is
//! written once against [`Transport`].

use std::future::Future;
use std::io;

/// A byte stream a [`Connection`](crate::Connection) runs on: tokio's TCP
/// or TLS stream (feature `tokio`), the async-io stack's (feature `smol`),
/// or a blocking `std` socket (feature `blocking`). Sealed: the crate implements it for its own streams.
pub trait Transport: Send + sealed::Sealed {
    /// Writes all of `bytes`.
    fn write_all<'a>(&'a mut self, bytes: &'a [u8]) -> impl Future<Output = io::Result<()>> + Send + 'a;

    /// Fills `buf` exactly.
    fn read_exact<'a>(&'a mut self, buf: &'a mut [u8]) -> impl Future<Output = io::Result<()>> + Send + 'a;

    /// Whether the peer has closed the connection (or sent bytes nobody
    /// asked for), seen without a round trip and without waiting.
    fn is_closed(&mut self) -> bool;
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
    }

    impl sealed::Sealed for StdStream {}

    impl Transport for StdStream {
        fn write_all<'a>(&'a mut self, bytes: &'a [u8]) -> impl Future<Output = io::Result<()>> + Send + 'a {
            std::future::ready(match self {
                StdStream::Plain(tcp) => tcp.write_all(bytes).and_then(|()| tcp.flush()),
                StdStream::Tls(tls) => tls.write_all(bytes).and_then(|()| tls.flush()),
            })
        }

        fn read_exact<'a>(
            &'a mut self,
            buf: &'a mut [u8],
        ) -> impl Future<Output = io::Result<()>> + Send + 'a {
            std::future::ready(match self {
                StdStream::Plain(tcp) => tcp.read_exact(buf),
                StdStream::Tls(tls) => tls.read_exact(buf),
            })
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
        async fn write_all<'a>(&'a mut self, bytes: &'a [u8]) -> io::Result<()> {
            match self {
                TokioStream::Plain(tcp) => tcp.write_all(bytes).await,
                TokioStream::Tls(tls) => {
                    tls.write_all(bytes).await?;
                    tls.flush().await
                }
            }
        }

        async fn read_exact<'a>(&'a mut self, buf: &'a mut [u8]) -> io::Result<()> {
            match self {
                TokioStream::Plain(tcp) => tcp.read_exact(buf).await.map(drop),
                TokioStream::Tls(tls) => tls.read_exact(buf).await.map(drop),
            }
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

#[cfg(feature = "smol")]
mod async_io_stream {
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use async_net::TcpStream;
    use futures_lite::{AsyncReadExt, AsyncWriteExt};

    use super::*;

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
        async fn write_all<'a>(&'a mut self, bytes: &'a [u8]) -> io::Result<()> {
            match self {
                AsyncIoStream::Plain(tcp) => tcp.write_all(bytes).await,
                AsyncIoStream::Tls(tls) => {
                    tls.write_all(bytes).await?;
                    tls.flush().await
                }
            }
        }

        async fn read_exact<'a>(&'a mut self, buf: &'a mut [u8]) -> io::Result<()> {
            match self {
                AsyncIoStream::Plain(tcp) => tcp.read_exact(buf).await,
                AsyncIoStream::Tls(tls) => tls.read_exact(buf).await,
            }
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
        block_on(stream.write_all(b"ping")).unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        peer.write_all(b"pong").unwrap();
        let mut reply = [0u8; 4];
        block_on(stream.read_exact(&mut reply)).unwrap();
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
        runtime.block_on(stream.write_all(b"ping")).unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        peer.write_all(b"pong").unwrap();
        let mut reply = [0u8; 4];
        runtime.block_on(stream.read_exact(&mut reply)).unwrap();
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
        smol::block_on(stream.write_all(b"ping")).unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        peer.write_all(b"pong").unwrap();
        let mut reply = [0u8; 4];
        smol::block_on(stream.read_exact(&mut reply)).unwrap();
        assert_eq!(&reply, b"pong");
        assert!(!stream.is_closed());
        drop(peer);
        assert!(eventually(|| stream.is_closed()));
    }
}
