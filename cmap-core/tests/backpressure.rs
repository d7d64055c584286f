//! Rule tests for establishment failures under the current spec
//! ("Backpressure-enabled", "Establishing a Connection"): labelled errors
//! never clear the pool; the checkout that asked fails with its labelled
//! error, or keeps waiting when told to; the pool retries with backoff;
//! an establishment nobody needs any more is abandoned; population goes on
//! as soon as a slot frees.

mod support;

use std::time::Duration;

use cmap_core::{
    CheckOutError, ClosedReason, EstablishError, EstablishErrorKind, Event, PoolOptions, PoolOptionsBuilder,
    PoolState, Reconnect,
};
use support::Harness;

fn opts() -> PoolOptionsBuilder {
    PoolOptions::builder().maintenance_interval(None)
}

fn refused() -> EstablishError {
    EstablishError::network(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
}

fn denied() -> EstablishError {
    EstablishError::authentication(std::io::Error::other("authentication failed"))
}

fn backoff() -> Reconnect {
    Reconnect {
        initial_delay: Duration::from_millis(100),
        max_delay: Duration::from_secs(10),
        give_up_after: None,
        max_delay_while_waiting: Duration::from_millis(10),
    }
}

#[test]
fn labels_follow_the_kind() {
    assert_eq!(refused().labels(), ["SystemOverloadedError", "RetryableError"]);
    assert!(refused().has_label("RetryableError") && refused().is_overload());
    assert!(denied().labels().is_empty() && !denied().is_retryable());
    let other = EstablishError::other(std::io::Error::other("no such host"));
    assert_eq!(other.kind(), EstablishErrorKind::Other);
    assert!(other.labels().is_empty());
    assert_eq!(denied().to_string(), "authentication failed", "no labels shown");
}

#[test]
fn a_labelled_failure_fails_its_checkout_with_the_labels_and_does_not_clear() {
    let mut h = Harness::ready(opts().build().unwrap());
    let w = h.check_out();
    let other = h.check_out();
    h.clear_events();
    let id = h.establishing[0];
    h.pool.handle_establish_failed(h.now, id, refused()).unwrap();
    h.drain();
    // No PoolCleared: SDAM ignores an error labelled SystemOverloadedError.
    assert_eq!(h.names()[..2], ["ConnectionClosed", "ConnectionCheckOutFailed"]);
    assert_eq!(h.pool.state(), PoolState::Ready);
    match &h.events[0] {
        Event::ConnectionClosed { reason, error, .. } => {
            assert_eq!(*reason, ClosedReason::Error);
            assert!(error.as_ref().unwrap().has_label("SystemOverloadedError"));
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(h.failed.len(), 1, "only the checkout it was made for fails");
    let (failed, error) = &h.failed[0];
    assert_eq!(*failed, w);
    assert!(matches!(error, CheckOutError::ConnectionError { .. }));
    assert_eq!(error.labels(), ["SystemOverloadedError", "RetryableError"]);
    assert!(error.is_retryable());
    match &h.events[1] {
        Event::ConnectionCheckOutFailed { error, .. } => assert!(error.has_label("RetryableError")),
        e => panic!("{e:?}"),
    }
    // The other checkout still waits, on a connection of its own.
    assert_eq!(h.pool.status().waiting, 1);
    assert!(h.failed.iter().all(|(x, _)| *x != other));
}

#[test]
fn an_unlabelled_failure_still_clears() {
    let mut h = Harness::ready(opts().build().unwrap());
    h.check_out();
    h.clear_events();
    let id = h.establishing[0];
    h.pool.handle_establish_failed(h.now, id, denied()).unwrap();
    h.drain();
    assert_eq!(h.names()[0], "ConnectionPoolCleared");
    assert_eq!(h.pool.state(), PoolState::Paused);
    // The cause, with its source, is what a cleared checkout reports.
    let w = h.check_out();
    h.drain();
    let (_, error) = h.failed.iter().find(|(x, _)| *x == w).unwrap();
    assert!(error.to_string().ends_with("failed with: authentication failed"));
    let cause = std::error::Error::source(error).expect("the cause is the source");
    assert!(
        std::error::Error::source(cause).is_some(),
        "down to the establishment error"
    );
}

#[test]
fn keep_waiting_on_overload_retries_within_the_checkouts_deadline() {
    let mut h = Harness::ready(
        opts()
            .keep_waiting_on_overload(true)
            .reconnect(Some(backoff()))
            .wait_queue_timeout(Duration::from_secs(1))
            .build()
            .unwrap(),
    );
    let w = h.check_out();
    let first = h.establishing.remove(0);
    h.pool.handle_establish_failed(h.now, first, refused()).unwrap();
    h.drain();
    assert!(h.failed.is_empty(), "the checkout keeps waiting");
    assert_eq!(h.pool.status().waiting, 1);
    assert!(h.establishing.is_empty(), "held back by the backoff");
    // While a checkout waits the first pause is 15 ms capped at 10 ms here
    // (5..=10 with jitter), not the 100 ms of the full backoff.
    let wake = h.pool.poll_timeout().unwrap();
    let delay = wake - h.now;
    assert!(
        delay >= Duration::from_millis(5) && delay <= Duration::from_millis(10),
        "{delay:?}"
    );
    h.now = wake;
    h.pool.handle_timeout(h.now);
    h.drain();
    assert_eq!(h.establishing.len(), 1, "the next attempt, for the waiter");
    let second = h.establishing.remove(0);
    h.pool
        .handle_established(h.now, second, support::Conn(2), None)
        .unwrap();
    h.drain();
    assert_eq!(h.delivered.len(), 1);
    assert_eq!(h.delivered[0].0, w);
    assert_eq!(h.pool.stats().requests_failed, 0);
}

/// A pool whose checkouts keep waiting through refusals, with five of
/// them queued on two connects (maxConnecting 2).
fn five_waiting(adaptive: bool, cap_ms: u64) -> Harness {
    let mut b = opts()
        .keep_waiting_on_overload(true)
        .reconnect(Some(Reconnect {
            max_delay_while_waiting: Duration::from_millis(cap_ms),
            ..backoff()
        }))
        .max_pool_size(10)
        .seed(11);
    if adaptive {
        b = b.adaptive_connecting(cmap_core::AdaptiveConnecting { min: 2, max: 10 });
    }
    let mut h = Harness::ready(b.build().unwrap());
    for _ in 0..5 {
        h.check_out();
    }
    h.drain();
    assert_eq!(h.establishing.len(), 2, "maxConnecting");
    h
}

/// Refuses every pending connect; the pause until the next start.
fn refuse_all(h: &mut Harness) -> Duration {
    for id in std::mem::take(&mut h.establishing) {
        h.pool.handle_establish_failed(h.now, id, refused()).unwrap();
    }
    h.drain();
    assert!(h.establishing.is_empty(), "held back by the pause");
    let wake = h.pool.poll_timeout().expect("the pause's end");
    let pause = wake - h.now;
    h.now = wake;
    h.pool.handle_timeout(h.now);
    h.drain();
    pause
}

/// Spec: the pace of retries is the pool's ("Backpressure-enabled" asks
/// for backoff). After a network error, one probe at a time instead of
/// maxConnecting, fixed pace or adaptive; the first success brings back
/// the full pace (maxConnecting, or the adaptive pace's minimum).
#[test]
fn a_refusing_server_gets_one_probe_at_a_time_until_a_success() {
    for adaptive in [false, true] {
        let mut h = five_waiting(adaptive, 60);
        for round in 0..6 {
            refuse_all(&mut h);
            assert_eq!(
                h.establishing.len(),
                1,
                "one probe (round {round}, adaptive {adaptive})"
            );
            assert_eq!(h.pool.stats().connecting_limit, 1);
        }
        let probe = h.establishing.remove(0);
        h.pool
            .handle_established(h.now, probe, support::Conn(99), None)
            .unwrap();
        h.drain();
        assert_eq!(h.delivered.len(), 1);
        assert_eq!(h.pool.stats().connecting_limit, 2, "adaptive {adaptive}");
        assert_eq!(
            h.establishing.len(),
            2,
            "the full pace at once (adaptive {adaptive})"
        );
        assert!(h.pool.last_establish_error().is_none());
    }
}

/// The probe is for network errors only: with `EstablishFailure::KeepReady`
/// an unlabelled failure (authentication) keeps maxConnecting, and a
/// network error after it still brings the probe.
#[test]
fn only_a_network_error_brings_the_probe() {
    let mut h = Harness::ready(
        opts()
            .establish_failure(cmap_core::EstablishFailure::KeepReady)
            .reconnect(Some(backoff()))
            .max_pool_size(10)
            .build()
            .unwrap(),
    );
    for _ in 0..6 {
        h.check_out();
    }
    h.drain();
    let first = h.establishing.remove(0);
    h.pool.handle_establish_failed(h.now, first, denied()).unwrap();
    h.drain();
    h.advance(10);
    assert_eq!(
        h.establishing.len(),
        2,
        "maxConnecting after an authentication failure"
    );
    assert_eq!(h.pool.stats().connecting_limit, 2);
    for id in std::mem::take(&mut h.establishing) {
        h.pool.handle_establish_failed(h.now, id, refused()).unwrap();
    }
    h.drain();
    h.advance(10);
    assert_eq!(h.establishing.len(), 1, "one probe after a refusal");
}

/// The pause while checkouts wait doubles from 15 ms up to
/// `max_delay_while_waiting`, each between half and all of its bound: a
/// refusing server gets a few connects a second, not hundreds. It doubles
/// per failure: the two connects of maxConnecting refused together double
/// it twice. A success starts it over from 15 ms.
#[test]
fn the_pause_while_waiting_doubles_from_15_ms_to_its_cap_and_a_success_resets_it() {
    for cap in [60, 25] {
        let mut h = five_waiting(false, cap);
        let ms = Duration::from_millis;
        let mut total = Duration::ZERO;
        for k in 0..40u32 {
            let pause = refuse_all(&mut h);
            // The first round refuses two connects, each later one the probe.
            let bound = ms(15 << (k + 1).min(20)).min(ms(cap));
            assert!(
                pause >= bound / 2 && pause <= bound,
                "pause {k}: {pause:?}, bound {bound:?} (cap {cap} ms)"
            );
            total += pause;
        }
        // 40 attempts over at least 35 pauses at the cap, half of it or more.
        assert!(total >= ms(cap) * 35 / 2, "{total:?}");
        let probe = h.establishing.remove(0);
        h.pool
            .handle_established(h.now, probe, support::Conn(99), None)
            .unwrap();
        h.drain();
        let pause = refuse_all(&mut h);
        assert!(
            pause >= ms(15) && pause <= ms(30),
            "after a success, two refused: {pause:?}"
        );
    }
}

/// Over an outage, the default pause keeps a pool's attempts to a few a
/// second, while a server that comes back is probed within the cap: the
/// rate the docs state (1 ÷ (0.75 × 60 ms), about 22 a second) on virtual
/// time.
#[test]
fn an_outage_of_8_s_gets_about_22_connects_a_second() {
    let mut h = Harness::ready(
        opts()
            .keep_waiting_on_overload(true)
            .reconnect(Some(Reconnect::default()))
            .max_pool_size(10)
            .seed(3)
            .build()
            .unwrap(),
    );
    for _ in 0..50 {
        h.check_out();
    }
    h.drain();
    let start = h.now;
    let mut attempts = 0u32;
    let mut longest = Duration::ZERO;
    while h.now - start < Duration::from_secs(8) {
        attempts += h.establishing.len() as u32;
        longest = longest.max(refuse_all(&mut h));
    }
    assert!((150..=200).contains(&attempts), "{attempts} attempts in 8 s");
    assert!(longest <= Duration::from_millis(60), "{longest:?}");
}

#[test]
fn a_timeout_while_failing_names_the_last_failure_and_the_pools_state() {
    let mut h = Harness::ready(
        opts()
            .keep_waiting_on_overload(true)
            .reconnect(Some(backoff()))
            .max_pool_size(10)
            .wait_queue_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    h.check_out();
    let id = h.establishing.remove(0);
    h.pool.handle_establish_failed(h.now, id, refused()).unwrap();
    h.drain();
    h.advance(50);
    let (_, error) = h.failed.last().expect("timed out");
    assert!(matches!(error, CheckOutError::WaitQueueTimeout { .. }));
    let text = error.to_string();
    assert!(
        text.starts_with(
            "Timed out while checking out a Connection from connection pool after 50 ms (maxPoolSize 10,"
        ),
        "{text}"
    );
    assert!(text.contains("waiting 1)"), "{text}");
    assert!(
        text.contains("the last connection attempt failed: connection refused"),
        "{text}"
    );
    // Once a connection is made again, the failure is history.
    h.check_out();
    h.advance(20);
    let id = *h.establishing.last().unwrap();
    h.pool
        .handle_established(h.now, id, support::Conn(9), None)
        .unwrap();
    h.drain();
    assert!(h.pool.last_establish_error().is_none());
}

#[test]
fn an_establishment_is_abandoned_when_its_checkout_times_out_and_nobody_needs_it() {
    let mut h = Harness::ready(
        opts()
            .wait_queue_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    h.check_out();
    let id = h.establishing[0];
    h.clear_events();
    h.advance(50);
    assert_eq!(h.aborted, [id], "its connect is stopped");
    assert_eq!(h.names(), ["ConnectionCheckOutFailed", "ConnectionClosed"]);
    match &h.events[1] {
        Event::ConnectionClosed { reason, error, .. } => {
            assert_eq!(*reason, ClosedReason::Error);
            assert!(error.is_none());
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(h.pool.state(), PoolState::Ready, "not cleared");
    assert_eq!(h.pool.status().total, 0);
    assert_eq!(h.pool.stats().connections_abandoned, 1);
    // A late result for it is disposed of, not pooled.
    h.pool
        .handle_established(h.now, id, support::Conn(1), None)
        .unwrap();
    h.drain();
    assert_eq!(h.pool.status().available, 0);
}

#[test]
fn an_establishment_another_waiter_needs_goes_on() {
    let mut h = Harness::ready(opts().max_connecting(1).build().unwrap());
    let soon = h.now + Duration::from_millis(50);
    h.pool.handle_check_out_until(h.now, Some(soon));
    h.check_out(); // no deadline, and no connection of its own (maxConnecting 1)
    h.drain();
    assert_eq!(h.establishing.len(), 1);
    h.advance(50);
    assert_eq!(h.failed.len(), 1);
    assert!(h.aborted.is_empty(), "the second checkout needs it");
    assert_eq!(h.pool.status().pending, 1);
}

#[test]
fn an_establishment_min_pool_size_needs_goes_on() {
    let mut h = Harness::ready(
        opts()
            .min_pool_size(1)
            .max_connecting(1)
            .wait_queue_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    h.check_out();
    assert_eq!(h.establishing.len(), 1);
    h.advance(50);
    assert!(h.aborted.is_empty(), "minPoolSize needs it");
}

#[test]
fn population_goes_on_as_soon_as_a_slot_frees() {
    let mut h = Harness::ready(
        PoolOptions::builder()
            .min_pool_size(5)
            .max_connecting(2)
            .maintenance_interval(Some(Duration::from_secs(1)))
            .build()
            .unwrap(),
    );
    h.advance(0);
    assert_eq!(h.establishing.len(), 2, "maxConnecting at once");
    for n in 0..3 {
        let id = h.establishing.remove(0);
        h.pool
            .handle_established(h.now, id, support::Conn(n), None)
            .unwrap();
        h.drain();
    }
    // Not at the next run, a second later: each success starts the next.
    assert_eq!(h.pool.status().total, 5);
    assert_eq!(h.pool.status().pending, 2);
}

#[test]
fn population_after_a_failure_waits_for_the_backoff() {
    let mut h = Harness::ready(
        PoolOptions::builder()
            .min_pool_size(1)
            .reconnect(Some(backoff()))
            .establish_failure(cmap_core::EstablishFailure::KeepReady)
            .maintenance_interval(Some(Duration::from_secs(1)))
            .build()
            .unwrap(),
    );
    h.advance(0);
    let id = h.establishing.remove(0);
    h.pool.handle_establish_failed(h.now, id, refused()).unwrap();
    h.drain();
    assert!(h.establishing.is_empty(), "no retry in the same instant");
    // Nobody waits: the full backoff (50..=100 ms), then a retry.
    let wake = h.pool.poll_timeout().unwrap();
    let delay = wake - h.now;
    assert!(
        delay >= Duration::from_millis(50) && delay <= Duration::from_millis(100),
        "{delay:?}"
    );
    h.now = wake;
    h.pool.handle_timeout(h.now);
    h.drain();
    assert_eq!(h.establishing.len(), 1);
}

#[test]
fn a_zero_wait_queue_timeout_does_not_wait_and_none_has_no_limit() {
    let mut h = Harness::ready(
        opts()
            .max_pool_size(1)
            .wait_queue_timeout(Duration::ZERO)
            .build()
            .unwrap(),
    );
    h.check_out();
    assert_eq!(h.failed.len(), 1, "no connection available: failed at once");
    assert!(matches!(h.failed[0].1, CheckOutError::WaitQueueTimeout { .. }));
    let o = opts().wait_queue_timeout(None).build().unwrap();
    assert_eq!(o.wait_queue_timeout(), None);
    // The connection string keeps the spec's meaning: 0 is no limit.
    let o = PoolOptions::from_connection_string("mongodb://h/?waitQueueTimeoutMS=0", true).unwrap();
    assert_eq!(o.wait_queue_timeout(), None);
}

#[test]
fn a_seed_is_unset_unless_given() {
    assert_eq!(PoolOptions::default().seed(), None);
    assert_eq!(PoolOptions::default().with_seed(7).seed(), Some(7));
    assert_eq!(opts().seed(3).build().unwrap().seed(), Some(3));
}
