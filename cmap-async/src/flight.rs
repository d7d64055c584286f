//! The pool's flight recorder (cmap-core's `recorder`), as the builder
//! turns it on and the pool reports an incident: when the core finds its
//! own state inconsistent (a bug of the pool), the recording that leads
//! there is logged at ERROR and, where the builder named a folder,
//! written there for `spec-runner replay`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use cmap_core::{Address, Recording};

/// The flight recorder's settings and whether its incident was reported.
/// Part of the [driver layer](crate::driver).
pub struct Flight {
    /// Entries kept (see `cmap_core::Pool::start_recording`).
    pub capacity: usize,
    /// Where an incident's recording is written.
    dir: Option<PathBuf>,
    /// An incident is reported once: the recording stops at it.
    reported: AtomicBool,
}

impl Flight {
    /// A recorder of `capacity` entries, writing an incident's recording
    /// in `dir` (see [`report_incident`]).
    pub fn new(capacity: usize, dir: Option<PathBuf>) -> Flight {
        Flight {
            capacity,
            dir,
            reported: AtomicBool::new(false),
        }
    }

    /// The recording of an incident not reported yet, under the lock.
    pub fn take_incident<C>(&self, core: &cmap_core::Pool<C>) -> Option<Recording> {
        core.recording_incident()?;
        if self.reported.swap(true, Ordering::Relaxed) {
            return None;
        }
        core.recording()
    }

    /// Logs the incident and writes its recording, after the lock.
    pub fn report(&self, address: &Address, recording: &Recording) {
        report_incident(address, recording, self.dir.as_deref());
    }
}

/// Reports a flight-recorder incident of the pool at `address` (the core
/// found its own state inconsistent: a bug of the pool): logs it at ERROR
/// (target [`LOG_TARGET`](crate::LOG_TARGET)) and, given a folder, writes
/// the recording there as `cmap-<address>-<unix ms>.jsonl` for
/// `spec-runner replay`. What every driver in this workspace calls once
/// per incident; a driver of its own may call it too.
pub fn report_incident(address: &Address, recording: &Recording, dir: Option<&Path>) {
    let why = recording.incident().unwrap_or("unknown");
    let written = dir.map(|dir| {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let name = format!(
            "cmap-{}-{stamp}.jsonl",
            address.to_string().replace(['/', ':'], "_")
        );
        let path = dir.join(name);
        let file = std::fs::File::create(&path).map(std::io::BufWriter::new);
        file.and_then(|f| recording.write_to(f)).map(|()| path)
    });
    match written {
        Some(Ok(path)) => tracing::error!(
            target: crate::logging::LOG_TARGET,
            %address,
            incident = why,
            recording = %path.display(),
            "the pool found its state inconsistent; its flight recording was written (replay it with `spec-runner replay`)"
        ),
        Some(Err(error)) => tracing::error!(
            target: crate::logging::LOG_TARGET,
            %address,
            incident = why,
            %error,
            "the pool found its state inconsistent; writing its flight recording failed"
        ),
        None => tracing::error!(
            target: crate::logging::LOG_TARGET,
            %address,
            incident = why,
            "the pool found its state inconsistent; `Pool::recording` holds its flight recording"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use cmap_core::{Address, Pool, PoolOptions, Recording};

    use super::Flight;

    /// An incident's recording lands in the folder, named after the
    /// address, and reads back as the same recording.
    #[test]
    fn an_incident_is_written_where_the_builder_said() {
        let dir = std::env::temp_dir().join(format!("cmap-flight-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let now = Instant::now();
        let options = PoolOptions::builder().max_pool_size(1).build().unwrap();
        let address = Address::new("db", 27017);
        let mut core: Pool<()> = Pool::new(now, address.clone(), options);
        while core.poll_output().is_some() {}
        core.start_recording(now, 100);
        core.handle_ready(now + Duration::from_millis(1)).unwrap();
        let recording = core.recording().unwrap();
        Flight::new(100, Some(dir.clone())).report(&address, &recording);
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("cmap-db_27017-") && name.ends_with(".jsonl"),
            "{name}"
        );
        let read =
            Recording::read_from(std::io::BufReader::new(std::fs::File::open(&files[0]).unwrap())).unwrap();
        assert_eq!(read, recording);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
