//! One test per rule of the CMAP spec (and of this crate's extensions), one
//! module per section of docs/spec-compliance.md, which maps every MUST and
//! SHOULD to these names. Each test names the spec section it proves. A
//! rule found by mutation testing (`cargo mutants`, docs/testing.md §7) or
//! by an audit of planted bugs is filed with its section like any other;
//! its doc names the mutant or bug it catches.
//!
//! One test binary (`--test rules`) with a module per section, not a binary
//! per section: the harness and the crate are linked once, and
//! `cargo test -p cmap-core --test rules` still runs every rule.
//!
//! The modules, in the order of docs/spec-compliance.md: `options`
//! (Options), `connection_string` (Options: reading a connection string),
//! `connections` (Connections), `wait_queue` (WaitQueue), `pool` (Pool),
//! `checkout` (Checking out), `checkin` (Checking in), `clearing`
//! (Clearing), `load_balanced` (Load-balanced mode), `background`
//! (Background thread), `monitoring` (Monitoring and errors), and
//! `extensions` (this crate's, beyond the spec). A test that proves rules
//! of two sections lives in the one its name points to.

#[path = "../support.rs"]
mod support;

mod background;
mod checkin;
mod checkout;
mod clearing;
mod connection_string;
mod connections;
mod extensions;
mod load_balanced;
mod monitoring;
mod options;
mod pool;
mod wait_queue;

use std::time::Duration;

use cmap_core::{CheckOutFailedReason, EstablishError, Event, PoolOptions};
use support::Harness;

fn opts() -> cmap_core::PoolOptionsBuilder {
    PoolOptions::builder()
}

/// A pool without background runs: only the inputs of the test move it.
fn quiet() -> cmap_core::PoolOptionsBuilder {
    PoolOptions::builder().maintenance_interval(None)
}

/// A ready pool of one connection whose checkouts wait at most `wait`.
fn one_connection_waiting_at_most(wait: Duration) -> Harness {
    Harness::ready(opts().max_pool_size(1).wait_queue_timeout(wait).build().unwrap())
}

/// A ready pool whose connections are idle after `max_idle_time`, found
/// so only by a checkout (no background runs), with connection 1 just
/// checked in.
fn one_connection_checked_in(max_idle_time: Duration) -> Harness {
    let mut h = Harness::ready(
        opts()
            .max_idle_time(max_idle_time)
            .maintenance_interval(None)
            .build()
            .unwrap(),
    );
    let a = h.take();
    h.check_in(a);
    h
}

/// An establishment error without backpressure labels (such as an
/// authentication failure): SDAM's reaction clears the pool.
fn io_error(text: &str) -> EstablishError {
    EstablishError::other(std::io::Error::other(text.to_owned()))
}

fn failed_reasons(h: &Harness) -> Vec<CheckOutFailedReason> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::ConnectionCheckOutFailed { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}
