//! The flight recorder as this driver reports an incident: when the core
//! finds its own state inconsistent (a bug of the pool), the recording
//! that leads there is logged at ERROR, once, and written to the
//! builder's folder for `spec-runner replay` where one was named.

use std::cell::Cell;
use std::path::PathBuf;

use cmap_core::{Address, Pool};

pub(crate) struct Flight {
    /// Entries kept (see `cmap_core::Pool::start_recording`).
    pub(crate) capacity: usize,
    dir: Option<PathBuf>,
    reported: Cell<bool>,
}

impl Flight {
    pub(crate) fn new(capacity: usize, dir: Option<PathBuf>) -> Flight {
        Flight {
            capacity,
            dir,
            reported: Cell::new(false),
        }
    }

    /// After each input: an incident not reported yet is reported.
    pub(crate) fn check<C>(&self, core: &Pool<C>, address: &Address) {
        if core.recording_incident().is_none() || self.reported.replace(true) {
            return;
        }
        let Some(recording) = core.recording() else { return };
        cmap_async::report_incident(address, &recording, self.dir.as_deref());
    }
}
