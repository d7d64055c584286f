//! This crate's extensions beyond the spec: the connection lifetime, the
//! reconnect backoff, detach, cancel, time and misuse, stats, the adaptive
//! establishment pace.
//! Every rule here names what it proves; none is a MUST of the spec.

use std::time::Duration;

use crate::support::{self, fail_establish, fail_establish_with, Conn, Harness};
use crate::{io_error, one_connection_waiting_at_most, opts, quiet};
use cmap_core::{
    AdaptiveConnecting, Clear, ClosedReason, ConnectionId, EstablishErrorKind, EstablishFailure, Event,
    PoolOptions, PoolState, Reconnect, UsageError,
};

#[test]
fn max_lifetime_retires_connections_with_seeded_jitter() {
    let build = |seed| {
        opts()
            .max_lifetime(Duration::from_secs(10), 0.5)
            .seed(seed)
            .maintenance_interval(None)
            .build()
            .unwrap()
    };
    let expiry_of = |seed| {
        let mut h = Harness::ready(build(seed));
        let c = h.take();
        h.check_in(c);
        let mut ms = 0;
        loop {
            ms += 100;
            h.now += Duration::from_millis(100);
            let c = h.take();
            let retired = c.id().0 != 1;
            h.check_in(c);
            if retired {
                assert!(h.closed_reasons().contains(&(1, ClosedReason::Lifetime)));
                return ms;
            }
        }
    };
    let (a, b) = (expiry_of(1), expiry_of(1));
    assert_eq!(a, b, "same seed, same lifetime");
    assert!((5_000..=10_000).contains(&a), "{a}");
}

#[test]
fn reconnect_backoff_re_readies_and_gives_up_loudly() {
    let policy = Reconnect {
        initial_delay: Duration::from_millis(100),
        max_delay: Duration::from_millis(400),
        give_up_after: Some(Duration::from_secs(2)),
        ..Reconnect::default()
    };
    let mut h = Harness::ready(opts().reconnect(Some(policy)).build().unwrap());
    h.pool.set_events_enabled(false); // giving up is reported even so
    let mut readies = 0;
    for _ in 0..40 {
        h.check_out();
        if let Some(id) = h.establishing.pop() {
            h.pool
                .handle_establish_failed(h.now, id, io_error("down"))
                .unwrap();
            h.drain();
        }
        if h.events
            .iter()
            .any(|e| matches!(e, Event::ReconnectGaveUp { .. }))
        {
            break;
        }
        let wake = h.pool.poll_timeout().expect("a re-ready is scheduled");
        h.now = wake.max(h.now);
        h.pool.handle_timeout(h.now);
        h.drain();
        if h.pool.state() == PoolState::Ready {
            readies += 1;
        }
    }
    assert!(readies >= 3, "re-readied {readies} times");
    assert!(h
        .events
        .iter()
        .any(|e| matches!(e, Event::ReconnectGaveUp { .. })));
    assert_eq!(h.pool.state(), PoolState::Paused);
}

/// A pool paused by its own failure reaction (a non-network failure
/// clears it) marks itself ready at the end of the backoff, even when a
/// connection started before the failure succeeds meanwhile: the success
/// ends the backoff, not the scheduled return to ready, or the pool would
/// stay paused with nothing to wake it.
#[test]
fn a_success_after_a_clearing_failure_keeps_the_pools_return_to_ready() {
    let policy = Reconnect {
        initial_delay: Duration::from_millis(100),
        max_delay: Duration::from_secs(10),
        ..Reconnect::default()
    };
    let options = opts()
        .maintenance_interval(None)
        .reconnect(Some(policy))
        .max_connecting(2)
        .build()
        .unwrap();
    let mut h = Harness::ready(options);
    h.check_out();
    h.check_out();
    h.drain();
    let (failed, succeeded) = (h.establishing[0], h.establishing[1]);
    let refused = cmap_core::EstablishError::other(std::io::Error::other("terminating connection"));
    h.pool.handle_establish_failed(h.now, failed, refused).unwrap();
    h.drain();
    assert_eq!(h.pool.state(), PoolState::Paused, "cleared by the failure");
    h.pool
        .handle_established(h.now, succeeded, Conn(2), None)
        .unwrap();
    h.drain();
    let wake = h
        .pool
        .poll_timeout()
        .expect("the return to ready is still scheduled");
    assert!(wake - h.now <= Duration::from_millis(100), "{:?}", wake - h.now);
    h.now = wake;
    h.pool.handle_timeout(h.now);
    h.drain();
    assert_eq!(h.pool.state(), PoolState::Ready, "the pool readied itself");
}

#[test]
fn detach_takes_the_connection_out_of_the_pool() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    let c = h.take();
    let w = h.check_out();
    h.clear_events();
    let raw = h.pool.handle_detach(h.now, c).unwrap();
    h.drain();
    assert_eq!(raw, Conn(1));
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Detached)]);
    // The freed capacity serves the waiter with a new connection.
    h.establish_all();
    assert_eq!(h.delivered[0].0, w);
}

#[test]
fn cancel_withdraws_a_queued_checkout_and_refuses_unknown_ones() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    let held = h.take();
    let a = h.check_out();
    let b = h.check_out();
    h.pool.handle_cancel(h.now, a).unwrap();
    assert_eq!(h.pool.handle_cancel(h.now, a), Err(UsageError::UnknownWaiter(a)));
    h.check_in(held);
    assert_eq!(h.delivered[0].0, b);
    assert_eq!(h.pool.stats().requests_cancelled, 1);
}

#[test]
fn time_never_runs_backwards() {
    let mut h = one_connection_waiting_at_most(Duration::from_millis(50));
    let _held = h.take();
    h.check_out();
    h.pool.handle_timeout(h.now + Duration::from_millis(60));
    h.drain();
    assert_eq!(h.failed.len(), 1);
    // An older `now` afterwards changes nothing and breaks nothing.
    h.pool.handle_timeout(h.now);
    h.drain();
    h.pool.check_invariants().unwrap();
}

#[test]
fn unknown_connection_ids_are_misuse() {
    let mut h = Harness::ready(PoolOptions::default());
    let err = h
        .pool
        .handle_established(h.now, cmap_core::ConnectionId(9), Conn(9), None)
        .unwrap_err();
    assert_eq!(err, UsageError::UnknownConnection(cmap_core::ConnectionId(9)));
    let err = h
        .pool
        .handle_establish_failed(h.now, cmap_core::ConnectionId(0), io_error("x"))
        .unwrap_err();
    assert_eq!(err, UsageError::UnknownConnection(cmap_core::ConnectionId(0)));
}

#[test]
fn stats_count_requests_waits_and_connections() {
    let mut h = one_connection_waiting_at_most(Duration::from_millis(10));
    let c = h.take();
    h.check_out();
    h.advance(10);
    h.now += Duration::from_millis(5);
    h.check_in(c);
    let s = h.pool.stats();
    assert_eq!(
        (
            s.requests,
            s.requests_queued,
            s.requests_timed_out,
            s.connections_opened
        ),
        (2, 2, 1, 1)
    );
    assert_eq!(s.usage_time, Duration::from_millis(15));
}

/// A pool whose establishments are paced adaptively between 2 and 16,
/// with `waiting` checkouts queued and the first 2 connects started.
fn adaptive_with_waiters(waiting: usize) -> Harness {
    let options = opts()
        .max_pool_size(50)
        .adaptive_connecting(AdaptiveConnecting { min: 2, max: 16 })
        .establish_failure(EstablishFailure::KeepReady)
        .maintenance_interval(None)
        .build()
        .unwrap();
    let mut h = Harness::ready(options);
    for _ in 0..waiting {
        h.check_out();
    }
    assert_eq!(h.pool.status().pending, 2, "the pace starts at its minimum");
    assert_eq!(h.pool.stats().connecting_limit, 2);
    h
}

/// Completes every pending establishment `ms` after now, in order.
fn establish_after(h: &mut Harness, ms: u64) {
    h.now += Duration::from_millis(ms);
    h.establish_all();
}

#[test]
fn adaptive_pace_doubles_while_connects_succeed_at_their_usual_latency() {
    let mut h = adaptive_with_waiters(40);
    // Two successes at 100 ms: 2 -> 4 -> 8, and the freed slots refilled.
    establish_after(&mut h, 100);
    assert_eq!(h.pool.stats().connecting_limit, 8);
    assert_eq!(h.pool.status().pending, 8);
    establish_after(&mut h, 100);
    assert_eq!(h.pool.stats().connecting_limit, 16, "capped by max");
    assert_eq!(h.pool.status().pending, 16);
    assert_eq!(h.pool.stats().connecting_cuts, 0);
}

#[test]
fn adaptive_pace_falls_to_one_probe_on_a_labelled_failure_and_keeps_connects_in_flight() {
    let mut h = adaptive_with_waiters(40);
    establish_after(&mut h, 100);
    assert_eq!(h.pool.status().pending, 8);
    // An unlabelled failure (an authentication error) says nothing about
    // load: the pace stays.
    let id = h.establishing.remove(0);
    fail_establish(&mut h.pool, h.now, id).unwrap();
    h.drain();
    assert_eq!(h.pool.stats().connecting_limit, 8);
    assert_eq!(h.pool.stats().connecting_cuts, 0);
    // The server refuses one: down to a single probe at once. The 7 in
    // flight go on (none aborted), and nothing new starts until none is.
    let id = h.establishing.remove(0);
    fail_establish_with(&mut h.pool, h.now, id, EstablishErrorKind::Network).unwrap();
    h.drain();
    assert_eq!(h.pool.stats().connecting_limit, 1);
    assert_eq!(h.pool.stats().connecting_cuts, 1);
    assert!(h.aborted.is_empty());
    assert_eq!(h.pool.status().pending, 7);
    h.check_out();
    assert_eq!(h.pool.status().pending, 7, "no connect starts above the pace");
    // Regrowth, over the 7 successes: the minimum (2), doubling up to half
    // the pace the fall found (4), then one more per round of 4
    // successes (5).
    establish_after(&mut h, 100);
    assert_eq!(h.pool.stats().connecting_limit, 5);
    assert_eq!(h.pool.status().pending, 5);
}

#[test]
fn adaptive_pace_probes_one_connect_at_a_time_while_the_server_refuses() {
    let mut h = adaptive_with_waiters(40);
    // Both first connects refused: one connect in flight from then on,
    // however many checkouts wait (the pool retries after its backoff).
    for _ in 0..2 {
        let id = h.establishing.remove(0);
        fail_establish_with(&mut h.pool, h.now, id, EstablishErrorKind::Network).unwrap();
    }
    h.drain();
    assert_eq!(h.pool.stats().connecting_limit, 1);
    for _ in 0..3 {
        h.now += Duration::from_secs(1);
        h.pool.handle_timeout(h.now);
        h.drain();
        assert_eq!(h.pool.status().pending, 1, "a single probe");
        let id = h.establishing.remove(0);
        fail_establish_with(&mut h.pool, h.now, id, EstablishErrorKind::Network).unwrap();
        h.drain();
    }
    // The probe gets through: the minimum again, and growth from there.
    h.now += Duration::from_secs(1);
    h.pool.handle_timeout(h.now);
    h.drain();
    establish_after(&mut h, 100);
    assert_eq!(h.pool.stats().connecting_limit, 2);
    assert_eq!(h.pool.status().pending, 2);
    assert_eq!(h.pool.stats().connecting_cuts, 5);
}

#[test]
fn adaptive_pace_falls_to_its_minimum_when_connects_slow_down() {
    let mut h = adaptive_with_waiters(40);
    establish_after(&mut h, 100);
    assert_eq!(h.pool.stats().connecting_limit, 8);
    // 210 ms is twice the floor plus 10 ms: still usual.
    establish_after(&mut h, 110);
    assert_eq!(h.pool.stats().connecting_limit, 16);
    // 300 ms after they started, the connects took more than twice the
    // fastest: the server queues them.
    let slow = h.establishing.remove(0);
    h.now += Duration::from_millis(300);
    h.pool
        .handle_established(h.now, slow, Conn(slow.0), None)
        .unwrap();
    h.drain();
    assert_eq!(h.pool.stats().connecting_limit, 2);
    assert_eq!(h.pool.stats().connecting_cuts, 1);
}

#[test]
fn fixed_max_connecting_stays_the_default_and_never_moves() {
    let mut h = Harness::ready(
        opts()
            .max_pool_size(50)
            .establish_failure(EstablishFailure::KeepReady)
            .maintenance_interval(None)
            .build()
            .unwrap(),
    );
    assert_eq!(h.pool.options().adaptive_connecting(), None);
    for _ in 0..20 {
        h.check_out();
    }
    for _ in 0..3 {
        establish_after(&mut h, 100);
        assert_eq!(h.pool.status().pending, 2);
    }
    let id = h.establishing.remove(0);
    fail_establish_with(&mut h.pool, h.now, id, EstablishErrorKind::Network).unwrap();
    h.drain();
    let stats = h.pool.stats();
    // A network error leaves one probe, whichever the pace (backpressure.rs);
    // the fixed pace itself did not move: no cut, and maxConnecting again
    // with the next success.
    assert_eq!((stats.connecting_limit, stats.connecting_cuts), (1, 0));
    establish_after(&mut h, 100);
    assert_eq!(h.pool.stats().connecting_limit, 2);
}

#[test]
fn adaptive_pace_falls_to_its_minimum_on_a_clear() {
    let mut h = adaptive_with_waiters(40);
    establish_after(&mut h, 100);
    assert_eq!(h.pool.stats().connecting_limit, 8);
    // The monitor lost the server: what the pace learnt is about a server
    // that failed, and the pool readied after it starts from 2.
    h.pool.handle_clear(h.now, Clear::default()).unwrap();
    h.drain();
    assert_eq!(h.pool.stats().connecting_limit, 2);
    assert_eq!(h.pool.stats().connecting_cuts, 1);
    h.pool.handle_ready(h.now).unwrap();
    h.drain();
    for _ in 0..10 {
        h.check_out();
    }
    // The 8 connects of the old generation still in flight count: none
    // starts.
    assert_eq!(h.pool.status().pending, 8);
    // No doubling after a clear: one more per round of successes (2 -> 3
    // after 2, 3 -> 4 after 3 more).
    establish_after(&mut h, 100);
    assert_eq!(h.pool.stats().connecting_limit, 4);
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
    // minPoolSize of 50 to 100 ms and one of 7.5 to 15 ms for waiters.
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
