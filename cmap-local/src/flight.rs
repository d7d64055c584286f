//! The flight recorder as this driver reports an incident: when the core
//! finds its own state inconsistent (a bug of the pool), the recording
//! that leads there is logged at ERROR, once, and written to the
//! builder's folder for `spec-runner replay` where one was named.

use std::cell::Cell;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

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
        let why = recording.incident().unwrap_or("unknown");
        let written = self.dir.as_ref().map(|dir| {
            let stamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis();
            let name = format!(
                "cmap-{}-{stamp}.jsonl",
                address.to_string().replace(['/', ':'], "_")
            );
            let path = dir.join(name);
            std::fs::File::create(&path)
                .map(std::io::BufWriter::new)
                .and_then(|f| recording.write_to(f))
                .map(|()| path)
        });
        match written {
            Some(Ok(path)) => {
                tracing::error!(target: cmap_async::LOG_TARGET, %address, incident = why, recording = %path.display(),
                "the pool found its state inconsistent; its flight recording was written (replay it with `spec-runner replay`)")
            }
            Some(Err(error)) => {
                tracing::error!(target: cmap_async::LOG_TARGET, %address, incident = why, %error,
                "the pool found its state inconsistent; writing its flight recording failed")
            }
            None => tracing::error!(target: cmap_async::LOG_TARGET, %address, incident = why,
                "the pool found its state inconsistent; `Pool::recording` holds its flight recording"),
        }
    }
}
