//! Rules that mutation testing (`cargo mutants`, issue 17; see
//! docs/testing.md §7) found unguarded: each test here fails with the
//! mutant it names applied to `cmap-core/src`, and no other test noticed
//! that mutant when it was found. Each names the rule it proves and why
//! the rule matters.

mod support;

/// The connection string's tests, in a file of their own under
/// `mutants/` (a test's crate root would look for it in `tests/`).
#[path = "mutants/connection_string.rs"]
mod connection_string;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use cmap_core::{Address, ClosedReason, ConnectionId, PoolOptions, ServiceId, WaiterId};
use support::{fail_establish, Harness};

/// A pool without background runs: only the inputs of the test move it.
fn quiet() -> cmap_core::PoolOptionsBuilder {
    PoolOptions::builder().maintenance_interval(None)
}

fn hash_of(a: &Address) -> u64 {
    let mut h = DefaultHasher::new();
    a.hash(&mut h);
    h.finish()
}

/// An address is a key of the drivers' per-server pool maps: its hash
/// depends on the host and the port, so that different servers spread over
/// a map's buckets instead of all colliding in one.
///
/// Catches: `<impl Hash for Address>::hash` hashing nothing.
#[test]
fn address_hash_tells_hosts_and_ports_apart() {
    let a = Address::new("db", 5432);
    assert_eq!(hash_of(&a), hash_of(&"db:5432".parse().unwrap()));
    assert_ne!(hash_of(&a), hash_of(&Address::new("db", 5433)));
    assert_ne!(hash_of(&a), hash_of(&Address::new("dc", 5432)));
    assert_ne!(hash_of(&a), hash_of(&Address::unix("db")));
}

/// An address prints as its host and port in `{:?}` (the drivers' debug
/// logs and the pool's own `Debug`), not as an empty struct.
///
/// Catches: `<impl fmt::Debug for Address>::fmt` writing nothing.
#[test]
fn address_debug_shows_host_and_port() {
    assert_eq!(
        format!("{:?}", Address::new("db", 5432)),
        r#"Address { host: "db", port: Some(5432) }"#
    );
    assert_eq!(
        format!("{:?}", Address::unix("/tmp/s.sock")),
        r#"Address { host: "/tmp/s.sock", port: None }"#
    );
}

/// `Address::from_str`: a bare host gets the MongoDB default port 27017,
/// and a bare IPv6 literal is such a host: in `::1` the text after the
/// last colon is part of the address, not a port.
///
/// Catches: the guard `!host.ends_with(':')` of `from_str` replaced by
/// `true` (`::1` would be host `:`, port 1).
#[test]
fn address_bare_ipv6_literal_gets_the_default_port() {
    let a: Address = "::1".parse().unwrap();
    assert_eq!((a.host(), a.port()), ("::1", Some(27017)));
    let b: Address = "fe80::1".parse().unwrap();
    assert_eq!((b.host(), b.port()), ("fe80::1", Some(27017)));
}

/// Ids print as their number and a service id as its 24 hex digits (the
/// ObjectId's usual text): error messages and logs name connections,
/// checkouts and services this way (`establishing connection 7 failed`).
///
/// Catches: the `Display` of `ConnectionId`, `WaiterId` and `ServiceId`
/// writing nothing.
#[test]
fn ids_display_as_their_number_and_service_ids_as_hex() {
    assert_eq!(ConnectionId(7).to_string(), "7");
    assert_eq!(WaiterId(42).to_string(), "42");
    let bytes = [
        0x00, 0x01, 0x0a, 0xff, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80,
    ];
    assert_eq!(ServiceId(bytes).to_string(), "00010aff1020304050607080");
}

/// `Pooled::is_errored` says whether `mark_errored` was called: a driver
/// decides by it whether the connection it hands back is closed with
/// reason `error`, and its `Debug` shows the same fields.
///
/// Catches: `Pooled::is_errored` returning `false`, and the `Debug` of
/// `Pooled` writing nothing.
#[test]
fn pooled_reports_its_error_mark_and_debugs_its_fields() {
    let mut h = Harness::ready(PoolOptions::default());
    let mut c = h.take();
    assert!(!c.is_errored());
    assert_eq!(
        format!("{c:?}"),
        "Pooled { id: ConnectionId(1), generation: 0, service_id: None, errored: false, .. }"
    );
    c.mark_errored();
    assert!(c.is_errored());
    assert!(format!("{c:?}").contains("errored: true"));
    h.check_in(c);
}

/// `waitQueueTimeoutMS` of zero "does not wait (a checkout gets an
/// available connection or fails at once)" (`PoolOptionsBuilder::
/// wait_queue_timeout`): a deadline equal to the pool's clock still takes
/// an available connection; only one already behind it gets nothing.
///
/// Catches: in `check_out`, `deadline.is_some_and(|d| d < self.now)` with
/// `<=`.
#[test]
fn a_zero_wait_queue_timeout_still_takes_an_available_connection() {
    let mut h = Harness::ready(quiet().wait_queue_timeout(Duration::ZERO).build().unwrap());
    let w = h.check_out();
    assert_eq!(h.failed.len(), 1, "nothing available: fails at once");
    assert!(h.establishing.is_empty(), "and starts no connection");
    assert_eq!(h.failed[0].0, w);
    // Make one connection available through a checkout that may wait.
    let w = h.pool.handle_check_out_until(h.now, None);
    h.drain();
    h.establish_all();
    let (served, c) = h.delivered.pop().unwrap();
    assert_eq!(served, w);
    h.check_in(c);
    assert_eq!(h.pool.status().available, 1);
    let w = h.check_out();
    assert_eq!(
        h.failed.len(),
        1,
        "a checkout with zero timeout failed though a connection was available"
    );
    assert_eq!(h.delivered.len(), 1);
    assert_eq!(h.delivered[0].0, w);
}

/// Without a maintenance interval the pool runs no background work
/// (`PoolOptionsBuilder::maintenance_interval`: "`None` never runs on a
/// timer"), so nothing populates it towards minPoolSize: a connection
/// established for a checkout does not start others for the minimum.
///
/// Catches: in `handle_established`, `self.state == PoolState::Ready &&
/// self.options.maintenance_interval.is_some()` with `||`.
#[test]
fn without_maintenance_an_established_connection_starts_none_for_min_pool_size() {
    let mut h = Harness::ready(quiet().min_pool_size(3).build().unwrap());
    assert!(h.establishing.is_empty());
    h.check_out();
    assert_eq!(h.establishing, [ConnectionId(1)]);
    h.establish_all();
    assert_eq!(h.delivered.len(), 1);
    assert!(
        h.establishing.is_empty(),
        "started {:?} for minPoolSize",
        h.establishing
    );
    assert_eq!(h.pool.status().total, 1);
}

/// `Stats::connections_failed` counts each failed establishment.
///
/// Catches: in `handle_establish_failed`, `connections_failed += 1` with
/// `*=`.
#[test]
fn connections_failed_counts_each_failed_establishment() {
    let mut h = Harness::ready(quiet().build().unwrap());
    h.check_out();
    let id = h.establishing.pop().unwrap();
    fail_establish(&mut h.pool, h.now, id).unwrap();
    h.drain();
    assert_eq!(h.pool.stats().connections_failed, 1);
    assert_eq!(h.pool.stats().connections_opened, 0);
}

/// `Stats::requests_failed` counts every checkout that failed, whatever
/// the cause: a paused pool, a timeout, a closed pool.
///
/// Catches: in `fail`, `requests_failed += 1` with `*=`.
#[test]
fn requests_failed_counts_every_failed_checkout() {
    let mut h = Harness::new(quiet().wait_queue_timeout(Duration::ZERO).build().unwrap());
    h.check_out();
    h.pool.handle_ready(h.now).unwrap();
    h.drain();
    h.check_out();
    h.pool.handle_close(h.now);
    h.drain();
    h.check_out();
    assert_eq!(h.failed.len(), 3);
    let stats = h.pool.stats();
    assert_eq!(
        (stats.requests, stats.requests_failed, stats.requests_timed_out),
        (3, 3, 1)
    );
}

/// `Stats::connections_closed` counts every connection closed, for any
/// reason: here one returned errored and one available when the pool
/// closes.
///
/// Catches: in `closed_event`, `connections_closed += 1` with `*=`.
#[test]
fn connections_closed_counts_every_close() {
    let mut h = Harness::ready(quiet().build().unwrap());
    let mut bad = h.take();
    let good = h.take();
    bad.mark_errored();
    h.check_in(bad);
    assert_eq!(h.pool.stats().connections_closed, 1);
    h.check_in(good);
    h.pool.handle_close(h.now);
    h.drain();
    assert_eq!(h.closed.len(), 2);
    assert_eq!(h.pool.stats().connections_closed, 2);
}

/// `Stats::connections_lost` counts the in-use connections an
/// interrupting clear takes (spec: `interruptInUseConnections`), and not
/// those a plain clear leaves to finish their work.
///
/// Catches: in `interrupt`, `connections_lost += 1` with `*=`.
#[test]
fn connections_lost_counts_in_use_connections_interrupted() {
    let mut h = Harness::ready(quiet().build().unwrap());
    let kept = h.take();
    h.pool.handle_clear(h.now, Default::default()).unwrap();
    h.drain();
    assert_eq!(h.pool.stats().connections_lost, 0);
    h.pool.handle_ready(h.now).unwrap();
    h.drain();
    let lost = h.take();
    let clear = cmap_core::Clear {
        interrupt_in_use: true,
        ..Default::default()
    };
    h.pool.handle_clear(h.now, clear).unwrap();
    h.drain();
    assert_eq!(h.interrupted, [kept.id(), lost.id()]);
    assert_eq!(h.pool.stats().connections_lost, 2);
    h.check_in(kept);
    h.check_in(lost);
}

/// An I/O error that a refused, reset, aborted, timed-out or cut
/// connection gives is a network error (possibly overload: labelled, and
/// it never clears the pool); any other (a name that does not resolve, a
/// certificate refused as invalid data) is not (spec: "Backpressure-
/// enabled"). The doctest of `of_io` shows two kinds; the mutation runs
/// leave doctests out, so this test covers every kind.
///
/// Catches: `EstablishErrorKind::of_io` without its network arm.
#[test]
fn io_errors_of_a_cut_connection_are_network_errors_and_others_not() {
    use cmap_core::EstablishErrorKind;
    use std::io::{Error, ErrorKind as Io};
    for kind in [
        Io::ConnectionRefused,
        Io::ConnectionReset,
        Io::ConnectionAborted,
        Io::NotConnected,
        Io::TimedOut,
        Io::UnexpectedEof,
        Io::BrokenPipe,
        Io::WouldBlock,
        Io::Interrupted,
    ] {
        assert_eq!(
            EstablishErrorKind::of_io(&Error::from(kind)),
            EstablishErrorKind::Network,
            "{kind:?}"
        );
    }
    for kind in [Io::NotFound, Io::PermissionDenied, Io::InvalidData, Io::Other] {
        assert_eq!(
            EstablishErrorKind::of_io(&Error::from(kind)),
            EstablishErrorKind::Other,
            "{kind:?}"
        );
    }
}

/// An `EstablishError` leads to the manager's error: its `source()` is
/// that error, and `downcast_ref` finds it by type (and only by its
/// type), so that a driver can walk down a failed checkout's chain or
/// recover its own error. Two are equal when they are the same failure:
/// a clone equals its original, and another failure with the same text
/// does not.
///
/// Catches: `EstablishError::downcast_ref` returning `None`, its
/// `source()` returning `None`, and its `PartialEq` answering `true` or
/// `false` whatever the errors.
#[test]
fn an_establish_error_leads_to_the_managers_error_and_equals_only_itself() {
    use cmap_core::EstablishError;
    use std::error::Error as _;
    use std::io::{Error, ErrorKind};
    let error = EstablishError::network(Error::new(ErrorKind::ConnectionRefused, "refused by db"));
    let io = error.downcast_ref::<Error>().expect("the manager's io::Error");
    assert_eq!(io.kind(), ErrorKind::ConnectionRefused);
    assert!(error.downcast_ref::<std::fmt::Error>().is_none());
    let source = error.source().expect("the manager's error as source");
    assert_eq!(source.to_string(), "refused by db");
    assert!(source.downcast_ref::<Error>().is_some());
    assert_eq!(error, error.clone());
    let twin = EstablishError::network(Error::new(ErrorKind::ConnectionRefused, "refused by db"));
    assert_ne!(error, twin);
}

/// An operation on a connection an interrupting clear took fails with a
/// retryable error (spec: "MUST fail with a retryable error"), of the
/// spec's type `PoolClearedError`, with the spec's message.
///
/// Catches: `InterruptedError::is_retryable` returning `false`, and
/// `InterruptedError::spec_name` returning `""` or `"xyzzy"`.
#[test]
fn an_interrupted_error_is_a_retryable_pool_cleared_error() {
    let e = cmap_core::InterruptedError {
        address: Address::new("db", 27017),
    };
    assert!(e.is_retryable());
    assert_eq!(e.spec_name(), "PoolClearedError");
    assert_eq!(
        e.to_string(),
        "Connection to db:27017 interrupted due to server monitor timeout"
    );
}

/// A connection refused at check-in because another pool made it comes
/// back in the error, whose `Debug` names it (without requiring the
/// connection type to be `Debug`).
///
/// Catches: the `Debug` of `CheckInError` writing nothing.
#[test]
fn a_check_in_error_debugs_the_connection_it_hands_back() {
    let mut a = Harness::ready(quiet().build().unwrap());
    let mut b = Harness::ready(quiet().build().unwrap());
    let c = a.take();
    let err = b.pool.handle_check_in(b.now, c).unwrap_err();
    assert_eq!(format!("{err:?}"), "WrongPool(ConnectionId(1))");
    a.check_in(err.into_connection());
}

/// The spec's values of `ConnectionClosedEvent.reason` and
/// `ConnectionCheckOutFailedEvent.reason` ("Connection Pool Monitoring"),
/// and the texts the spec's log messages MUST use for each reason
/// ("Connection Pool Logging"), as event and log consumers read them;
/// this crate's own reasons beside them.
///
/// Catches: `as_str` and `log_message` of `ClosedReason` and of
/// `CheckOutFailedReason` returning `""` or `"xyzzy"`.
#[test]
fn reasons_read_as_the_specs_values_and_log_texts() {
    use cmap_core::{CheckOutFailedReason as F, ClosedReason as R};
    let closed = [
        (
            R::Stale,
            "stale",
            "Connection became stale because the pool was cleared",
        ),
        (
            R::Idle,
            "idle",
            "Connection has been available but unused for longer than the configured max idle time",
        ),
        (R::Error, "error", "An error occurred while using the connection"),
        (R::PoolClosed, "poolClosed", "Connection pool was closed"),
        (R::Lifetime, "lifetime", "Connection reached its maximum lifetime"),
        (R::Detached, "detached", "Connection was detached from the pool"),
        (R::Shrunk, "shrunk", "Connection pool was resized below its size"),
    ];
    for (reason, text, log) in closed {
        assert_eq!((reason.as_str(), reason.log_message()), (text, log));
    }
    let failed = [
        (F::PoolClosed, "poolClosed", "Connection pool was closed"),
        (
            F::Timeout,
            "timeout",
            "Wait queue timeout elapsed without a connection becoming available",
        ),
        (
            F::ConnectionError,
            "connectionError",
            "An error occurred while trying to establish a new connection",
        ),
    ];
    for (reason, text, log) in failed {
        assert_eq!((reason.as_str(), reason.log_message()), (text, log));
    }
}

/// `Event::connection_id` names the connection an event is about: every
/// connection event, and a checkout that failed because establishing its
/// connection failed (spec: the log messages' `driverConnectionId`);
/// pool events and other failures name none. `Event::duration` is the
/// duration of the events that carry one (`ConnectionReady`,
/// `ConnectionCheckedOut`, `ConnectionCheckOutFailed`), and none of the
/// others.
///
/// Catches: `Event::connection_id` returning `None` or without any one of
/// its arms, and `Event::duration` returning `None` or
/// `Some(Duration::ZERO)`.
#[test]
fn events_name_their_connection_and_duration() {
    let mut h = Harness::ready(quiet().build().unwrap());
    h.clear_events();
    let c = h.take();
    h.check_in(c);
    h.pool.handle_clear(h.now, Default::default()).unwrap();
    h.pool.handle_ready(h.now).unwrap();
    h.drain();
    h.clear_events();
    h.check_out();
    let id = h.establishing[0];
    h.advance(5);
    fail_establish(&mut h.pool, h.now, id).unwrap();
    h.drain();
    let ms = |n| Some(Duration::from_millis(n));
    let one = Some(ConnectionId(1));
    let named: Vec<_> = h
        .events
        .iter()
        .map(|e| (e.name(), e.connection_id(), e.duration()))
        .collect();
    assert_eq!(
        named,
        [
            ("ConnectionCheckOutStarted", None, None),
            ("ConnectionClosed", one, None),
            ("ConnectionCreated", Some(id), None),
            ("ConnectionPoolCleared", None, None),
            ("ConnectionClosed", Some(id), None),
            ("ConnectionCheckOutFailed", Some(id), ms(5)),
        ]
    );
}

/// Lifetime jitter spreads the ends of connections made together
/// (`PoolOptionsBuilder::max_lifetime`: "shortened by a random fraction of
/// up to `jitter` so that connections made together do not all expire
/// together"): eight connections created at one instant with a jitter of
/// 1.0 retire at several different instants, all before the full
/// lifetime. The seed makes the draw, and so this test, deterministic.
///
/// Catches: `SplitMix64::next_u64` returning `0` or `1` (every draw 0.0:
/// no jitter at all).
#[test]
fn lifetime_jitter_spreads_the_ends_of_connections_made_together() {
    let options = PoolOptions::builder()
        .max_lifetime(Duration::from_secs(100), 1.0)
        .seed(7)
        .maintenance_interval(Some(Duration::from_secs(1)))
        .max_connecting(8)
        .build()
        .unwrap();
    let mut h = Harness::ready(options);
    let taken: Vec<_> = (0..8).map(|_| h.take()).collect();
    for c in taken {
        h.check_in(c);
    }
    let mut ends = Vec::new();
    for second in 1..=100 {
        h.advance(1000);
        for (id, reason) in h.closed_reasons() {
            assert_eq!(reason, ClosedReason::Lifetime);
            if !ends.iter().any(|&(i, _)| i == id) {
                ends.push((id, second));
            }
        }
    }
    assert_eq!(ends.len(), 8, "{ends:?}");
    let mut instants: Vec<_> = ends.iter().map(|&(_, s)| s).collect();
    instants.dedup();
    assert!(
        instants.len() >= 4,
        "connections made together retire together: {ends:?}"
    );
    assert!(instants.iter().all(|&s| s < 100), "{ends:?}");
}

/// The reconnect backoff has two ends: waiting checkouts may ask for a
/// connection after the short one (`max_delay_while_waiting`), minPoolSize
/// only after the full one. Once the short end has passed, the full one
/// still holds and still matters: `poll_timeout` names it (not only the
/// next background run), and at that instant the pool starts the
/// connection for minPoolSize.
///
/// Catches: `Backoff::is_active` with `&&` for its `||` (a backoff with
/// only its full end left counted as over: no wake-up at its end, and no
/// population until the next background run).
#[test]
fn the_full_backoff_end_still_wakes_the_pool_after_the_short_one() {
    let policy = cmap_core::Reconnect {
        initial_delay: Duration::from_millis(100),
        max_delay: Duration::from_millis(100),
        give_up_after: None,
        max_delay_while_waiting: Duration::from_millis(10),
    };
    let options = PoolOptions::builder()
        .min_pool_size(1)
        .maintenance_interval(Some(Duration::from_secs(10)))
        .reconnect(Some(policy))
        .seed(7)
        .build()
        .unwrap();
    let mut h = Harness::ready(options);
    h.advance(0);
    assert_eq!(h.establishing, [ConnectionId(1)]);
    let id = h.establishing.pop().unwrap();
    support::fail_establish_with(&mut h.pool, h.now, id, cmap_core::EstablishErrorKind::Network).unwrap();
    h.drain();
    assert!(h.establishing.is_empty());
    // Past the short end (at most 10 ms), before the full one (50 to 100 ms).
    h.advance(20);
    let end = h.pool.poll_timeout().expect("a wake-up");
    assert!(
        end > h.now && end <= h.t0 + Duration::from_millis(100),
        "wakes at {:?}, not at the backoff's end",
        end - h.t0
    );
    h.now = end;
    h.pool.handle_timeout(h.now);
    h.drain();
    assert_eq!(
        h.establishing,
        [ConnectionId(2)],
        "minPoolSize populated at the backoff's end"
    );
}

/// When the pool gives up reconnecting, it still reports the failure it
/// gave up on: `last_establish_error` is "the last establishment failure,
/// while the pool has had no success since", and giving up is no success
/// (a checkout that times out later names it in its message).
///
/// Catches: in `on_establish_failure`, the reset of the backoff on giving
/// up without `last_error` (the error forgotten).
#[test]
fn giving_up_reconnecting_keeps_the_last_error() {
    let policy = cmap_core::Reconnect {
        give_up_after: Some(Duration::ZERO),
        ..cmap_core::Reconnect::default()
    };
    let mut h = Harness::ready(quiet().reconnect(Some(policy)).build().unwrap());
    h.check_out();
    let id = h.establishing.pop().unwrap();
    fail_establish(&mut h.pool, h.now, id).unwrap();
    h.drain();
    assert!(h.names().contains(&"ReconnectGaveUp"), "{:?}", h.names());
    let last = h.pool.last_establish_error().expect("the failure given up on");
    assert_eq!(last.to_string(), format!("establishing connection {id} failed"));
}

/// A paused pool populates nothing, so the end of a reconnect backoff for
/// minPoolSize does not matter to it: `poll_timeout` names the instant it
/// marks itself ready again (`EstablishFailure::ClearPool` with a
/// `Reconnect`), and at that instant the pool is ready, not woken for
/// nothing before it.
///
/// Catches: in `poll_timeout`, `self.backoff.is_active() && self.state ==
/// PoolState::Ready` with `||` (a paused pool woken at the end of the
/// backoff a labelled failure left, before its auto-ready).
#[test]
fn a_paused_pool_wakes_for_its_auto_ready_not_for_the_population_backoff() {
    let mut h = Harness::ready(
        quiet()
            .min_pool_size(1)
            .reconnect(Some(cmap_core::Reconnect::default()))
            .seed(7)
            .build()
            .unwrap(),
    );
    // A labelled failure: the pool stays ready, with a backoff for
    // minPoolSize of 50 to 100 ms and one of 5 to 10 ms for waiters.
    h.check_out();
    let first = h.establishing.pop().unwrap();
    support::fail_establish_with(&mut h.pool, h.now, first, cmap_core::EstablishErrorKind::Network).unwrap();
    h.drain();
    assert_eq!(h.pool.state(), cmap_core::PoolState::Ready);
    // After the waiters' end, an unlabelled failure pauses the pool, which
    // marks itself ready 100 to 200 ms later.
    h.advance(20);
    h.check_out();
    let second = h.establishing.pop().expect("a connection for the waiter");
    fail_establish(&mut h.pool, h.now, second).unwrap();
    h.drain();
    assert_eq!(h.pool.state(), cmap_core::PoolState::Paused);
    let wake = h.pool.poll_timeout().expect("the auto-ready");
    h.now = wake;
    h.pool.handle_timeout(h.now);
    h.drain();
    assert_eq!(
        h.pool.state(),
        cmap_core::PoolState::Ready,
        "woken at {:?}, before its auto-ready",
        wake - h.t0
    );
}

/// A pool at its minPoolSize needs no wake-up at the end of a reconnect
/// backoff: nothing waits and nothing is to be populated, so
/// `poll_timeout` is `None` ("nothing is scheduled").
///
/// Catches: in `poll_timeout`, `total < min_pool_size` with `<=`.
#[test]
fn a_pool_at_its_minimum_needs_no_wake_up_for_a_backoff() {
    let mut h = Harness::ready(
        quiet()
            .min_pool_size(1)
            .reconnect(Some(cmap_core::Reconnect::default()))
            .build()
            .unwrap(),
    );
    let held = h.take();
    h.check_out();
    let id = h.establishing.pop().unwrap();
    support::fail_establish_with(&mut h.pool, h.now, id, cmap_core::EstablishErrorKind::Network).unwrap();
    h.drain();
    assert_eq!((h.pool.status().total, h.pool.status().waiting), (1, 0));
    assert_eq!(h.pool.poll_timeout(), None);
    h.check_in(held);
}

/// `time_until_timeout` is the time from `now` to `poll_timeout`, zero
/// once that has passed: a driver sleeps that long.
///
/// Catches: `time_until_timeout` returning `None`.
#[test]
fn time_until_timeout_counts_down_to_poll_timeout() {
    let mut h = Harness::ready(quiet().max_pool_size(1).build().unwrap());
    let held = h.take();
    assert_eq!(h.pool.time_until_timeout(h.now), None);
    h.pool
        .handle_check_out_until(h.now, Some(h.now + Duration::from_millis(100)));
    h.drain();
    assert_eq!(h.pool.time_until_timeout(h.now), Some(Duration::from_millis(100)));
    let later = h.now + Duration::from_millis(30);
    assert_eq!(h.pool.time_until_timeout(later), Some(Duration::from_millis(70)));
    let past = h.now + Duration::from_millis(300);
    assert_eq!(h.pool.time_until_timeout(past), Some(Duration::ZERO));
    h.check_in(held);
}

/// Every getter of `PoolOptions` reads back what the builder set (a
/// driver reads its pool's options through them: cmap-async decides by
/// `load_balanced` whether a clear names a service), each to a value
/// other than its default.
///
/// Catches: the getters of `PoolOptions` returning a constant or a
/// default instead of the option.
#[test]
fn every_option_getter_reads_back_what_the_builder_set() {
    use cmap_core::{EstablishFailure, Reconnect};
    let reconnect = Reconnect {
        initial_delay: Duration::from_millis(7),
        ..Reconnect::default()
    };
    let o = PoolOptions::builder()
        .max_pool_size(9)
        .min_pool_size(3)
        .max_idle_time(Duration::from_millis(11))
        .max_connecting(4)
        .wait_queue_timeout(Duration::from_millis(13))
        .load_balanced(true)
        .maintenance_interval(Some(Duration::from_millis(17)))
        .max_lifetime(Duration::from_millis(19), 0.5)
        .establish_failure(EstablishFailure::KeepReady)
        .keep_waiting_on_overload(true)
        .reconnect(Some(reconnect))
        .seed(23)
        .build()
        .unwrap();
    assert_eq!(o.max_pool_size(), 9);
    assert_eq!(o.min_pool_size(), 3);
    assert_eq!(o.max_idle_time(), Some(Duration::from_millis(11)));
    assert_eq!(o.max_connecting(), 4);
    assert_eq!(o.wait_queue_timeout(), Some(Duration::from_millis(13)));
    assert!(o.load_balanced());
    assert_eq!(o.maintenance_interval(), Some(Duration::from_millis(17)));
    assert_eq!(o.max_lifetime(), Some(Duration::from_millis(19)));
    assert_eq!(o.establish_failure(), EstablishFailure::KeepReady);
    assert!(o.keep_waiting_on_overload());
    assert_eq!(o.reconnect(), Some(reconnect));
    assert_eq!(o.seed(), Some(23));
    assert_eq!(o.clone().with_seed(29).seed(), Some(29));
    assert_eq!(
        o.explicit_options(),
        [
            ("maxPoolSize", 9),
            ("minPoolSize", 3),
            ("maxIdleTimeMS", 11),
            ("maxConnecting", 4),
            ("waitQueueTimeoutMS", 13)
        ]
    );
    let d = PoolOptions::default();
    assert!(!d.load_balanced() && !d.keep_waiting_on_overload());
    assert_eq!((d.max_lifetime(), d.reconnect(), d.seed()), (None, None, None));
}

/// A reconnect backoff with equal first and largest delays is valid: the
/// rule is `0 < initial_delay <= max_delay` (a constant delay), and only a
/// largest delay below the first is refused.
///
/// Catches: in `PoolOptionsBuilder::build`, `max_delay < initial_delay`
/// with `<=`.
#[test]
fn a_reconnect_with_equal_delays_is_valid() {
    let constant = cmap_core::Reconnect {
        initial_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(50),
        ..cmap_core::Reconnect::default()
    };
    assert!(PoolOptions::builder().reconnect(Some(constant)).build().is_ok());
    let shrinking = cmap_core::Reconnect {
        max_delay: Duration::from_millis(49),
        ..constant
    };
    assert!(PoolOptions::builder().reconnect(Some(shrinking)).build().is_err());
}
