//! # cmap-testkit
//!
//! The tests of the [`cmap_async`] pool written once for every runtime,
//! so that `cmap-tokio` and `cmap-async-std` (under async-std and under
//! smol) run the same checks instead of copies of them. Not published.
//!
//! - [`Fake`]: a connection manager whose connections are numbers, with
//!   knobs (slow, refused, hanging connects; slow resets; failing checks)
//!   and a count of live connections, so a leak shows.
//! - [`scenarios`]: the pool's behaviour, one `async fn` per test, generic
//!   over the pool's runtime `R` and the runtime `T` the test's own tasks
//!   run on (the user's: under smol, `smol::spawn`). The
//!   [`pool_scenarios!`] macro turns them into `#[test]`s.
//!   Panic safety, one scenario per hook of user code, is among them.
//! - [`stress`]: thousands of `get()` futures dropped at random points.
//! - [`rt`]: the few runtime-neutral helpers the tests need (spawn and
//!   join, sleep, timeout, `eventually`).
//! - [`logs`]: a `tracing` subscriber that records the spec's log
//!   messages, and the transcript a pool must log.
//! - [`recorder`]: a `metrics` recorder that keeps every value.
//! - [`echo`]: the echo server and printing the examples share.
//! - [`mongo`]: where the MongoDB-compatible test servers listen, and
//!   whether the tests that need them run.
//! - [`proxy`]: a loopback TCP fault proxy (refuse, cut, blackhole,
//!   delay) for the tests and benchmarks that take a real server down.
//! - [`postgres`]: the pool against a real PostgreSQL server, one check
//!   per `async fn`, generic over the client and the runtimes; the
//!   [`postgres_checks!`] macro turns them into `#[test]`s.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod echo;
mod fake;
mod flight;
pub mod gate;
pub mod logs;
pub mod manual_clock;
pub mod mongo;
mod operations;
mod panic_safety;
pub mod postgres;
pub mod proxy;
pub mod recorder;
pub mod rt;
pub mod scenarios;
pub mod stress;

pub use fake::{CloseGate, Conn, Fake, FakeError, Names, State, Unchecked};

/// The pool of [`Fake`] connections on runtime `R`.
pub type FakePool<R> = cmap_async::Pool<Fake<R>, R>;

/// A builder for a [`FakePool`] with the address `fake:27017`.
pub fn builder<R: cmap_async::Runtime>() -> cmap_async::PoolBuilder<Fake<R>, R> {
    cmap_async::Pool::builder().address("fake:27017")
}

/// Asserts that `err` failed its checkout because the connect made for it
/// was given up at the builder's connect timeout, `after`.
pub fn assert_connect_timed_out(err: &cmap_async::GetError, after: std::time::Duration) {
    let timeout = err
        .connection_error()
        .expect("a connection error")
        .downcast_ref::<cmap_async::ConnectTimeoutError>();
    assert_eq!(
        timeout,
        Some(&cmap_async::ConnectTimeoutError { after }),
        "{err:?}"
    );
}

/// Whether an I/O error of `kind` is anywhere down the `source()` chain
/// of `err` (a connect refused by the operating system, say, under the
/// pool's and the driver's errors).
pub fn caused_by_io(err: &(dyn std::error::Error + 'static), kind: std::io::ErrorKind) -> bool {
    std::iter::successors(Some(err), |e| e.source())
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == kind)
}

/// The panic down the `source()` chain of `err`, if a hook of user code
/// panicked for it.
pub fn panicked_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a cmap_async::Panicked> {
    std::iter::successors(Some(err), |&e| e.source()).find_map(|e| e.downcast_ref())
}

/// Expands to one `#[test]` per scenario of [`scenarios`], each running
/// `scenarios::NAME::<POOL, TASKS>()` with `block_on`.
///
/// ```ignore
/// cmap_testkit::pool_scenarios!(pool: AsyncStdRuntime, tasks: SmolTasks, block_on: smol::block_on);
/// ```
#[macro_export]
macro_rules! pool_scenarios {
    (pool: $pool:ty, tasks: $tasks:ty, block_on: $block_on:expr) => {
        $crate::pool_scenarios!(@tests $pool, $tasks, $block_on;
            check_out_check_in_and_reuse,
            a_waiter_gets_the_connection_given_back,
            a_waiter_polled_with_a_new_waker_is_woken_through_it,
            get_timeout_fires_on_time,
            an_uncontended_cycle_reads_only_the_cheap_clock,
            an_idle_pools_timer_sleeps_until_its_next_deadline,
            without_background_runs_the_timer_still_serves_a_burst_of_deadlines,
            after_its_last_deadline_the_timer_stays_for_the_next,
            a_waited_checkout_is_timed_on_the_precise_clock,
            an_earlier_deadline_rearms_the_timer,
            wait_queue_timeout_from_the_connection_string,
            clear_fails_waiters_and_closes_stale_connections,
            a_load_balanced_clear_makes_only_its_services_connections_stale,
            close_fails_waiters_closes_idle_and_returned_connections,
            events_arrive_in_the_cores_order,
            the_event_stream_ends_when_the_pool_is_gone,
            interrupted_future_resolves_on_an_interrupting_clear,
            only_the_connections_in_use_at_the_clear_are_interrupted,
            a_second_clear_that_interrupts_wakes_the_guard,
            broken_connections_are_closed_not_pooled,
            a_closed_connection_is_dropped_off_the_callers_path,
            detach_takes_the_connection_out_of_the_pool,
            a_refused_connect_waits_for_the_server_then_reconnects,
            a_refused_connect_fails_its_checkout_when_told_not_to_wait,
            denied_credentials_clear_the_pool_then_reconnect,
            connect_timeout_fails_the_checkout,
            a_connect_nobody_needs_after_its_checkout_timed_out_is_aborted,
            an_establishment_dropped_before_it_reported_frees_its_slot,
            a_slow_reset_runs_in_a_task_before_check_in,
            a_failed_check_discards_the_idle_connection_and_tries_another,
            a_manager_that_does_not_check_is_never_checked,
            a_get_dropped_during_its_check_closes_the_connection,
            min_pool_size_is_kept_in_the_background,
            a_dropped_pool_closes_and_its_tasks_end,
            start_paused_waits_for_ready,
            a_bad_address_or_option_fails_the_build,
            the_connection_strings_one_host_is_the_address,
            a_zero_timeout_takes_an_available_connection_or_fails_at_once,
            a_flood_of_short_deadlines_leaves_the_queue_empty,
            ten_thousand_cancelled_waiters_leave_nothing_behind,
            concurrent_inputs_never_reorder_events,
            a_callback_may_call_into_its_pool,
            a_checkout_dropped_as_its_connection_arrives_gives_it_back,
            a_waiting_checkout_completes_only_after_its_event_is_out,
            subscribing_and_unsubscribing_take_effect_at_once,
            an_event_stream_polled_with_a_new_waker_is_woken_through_it,
            a_dropped_stream_unsubscribes,
            reset_after_fork_clears_restarts_the_timer_and_leaks_old_connections,
            a_panicking_callback_loses_no_connection_and_no_waiter,
            a_panicking_tracing_subscriber_loses_nothing,
            a_panicking_connect_fails_its_checkout_and_frees_its_slot,
            a_panicking_check_closes_its_connection,
            a_panicking_reset_or_is_broken_closes_the_connection,
            a_hanging_reset_is_given_up_at_the_reset_timeout,
            a_guard_dropped_while_unwinding_is_closed_not_reset,
            a_panicking_connection_drop_is_caught,
            resize_grows_and_shrinks_a_running_pool,
            close_gracefully_waits_for_connections_in_use_then_forces_the_rest,
            wait_ready_waits_for_the_minimum_and_names_the_cause,
            wait_ready_counts_connections_in_use,
            the_builders_options_are_the_pools,
            check_idle_closes_the_idle_connections_that_fail,
            a_guard_held_past_the_leak_threshold_is_reported_once,
            metrics_count_checkouts_through_the_facade,
            a_recorded_run_replays_exactly,
        );
    };
    (@tests $pool:ty, $tasks:ty, $block_on:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                ($block_on)($crate::scenarios::$name::<$pool, $tasks>());
            }
        )*
    };
}
