//! Load-balanced mode: the rules of docs/spec-compliance.md's "Load-balanced mode" section.
//!
//! Spec: "Connection Pool Behaviors" › "Load Balancer Mode".

use crate::opts;
use crate::support::{Conn, Harness};
use cmap_core::{Clear, ClosedReason, Event, PoolState, ServiceId, UsageError};

fn lb_harness() -> Harness {
    Harness::ready(
        opts()
            .load_balanced(true)
            .maintenance_interval(None)
            .build()
            .unwrap(),
    )
}

fn take_for_service(h: &mut Harness, service: ServiceId) -> cmap_core::Pooled<Conn> {
    let w = h.check_out();
    let id = h.establishing.remove(0);
    h.pool
        .handle_established(h.now, id, Conn(id.0), Some(service))
        .unwrap();
    h.drain();
    let pos = h.delivered.iter().position(|(x, _)| *x == w).unwrap();
    h.delivered.remove(pos).1
}

#[test]
fn load_balanced_pool_tracks_generation_and_count_per_service() {
    let mut h = lb_harness();
    let (s1, s2) = (ServiceId([1; 12]), ServiceId([2; 12]));
    let a = take_for_service(&mut h, s1);
    let b = take_for_service(&mut h, s1);
    let c = take_for_service(&mut h, s2);
    assert_eq!(h.pool.service_generation(s1), Some((0, 2)));
    assert_eq!(h.pool.service_generation(s2), Some((0, 1)));
    let mut c = c;
    c.mark_errored();
    h.check_in(c);
    assert_eq!(h.pool.service_generation(s2), None, "entry removed at count 0");
    h.check_in(a);
    h.check_in(b);
    assert_eq!(h.pool.service_generation(s1), Some((0, 2)));
}

#[test]
fn load_balanced_clear_moves_one_service_without_pausing() {
    let mut h = lb_harness();
    let (s1, s2) = (ServiceId([1; 12]), ServiceId([2; 12]));
    let a = take_for_service(&mut h, s1);
    let b = take_for_service(&mut h, s2);
    let keeps_s1_entry = take_for_service(&mut h, s1);
    assert!(matches!(
        h.pool.handle_clear(h.now, Clear::default()),
        Err(UsageError::ClearMode(_))
    ));
    h.clear_events();
    h.pool
        .handle_clear(
            h.now,
            Clear {
                service_id: Some(s1),
                ..Clear::default()
            },
        )
        .unwrap();
    h.drain();
    assert!(matches!(h.events[0], Event::PoolCleared { service_id: Some(s), .. } if s == s1));
    assert_eq!(h.pool.state(), PoolState::Ready);
    h.clear_events();
    h.check_in(a);
    assert_eq!(h.closed_reasons(), [(1, ClosedReason::Stale)]);
    // s2's connection is not stale.
    h.check_in(b);
    assert_eq!(h.pool.status().available, 1);
    let b = h.take();
    assert_eq!(b.id().0, 2);
    // A new connection to s1 takes s1's new generation at handshake time.
    let fresh = take_for_service(&mut h, s1);
    assert_eq!(fresh.generation(), 1);
    assert_eq!(h.pool.service_generation(s1), Some((1, 2)));
    h.check_in(keeps_s1_entry);
}

#[test]
fn load_balanced_interrupting_clear_spares_other_services() {
    let mut h = lb_harness();
    let (s1, s2) = (ServiceId([1; 12]), ServiceId([2; 12]));
    let a = take_for_service(&mut h, s1);
    let _b = take_for_service(&mut h, s2);
    h.pool
        .handle_clear(
            h.now,
            Clear {
                interrupt_in_use: true,
                service_id: Some(s1),
                ..Clear::default()
            },
        )
        .unwrap();
    h.drain();
    assert_eq!(h.interrupted, [a.id()]);
    assert_eq!(h.pool.status().in_use, 1);
}

#[test]
fn load_balanced_clear_keeps_the_wait_queue() {
    let mut h = Harness::ready(
        opts()
            .load_balanced(true)
            .max_pool_size(1)
            .maintenance_interval(None)
            .build()
            .unwrap(),
    );
    let s = ServiceId([3; 12]);
    let held = take_for_service(&mut h, s);
    let w = h.check_out();
    h.pool
        .handle_clear(
            h.now,
            Clear {
                service_id: Some(s),
                ..Clear::default()
            },
        )
        .unwrap();
    h.drain();
    assert!(h.failed.is_empty());
    h.check_in(held); // stale: closed, and a new connection starts for w
    assert_eq!(h.establishing.len(), 1);
    let id = h.establishing.remove(0);
    h.pool.handle_established(h.now, id, Conn(id.0), Some(s)).unwrap();
    h.drain();
    assert_eq!(h.delivered[0].0, w);
}

/// Every connection lent out before a fork is the parent's, whatever its
/// service's generation: a reset after fork interrupts them all, the ones
/// of a service cleared earlier (generation 1, above the pool's 0) too
/// (spec: "Forking"; a load-balanced connection carries its service's
/// generation, which a whole-pool clear does not compare).
#[test]
fn load_balanced_reset_after_fork_interrupts_connections_of_cleared_services() {
    let mut h = lb_harness();
    let (s1, s2) = (ServiceId([1; 12]), ServiceId([2; 12]));
    let old = take_for_service(&mut h, s1);
    let clear_s1 = Clear {
        service_id: Some(s1),
        ..Clear::default()
    };
    h.pool.handle_clear(h.now, clear_s1).unwrap();
    let a = take_for_service(&mut h, s1);
    let b = take_for_service(&mut h, s2);
    assert_eq!(a.generation(), 1);
    h.pool.handle_reset_after_fork(h.now);
    h.drain();
    h.interrupted.sort();
    assert_eq!(h.interrupted, [old.id(), a.id(), b.id()]);
    assert_eq!(h.pool.status().in_use, 0);
    for c in [old, a, b] {
        h.check_in(c);
    }
    assert_eq!(
        h.pool.status().total,
        0,
        "the parent's connections are not pooled"
    );
}
