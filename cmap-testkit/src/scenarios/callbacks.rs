//! Event callbacks while the pool delivers: concurrent inputs that never
//! reorder events, a callback calling into its own pool, and checkouts
//! dropped or polled from a callback in the middle of a delivery.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cmap_async::{ConnectionId, GetError, PoolState, PooledConnection, Runtime};

use super::runtimes;
use crate::rt::spawn;
use crate::{builder, Fake, FakePool, Names};

/// Concurrent inputs never reorder a connection's events, and each input
/// returns only once its own events are delivered (whichever thread
/// delivered them).
pub async fn concurrent_inputs_never_reorder_events<R: Runtime + Default, T: Runtime + Default>() {
    use std::collections::BTreeMap;
    type Log = Arc<Mutex<Vec<(&'static str, Option<ConnectionId>)>>>;
    /// Where the latest event about `id` is, and its name.
    fn latest(log: &Log, id: ConnectionId) -> Option<(usize, &'static str)> {
        let log = log.lock().unwrap();
        log.iter()
            .enumerate()
            .rev()
            .find(|(_, (_, of))| *of == Some(id))
            .map(|(at, (name, _))| (at, *name))
    }
    let (m, t) = runtimes::<R, T>();
    let seen: Log = Arc::default();
    let log = seen.clone();
    let pool = builder()
        .max_pool_size(3)
        .on_event(move |e| {
            // A slow subscriber widens any window for reordering.
            std::thread::sleep(Duration::from_micros(20));
            log.lock().unwrap().push((e.name(), e.connection_id()))
        })
        .build(m)
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            let seen = seen.clone();
            spawn(&t, async move {
                for _ in 0..300 {
                    let c = pool.get().await.unwrap();
                    let id = c.connection_id();
                    // Nobody else can use it while it is lent to us.
                    let (out_at, name) = latest(&seen, id).expect("its events are out");
                    assert_eq!(name, "ConnectionCheckedOut", "connection {id}");
                    drop(c);
                    let came_back = {
                        let log = seen.lock().unwrap();
                        log[out_at + 1..].contains(&("ConnectionCheckedIn", Some(id)))
                    };
                    assert!(came_back, "the check-in of {id} was out before drop returned");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await;
    }
    pool.close();
    let seen = seen.lock().unwrap();
    // Per connection: created, ready, then checked out and in by turns,
    // then closed, as the core emitted them.
    let mut life: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (name, id) in seen.iter() {
        if let Some(id) = id {
            life.entry(id.0).or_default().push(name);
        }
    }
    for (id, events) in &life {
        assert_eq!(
            events[..2],
            ["ConnectionCreated", "ConnectionReady"],
            "connection {id}"
        );
        assert_eq!(events.last(), Some(&"ConnectionClosed"), "connection {id}");
        for (i, e) in events[2..events.len() - 1].iter().enumerate() {
            let expected = if i % 2 == 0 {
                "ConnectionCheckedOut"
            } else {
                "ConnectionCheckedIn"
            };
            assert_eq!(*e, expected, "connection {id}, event {}", i + 2);
        }
    }
    let started = seen
        .iter()
        .filter(|(n, _)| *n == "ConnectionCheckOutStarted")
        .count();
    assert_eq!(started, 8 * 300);
    assert_eq!(seen.last().map(|(n, _)| *n), Some("ConnectionPoolClosed"));
}

/// A callback may call into its own pool without deadlocking; its events
/// come after the current one.
pub async fn a_callback_may_call_into_its_pool<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let names = Names::default();
    let handle: Arc<OnceLock<FakePool<R>>> = Arc::default();
    let h = handle.clone();
    let record = names.callback();
    let pool = builder()
        .on_event(move |e| {
            record(e);
            // Re-ready a cleared pool from inside the callback: its events
            // come after this one, from the loop already delivering.
            if e.name() == "ConnectionPoolCleared" {
                let pool = h.get().unwrap();
                assert_eq!(pool.status().state, PoolState::Paused);
                pool.ready().unwrap();
            }
        })
        .build(m)
        .unwrap();
    let _ = handle.set(pool.clone());
    pool.clear(false).unwrap();
    assert_eq!(pool.status().state, PoolState::Ready);
    assert_eq!(
        names.take(),
        [
            "ConnectionPoolCreated",
            "ConnectionPoolReady",
            "ConnectionPoolCleared",
            "ConnectionPoolReady"
        ]
    );
    // The callback holds a handle: close explicitly.
    pool.close();
}

/// A `get_owned()` future kept aside, for an event callback to poll or
/// drop while the pool delivers events.
type Parked<R> = Pin<Box<dyn Future<Output = Result<PooledConnection<'static, Fake<R>>, GetError>> + Send>>;
type ParkedSlot<R> = Arc<Mutex<Option<Parked<R>>>>;

/// Checks out the pool's one connection, and parks in `parked` a checkout
/// queued behind it (polled once); returns the connection held.
async fn hold_and_park<'a, R: Runtime>(
    pool: &'a FakePool<R>,
    parked: &ParkedSlot<R>,
) -> PooledConnection<'a, Fake<R>> {
    let held = pool.get().await.unwrap();
    let mut waiting: Parked<R> = Box::pin(pool.get_owned());
    assert!(waiting
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    assert_eq!(pool.status().waiting, 1);
    *parked.lock().unwrap() = Some(waiting);
    held
}

/// A queued checkout dropped after an input handed it a connection, but
/// before that outcome reached it (here: from the event callback, which
/// runs in between), gives the connection back: nothing is lost.
pub async fn a_checkout_dropped_as_its_connection_arrives_gives_it_back<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, _t) = runtimes::<R, T>();
    let parked: ParkedSlot<R> = Arc::default();
    let dropped = Arc::new(AtomicBool::new(false));
    let (p, d) = (parked.clone(), dropped.clone());
    let pool = builder()
        .max_pool_size(1)
        .on_event(move |e| {
            // Only the parked checkout's delivery finds one parked.
            if e.name() == "ConnectionCheckedOut" {
                if let Some(waiting) = p.lock().unwrap().take() {
                    drop(waiting);
                    d.store(true, Ordering::SeqCst);
                }
            }
        })
        .build(m)
        .unwrap();
    let held = hold_and_park(&pool, &parked).await;
    drop(held);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the callback dropped the checkout"
    );
    let s = pool.status();
    assert_eq!(
        (s.total, s.in_use, s.available, s.waiting),
        (1, 0, 1, 0),
        "the connection handed to the dropped checkout is back"
    );
    let again = pool.get().await.unwrap();
    assert_eq!(again.n, 1, "and it is the same connection");
    drop(again);
    pool.close();
}

/// A queued checkout does not complete before its `ConnectionCheckedOut`
/// is delivered, even when polled while the input that served it is
/// still delivering events (here: from the callback of the event before).
pub async fn a_waiting_checkout_completes_only_after_its_event_is_out<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (m, _t) = runtimes::<R, T>();
    let parked: ParkedSlot<R> = Arc::default();
    let seen: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let (p, s) = (parked.clone(), seen.clone());
    let pool = builder()
        .max_pool_size(1)
        .on_event(move |e| {
            if e.name() == "ConnectionCheckedIn" {
                // The check-in that serves the parked checkout: poll it
                // before its ConnectionCheckedOut, which comes next.
                let mut parked = p.lock().unwrap();
                if let Some(waiting) = parked.as_mut() {
                    let mut cx = Context::from_waker(Waker::noop());
                    let state = match waiting.as_mut().poll(&mut cx) {
                        Poll::Pending => "pending",
                        Poll::Ready(_) => {
                            // Never polled again; its connection goes back
                            // once the lock on `parked` is released.
                            let done = parked.take();
                            drop(parked);
                            drop(done);
                            "completed"
                        }
                    };
                    s.lock().unwrap().push(state);
                }
            }
        })
        .build(m)
        .unwrap();
    let held = hold_and_park(&pool, &parked).await;
    drop(held);
    assert_eq!(
        *seen.lock().unwrap(),
        ["pending"],
        "polled before its ConnectionCheckedOut, the checkout must still wait"
    );
    let mut waiting = parked.lock().unwrap().take().unwrap();
    let Poll::Ready(Ok(conn)) = waiting.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
        panic!("served once its events are out");
    };
    assert_eq!(conn.n, 1);
    drop(conn);
    pool.close();
}
