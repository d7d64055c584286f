//! Rule tests for resizing a running pool (`Pool::handle_resize`, beyond
//! the spec): growing serves waiters at once and populates to the new
//! minimum; shrinking closes idle connections first, least recently used
//! first, and in-use and pending ones as they come back, never
//! interrupting work; bad sizes and a closed pool are errors that change
//! nothing.

mod support;

use cmap_core::{ClosedReason, Event, OptionsError, PoolOptions, PoolOptionsBuilder, UsageError};
use support::Harness;

fn opts() -> PoolOptionsBuilder {
    PoolOptions::builder().maintenance_interval(None)
}

fn resized(h: &Harness) -> Vec<(u32, u32)> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::PoolResized {
                min_pool_size,
                max_pool_size,
                ..
            } => Some((*min_pool_size, *max_pool_size)),
            _ => None,
        })
        .collect()
}

#[test]
fn growing_starts_connections_for_waiters_at_once() {
    let mut h = Harness::ready(opts().max_pool_size(1).build().unwrap());
    let held = h.take();
    let w1 = h.check_out();
    let w2 = h.check_out();
    assert!(h.establishing.is_empty(), "at maxPoolSize, nothing starts");
    h.pool.handle_resize(h.now, 0, 3).unwrap();
    h.drain();
    assert_eq!(
        h.establishing.len(),
        2,
        "one connection per waiter, within maxConnecting"
    );
    assert_eq!(resized(&h), [(0, 3)]);
    h.establish_all();
    let served: Vec<_> = h.delivered.iter().map(|(w, _)| *w).collect();
    assert_eq!(served, [w1, w2], "in arrival order");
    assert_eq!(h.pool.options().max_pool_size(), 3);
    drop(held);
}

#[test]
fn shrinking_closes_idle_connections_least_recently_used_first() {
    let mut h = Harness::ready(opts().max_pool_size(4).build().unwrap());
    let conns: Vec<_> = (0..4).map(|_| h.take()).collect();
    let ids: Vec<_> = conns.iter().map(|c| c.id()).collect();
    for c in conns {
        h.advance(1);
        h.check_in(c); // returned in id order: the first is the least recently used
    }
    h.pool.handle_resize(h.now, 0, 1).unwrap();
    h.drain();
    let closed: Vec<_> = h.closed.iter().map(|(id, r)| (*id, *r)).collect();
    assert_eq!(
        closed,
        [
            (ids[0], ClosedReason::Shrunk),
            (ids[1], ClosedReason::Shrunk),
            (ids[2], ClosedReason::Shrunk)
        ]
    );
    let s = h.pool.status();
    assert_eq!((s.total, s.available), (1, 1));
    let kept = h.take();
    assert_eq!(kept.id(), ids[3], "the most recently used one stays");
}

#[test]
fn shrinking_closes_in_use_connections_as_they_return_without_interrupting() {
    let mut h = Harness::ready(opts().max_pool_size(3).build().unwrap());
    let a = h.take();
    let b = h.take();
    let c = h.take();
    let waiter = h.check_out();
    h.pool.handle_resize(h.now, 0, 1).unwrap();
    h.drain();
    assert!(h.interrupted.is_empty(), "work in progress is left alone");
    assert!(h.closed.is_empty(), "nothing idle to close");
    assert_eq!(h.pool.status().total, 3);
    h.check_in(a);
    assert_eq!(h.closed.last().map(|c| c.1), Some(ClosedReason::Shrunk));
    assert!(
        h.delivered.is_empty(),
        "above the new size, not handed to the waiter"
    );
    h.check_in(b);
    assert_eq!(h.closed.len(), 2);
    // Back at the new size: the next one returned serves the waiter.
    h.check_in(c);
    assert_eq!(h.closed.len(), 2);
    assert_eq!(h.delivered.iter().map(|(w, _)| *w).collect::<Vec<_>>(), [waiter]);
    assert_eq!(h.pool.status().total, 1);
    assert_eq!(h.pool.stats().returns_bad, 0, "closed for the size, not as bad");
}

#[test]
fn a_connection_established_above_the_new_size_is_closed() {
    let mut h = Harness::ready(opts().max_pool_size(2).build().unwrap());
    let held = h.take();
    h.check_out(); // a second connection starts for it
    assert_eq!(h.establishing.len(), 1);
    let id = h.establishing[0];
    h.pool.handle_resize(h.now, 0, 1).unwrap();
    h.drain();
    h.establish_all();
    assert_eq!(h.closed, [(id, ClosedReason::Shrunk)]);
    assert!(
        h.delivered.is_empty(),
        "the waiter waits for the connection in use"
    );
    h.check_in(held);
    assert_eq!(h.delivered.len(), 1);
}

#[test]
fn raising_the_minimum_populates_at_once() {
    let mut h = Harness::ready(PoolOptions::builder().max_pool_size(5).build().unwrap());
    assert!(h.establishing.is_empty());
    h.pool.handle_resize(h.now, 2, 5).unwrap();
    h.drain();
    assert_eq!(h.establishing.len(), 2, "within maxConnecting (2)");
    h.establish_all();
    assert_eq!(h.pool.status().available, 2);
}

#[test]
fn bad_sizes_and_a_closed_pool_are_refused_and_change_nothing() {
    let mut h = Harness::ready(opts().max_pool_size(4).min_pool_size(1).build().unwrap());
    h.clear_events();
    let err = h.pool.handle_resize(h.now, 5, 2).unwrap_err();
    assert_eq!(
        err,
        UsageError::InvalidSize(OptionsError::MinExceedsMax { min: 5, max: 2 })
    );
    assert_eq!(
        (h.pool.options().min_pool_size(), h.pool.options().max_pool_size()),
        (1, 4)
    );
    // Zero is no limit: any minimum goes with it.
    h.pool.handle_resize(h.now, 5, 0).unwrap();
    h.drain();
    h.pool.handle_close(h.now);
    h.drain();
    h.clear_events();
    assert_eq!(h.pool.handle_resize(h.now, 0, 1), Err(UsageError::ResizeClosed));
    h.drain();
    assert!(h.events.is_empty(), "no event for a refused resize");
}

#[test]
fn the_event_comes_before_the_closes_it_causes() {
    let mut h = Harness::ready(opts().max_pool_size(2).build().unwrap());
    let a = h.take();
    let b = h.take();
    h.check_in(a);
    h.check_in(b);
    h.clear_events();
    h.pool.handle_resize(h.now, 0, 0).unwrap(); // no limit: nothing closes
    h.pool.handle_resize(h.now, 0, 1).unwrap();
    h.drain();
    assert_eq!(
        h.names(),
        [
            "ConnectionPoolResized",
            "ConnectionPoolResized",
            "ConnectionClosed"
        ]
    );
    assert_eq!(resized(&h), [(0, 0), (0, 1)]);
}
