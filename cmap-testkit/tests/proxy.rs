//! The fault proxy's latency line (`Proxy::set_latency`), in front of the
//! testkit's echo server: a round trip takes twice the latency, bytes
//! arrive intact and in order, chunks travel together rather than one
//! round trip at a time, and a cut or a blackhole still acts at once.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cmap_testkit::echo::echo_server;
use cmap_testkit::proxy::{Mode, Proxy};

const LATENCY: Duration = Duration::from_millis(100);

fn delayed() -> (Proxy, TcpStream) {
    let proxy = Proxy::start(echo_server().expect("an echo server")).expect("a proxy");
    proxy.set_latency(LATENCY);
    let stream = TcpStream::connect(("127.0.0.1", proxy.port())).expect("a connection");
    stream.set_nodelay(true).expect("nodelay");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    (proxy, stream)
}

#[test]
fn a_round_trip_takes_twice_the_latency() {
    let (_proxy, mut stream) = delayed();
    for _ in 0..3 {
        let start = Instant::now();
        stream.write_all(b"ping").expect("written");
        let mut back = [0u8; 4];
        stream.read_exact(&mut back).expect("echoed");
        assert_eq!(&back, b"ping");
        let took = start.elapsed();
        assert!(took >= 2 * LATENCY, "a round trip took {took:?}");
    }
}

#[test]
fn bytes_arrive_intact_and_in_order_without_a_stall_per_chunk() {
    let (_proxy, mut stream) = delayed();
    // 40 writes 10 ms apart, 2 MiB in all: one round trip per chunk would
    // take 40 × 200 ms; a latency line, the writes' 390 ms plus 200 ms.
    let sent: Vec<u8> = (0..2u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut reader = stream.try_clone().expect("a second handle");
    let expected = sent.len();
    let start = Instant::now();
    let receiving = std::thread::spawn(move || {
        let mut got = vec![0u8; expected];
        reader.read_exact(&mut got).map(|()| got)
    });
    for piece in sent.chunks(sent.len() / 40) {
        stream.write_all(piece).expect("written");
        std::thread::sleep(Duration::from_millis(10));
    }
    let got = receiving.join().expect("the reader").expect("everything echoed");
    let took = start.elapsed();
    assert!(got == sent, "the bytes came back altered or out of order");
    assert!(took >= 2 * LATENCY, "took {took:?}");
    assert!(took < Duration::from_secs(3), "took {took:?}: a stall per chunk?");
}

#[test]
fn a_cut_closes_a_delayed_connection_at_once_and_new_ones_work() {
    let (proxy, mut stream) = delayed();
    stream.write_all(b"ping").expect("written");
    let mut back = [0u8; 4];
    stream.read_exact(&mut back).expect("echoed");
    // Bytes on the line when the cut comes are lost with the connection.
    stream.write_all(b"lost").expect("written");
    let cut = proxy.cut();
    let mut rest = [0u8; 4];
    match stream.read(&mut rest) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("after a cut: {other:?}"),
    }
    assert!(
        cut.elapsed() < LATENCY,
        "closed {:?} after the cut",
        cut.elapsed()
    );
    let mut fresh = TcpStream::connect(("127.0.0.1", proxy.port())).expect("a new connection");
    let start = Instant::now();
    fresh.write_all(b"again").expect("written");
    let mut back = [0u8; 5];
    fresh.read_exact(&mut back).expect("echoed");
    assert_eq!(&back, b"again");
    assert!(start.elapsed() >= 2 * LATENCY);
}

#[test]
fn a_blackhole_holds_what_is_on_the_line_and_pass_delivers_it() {
    let (proxy, mut stream) = delayed();
    stream.write_all(b"held").expect("written");
    proxy.set(Mode::Blackhole);
    stream
        .set_read_timeout(Some(3 * LATENCY))
        .expect("a read timeout");
    let mut back = [0u8; 4];
    let early = stream.read(&mut back);
    assert!(
        matches!(&early, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "in a blackhole: {early:?}"
    );
    proxy.set(Mode::Pass);
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    stream
        .read_exact(&mut back)
        .expect("delivered after the blackhole");
    assert_eq!(&back, b"held");
}

#[test]
fn latency_back_to_zero_applies_to_open_connections() {
    let (proxy, mut stream) = delayed();
    proxy.set_latency(Duration::ZERO);
    let start = Instant::now();
    stream.write_all(b"fast").expect("written");
    let mut back = [0u8; 4];
    stream.read_exact(&mut back).expect("echoed");
    assert_eq!(&back, b"fast");
    // Loose: a loaded machine may be slow, but not a whole latency line.
    assert!(start.elapsed() < 2 * LATENCY, "took {:?}", start.elapsed());
}
