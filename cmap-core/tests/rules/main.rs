//! One test per rule of the CMAP spec (and of this crate's extensions), one
//! module per section of docs/spec-compliance.md, which maps every MUST and
//! SHOULD to these names. Each test names the spec section it proves.
//!
//! One test binary (`--test rules`) with a module per section, not a binary
//! per section: the harness and the crate are linked once, and
//! `cargo test -p cmap-core --test rules` still runs every rule.
//!
//! The modules, in the order of docs/spec-compliance.md: `options`
//! (Options), `connections` (Connections), `wait_queue` (WaitQueue), `pool`
//! (Pool), `checkout` (Checking out), `checkin` (Checking in), `clearing`
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
mod connections;
mod extensions;
mod load_balanced;
mod monitoring;
mod options;
mod pool;
mod wait_queue;

use cmap_core::{CheckOutFailedReason, EstablishError, Event, PoolOptions};
use support::Harness;

fn opts() -> cmap_core::PoolOptionsBuilder {
    PoolOptions::builder()
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
