//! The pool's events as subscribers see them: in the core's order, on
//! callbacks and streams alike, from the moment one subscribes until it
//! unsubscribes, and a stream ending with its pool.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cmap_async::{EventStream, Runtime};
use futures_lite::Stream;

use super::{pool_of, runtimes, CountingWaker};
use crate::rt::{eventually, next, timeout};
use crate::{builder, Names};

/// The events of a pool of one connection, checked out twice and then
/// closed, in the order the core emits them (every adapter's ordering
/// test expects them).
pub const TWO_CHECKOUTS_THEN_CLOSE: [&str; 12] = [
    "ConnectionPoolCreated",
    "ConnectionPoolReady",
    "ConnectionCheckOutStarted",
    "ConnectionCreated",
    "ConnectionReady",
    "ConnectionCheckedOut",
    "ConnectionCheckedIn",
    "ConnectionCheckOutStarted",
    "ConnectionCheckedOut",
    "ConnectionCheckedIn",
    "ConnectionClosed",
    "ConnectionPoolClosed",
];

/// Callbacks and streams see the core's events in its order.
pub async fn events_arrive_in_the_cores_order<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let names = Names::default();
    let pool = builder()
        .max_pool_size(1)
        .on_event(names.callback())
        .build(m)
        .unwrap();
    let mut stream = pool.events();
    let c = pool.get().await.unwrap();
    drop(c);
    let c = pool.get().await.unwrap();
    drop(c);
    pool.close();
    let expected = TWO_CHECKOUTS_THEN_CLOSE;
    assert_eq!(names.take(), expected);
    // The stream was made after the pool: it starts at the first checkout.
    let mut streamed = Vec::new();
    while let Some(e) = stream.try_next() {
        streamed.push(e.name());
    }
    assert_eq!(streamed, expected[2..]);
}

/// An event stream ends once its pool is gone.
pub async fn the_event_stream_ends_when_the_pool_is_gone<R: Runtime + Default, T: Runtime + Default>() {
    let (m, t) = runtimes::<R, T>();
    let pool = builder().build(m).unwrap();
    let mut stream = pool.events();
    drop(pool.get().await.unwrap());
    drop(pool);
    let mut names = Vec::new();
    while let Some(e) = timeout(&t, Duration::from_secs(2), next(&mut stream))
        .await
        .expect("the stream ends")
    {
        names.push(e.name());
    }
    assert_eq!(names.last(), Some(&"ConnectionPoolClosed"));
}

/// A dropped stream unsubscribes: with no subscriber left (and DEBUG
/// logging off), the pool stops building events. Seen through the flight
/// recorder, which records the core's events switch as an input.
pub async fn a_dropped_stream_unsubscribes<R: Runtime + Default, T: Runtime + Default>() {
    let (m, _t) = runtimes::<R, T>();
    let pool = builder().flight_recorder(1000).build(m).unwrap();
    let switched = |pool: &crate::FakePool<R>, on: bool| {
        let mut text = Vec::new();
        pool.recording().expect("recording").write_to(&mut text).unwrap();
        String::from_utf8(text)
            .unwrap()
            .contains(&format!("{{\"EventsEnabled\":{on}}}"))
    };
    let stream = pool.events();
    drop(pool.get().await.unwrap());
    assert!(switched(&pool, true), "a stream turns events on");
    drop(stream);
    drop(pool.get().await.unwrap());
    assert!(switched(&pool, false), "the dropped stream's events are off");
}

/// An event stream polled again with another waker (moved to another
/// task) is woken through the last waker it was polled with.
pub async fn an_event_stream_polled_with_a_new_waker_is_woken_through_it<
    R: Runtime + Default,
    T: Runtime + Default,
>() {
    let (_, t, pool) = pool_of::<R, T>(1);
    let mut stream = pool.events();
    assert!(
        format!("{stream:?}").starts_with("EventStream { id: "),
        "{stream:?}"
    );
    let (first, last) = (CountingWaker::new(), CountingWaker::new());
    let last_waker = last.waker();
    let polled =
        |waker: &Waker, stream: &mut EventStream| Pin::new(stream).poll_next(&mut Context::from_waker(waker));
    assert!(polled(&first.waker(), &mut stream).is_pending());
    assert!(polled(&last_waker, &mut stream).is_pending());
    drop(pool.get().await.unwrap());
    eventually(&t, "the last waker is woken", || last.woken()).await;
    let Poll::Ready(Some(event)) = polled(&last_waker, &mut stream) else {
        panic!("a woken stream has an event");
    };
    assert_eq!(event.name(), "ConnectionCheckOutStarted");
}

/// A subscriber added or removed between two inputs sees exactly the
/// events of the inputs after it came and before it went, callbacks and
/// streams alike (deliveries keep a snapshot of the subscribers: it must
/// follow every change).
pub async fn subscribing_and_unsubscribing_take_effect_at_once<R: Runtime + Default, T: Runtime + Default>() {
    let (_, _t, pool) = pool_of::<R, T>(1);
    let cycle = || async { drop(pool.get().await.unwrap()) };
    const ONE_CYCLE: [&str; 3] = [
        "ConnectionCheckOutStarted",
        "ConnectionCheckedOut",
        "ConnectionCheckedIn",
    ];
    let first = Names::default();
    let first_sub = pool.on_event(first.callback());
    cycle().await;
    let _ = first.take();

    let second = Names::default();
    let second_sub = pool.on_event(second.callback());
    let mut stream = pool.events();
    cycle().await;
    assert_eq!(first.take(), ONE_CYCLE);
    assert_eq!(
        second.take(),
        ONE_CYCLE,
        "a new callback sees the next input's events"
    );
    let mut streamed = Vec::new();
    while let Some(event) = stream.try_next() {
        streamed.push(event.name());
    }
    assert_eq!(streamed, ONE_CYCLE, "a new stream sees the next input's events");

    first_sub.unsubscribe();
    let mut kept = pool.events();
    drop(stream);
    cycle().await;
    assert_eq!(
        first.take(),
        Vec::<&str>::new(),
        "an unsubscribed callback sees nothing more"
    );
    assert_eq!(second.take(), ONE_CYCLE);
    let mut streamed = Vec::new();
    while let Some(event) = kept.try_next() {
        streamed.push(event.name());
    }
    assert_eq!(streamed, ONE_CYCLE, "dropping one stream leaves the others");

    second_sub.unsubscribe();
    cycle().await;
    assert_eq!(second.take(), Vec::<&str>::new());
    let third = Names::default();
    let _third_sub = pool.on_event(third.callback());
    cycle().await;
    assert_eq!(third.take(), ONE_CYCLE, "subscribing again after none were left");
}
