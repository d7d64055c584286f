//! # cmap-core
//!
//! The MongoDB "Connection Monitoring and Pooling" (CMAP) connection pool as
//! a pure, deterministic state machine. **This crate never reads a clock,
//! sleeps, spawns, locks or does I/O**: time is an argument (`now`) of every
//! input, and everything the pool wants done comes out as an [`Output`].
//! The same inputs at the same instants give the same outputs, which is what
//! makes replay, property tests and a virtual-time spec runner possible.
//! `clippy.toml` bans reading the system clock, sleeping and hash maps here.
//!
//! ## The driver contract
//!
//! A driver (an adapter for one runtime) owns a [`Pool`] behind a lock and:
//!
//! - **Inputs** — applies one [`Input`] per thing that happened with
//!   [`handle`](Pool::handle), passing the clock's current `now`; or calls
//!   its typed form, one `handle_*` method per variant: the spec's
//!   [`handle_check_out`](Pool::handle_check_out),
//!   [`handle_check_in`](Pool::handle_check_in),
//!   [`handle_clear`](Pool::handle_clear), [`handle_ready`](Pool::handle_ready),
//!   [`handle_close`](Pool::handle_close),
//!   [`handle_established`](Pool::handle_established) /
//!   [`handle_establish_failed`](Pool::handle_establish_failed),
//!   [`handle_cancel`](Pool::handle_cancel) and
//!   [`handle_timeout`](Pool::handle_timeout); and beyond it
//!   [`handle_check_out_until`](Pool::handle_check_out_until) (a deadline
//!   of the caller's), [`handle_detach`](Pool::handle_detach),
//!   [`handle_resize`](Pool::handle_resize),
//!   [`handle_force_close`](Pool::handle_force_close) and
//!   [`handle_reset_after_fork`](Pool::handle_reset_after_fork).
//! - **Outputs** — after *every* input, drains
//!   [`poll_output`](Pool::poll_output) until `None` and carries out each
//!   [`Action`] (start establishing, deliver to or fail a waiter, close or
//!   interrupt a connection) and delivers each [`Event`], in order and
//!   outside the lock. A driver that waits for its checkouts itself can
//!   use [`handle_check_out_direct`](Pool::handle_check_out_direct): a
//!   checkout served at once returns its connection there, with no
//!   `Deliver` to drain. One that delivers events on a path of their own
//!   can [keep them apart](Pool::set_events_apart) and take each input's
//!   events in one swap with [`take_events`](Pool::take_events). Its
//!   waiting checkouts, by [`WaiterId`], fit an [`IdDeque`], the structure
//!   of the pool's own wait queue.
//! - **Timers** — keeps one sleep until [`poll_timeout`](Pool::poll_timeout)
//!   and calls `handle_timeout(now)` with the clock's time (not the deadline)
//!   when it fires. Spurious or late calls are harmless; time never runs
//!   backwards inside the pool.
//!
//! Pool outcomes (a timeout, a cleared or closed pool) are outputs, not
//! `Err`s; `Err` means misuse (an unknown id, a connection from another
//! pool).
//!
//! ```no_run
//! use std::time::Instant;
//! use cmap_core::{Action, Address, Output, Pool, PoolOptions};
//!
//! struct Socket; // whatever a connection is
//!
//! /// A driver's run loop; `clock` is the driver's clock (in a real
//! /// adapter, the runtime's).
//! fn run(clock: impl Fn() -> Instant) {
//!     let options = PoolOptions::builder().max_pool_size(10).build().unwrap();
//!     let mut pool: Pool<Socket> = Pool::new(clock(), "db:27017".parse().unwrap(), options);
//!     pool.handle_ready(clock()).unwrap();
//!     let me = pool.handle_check_out(clock());
//!     loop {
//!         while let Some(output) = pool.poll_output() {
//!             match output {
//!                 Output::Action(Action::Establish { id }) => {
//!                     // connect in the background; when it is done:
//!                     pool.handle_established(clock(), id, Socket, None).unwrap();
//!                 }
//!                 Output::Action(Action::Deliver { waiter, connection }) if waiter == me => {
//!                     // use `connection`, then give it back:
//!                     pool.handle_check_in(clock(), connection).unwrap();
//!                 }
//!                 Output::Action(_other) => { /* fail a waiter, close, interrupt... */ }
//!                 Output::Event(event) => println!("{}", event.name()),
//!             }
//!         }
//!         match pool.poll_timeout() {
//!             Some(_deadline) => {
//!                 // sleep until `_deadline` (or the next input), then pass
//!                 // the clock's time, not the deadline:
//!                 pool.handle_timeout(clock());
//!             }
//!             None => break,
//!         }
//!     }
//! }
//! ```
//!
//! The fast paths — checking out an available connection, and checking in
//! with nobody waiting — allocate nothing and are O(1) when events are off
//! ([`Pool::set_events_enabled`]). Cancelling a queued checkout and expiring
//! a deadline are O(log n) in the queue length.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

// The flight recorder's hooks (`recorder/`). Each expands to nothing
// without the `recorder` feature, and with it to one test of
// `Pool::recorder` around a call kept out of line, so that a pool that
// records nothing inlines its hot paths as if the feature were off.

/// Calls the flight recorder's hook `$method` (a method of `Pool` in
/// `recorder/`) while a recorder runs.
macro_rules! record {
    ($pool:ident . $method:ident ( $($arg:expr),* $(,)? )) => {
        #[cfg(feature = "recorder")]
        if $pool.recorder.is_some() {
            $pool.$method($($arg),*);
        }
    };
}

mod address;
mod backoff;
mod connection;
mod connection_set;
mod connection_string;
mod error;
mod establishment;
mod event;
mod id_deque;
mod input;
mod invariants;
mod lifecycle;
mod maintenance;
mod measure;
mod options;
mod output;
mod output_queue;
mod pace;
mod perish;
mod pool;
#[cfg(feature = "recorder")]
mod recorder;
mod resize;
mod rng;
mod shutdown;
#[cfg(test)]
mod state_table;
mod stats;
#[cfg(feature = "testing")]
pub mod testing;
mod timer;
pub mod virtual_time;
mod wait_queue;
mod waiting;

pub use address::Address;
pub use connection::{ConnectionId, Pooled, ServiceId, WaiterId};
pub use connection_string::{
    ConnectionString, ConnectionStringError, UnknownOption, UserInfo, DEFAULT_PORT, REDACTED,
};
pub use error::{
    CheckInError, CheckOutError, ClearCause, EstablishError, EstablishErrorKind, InterruptedError,
    SharedError, TimeoutContext, UsageError, RETRYABLE_ERROR, SYSTEM_OVERLOADED_ERROR,
};
pub use event::{CheckOutFailedReason, ClosedReason, Event};
pub use id_deque::IdDeque;
pub use input::{HandleError, Handled, Input, InputKind};
pub use measure::Measure;
pub use options::{
    AdaptiveConnecting, EstablishFailure, OptionsError, PoolOptions, PoolOptionsBuilder, Reconnect,
};
pub use output::{Action, Output};
pub use pool::{CheckOut, Clear, HandOver, Pool, PoolState, Wait};
#[cfg(feature = "recorder")]
pub use recorder::{Recording, RecordingError, Replay, ReplayError, Seconds, Step};
pub use stats::{Stats, Status};

#[cfg(test)]
mod test_clock {
    use std::time::Instant;

    use crate::{Action, Output, Pool, Pooled};

    /// Unit tests need one real instant as the origin of their virtual time.
    #[allow(clippy::disallowed_methods)]
    pub(crate) fn origin() -> Instant {
        Instant::now()
    }

    /// `n` checkouts of a ready `pool` at `now`, one after the other, each
    /// served by a connection established for it.
    pub(crate) fn served(pool: &mut Pool<()>, now: Instant, n: usize) -> Vec<Pooled<()>> {
        let mut held = Vec::new();
        for _ in 0..n {
            pool.handle_check_out(now);
            let mut started = Vec::new();
            while let Some(out) = pool.poll_output() {
                if let Output::Action(Action::Establish { id }) = out {
                    started.push(id);
                }
            }
            for id in started {
                pool.handle_established(now, id, (), None).unwrap();
            }
            while let Some(out) = pool.poll_output() {
                if let Output::Action(Action::Deliver { connection, .. }) = out {
                    held.push(connection);
                }
            }
        }
        held
    }
}
