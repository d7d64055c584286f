//! `cmap replay [--at SECONDS] [--quiet] FILE`: re-executes a flight
//! recording (cmap-core's `recorder`) on the core, checks that every
//! output is the recorded one, and prints the pool's timeline, or its
//! state at one instant.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::time::Instant;

use cmap_core::Recording;

/// What to print besides the verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Show {
    /// Every input with the pool's counts after it and its outputs, then
    /// the pool at the end.
    Timeline,
    /// The pool as it was at this many seconds from the recording's zero,
    /// after the last few inputs up to then.
    At(f64),
    /// The verdict only.
    Nothing,
}

/// Inputs shown before the state with `--at`.
const STEPS_BEFORE_STATE: usize = 20;

/// Replays the recording in `path`; returns the report, or why the
/// recording could not be read or did not replay identically.
pub fn replay_file(path: &Path, show: Show) -> Result<String, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let recording =
        Recording::read_from(BufReader::new(file)).map_err(|e| format!("{}: {e}", path.display()))?;
    let until = match show {
        Show::At(seconds) => Some((seconds * 1e9) as i64),
        Show::Timeline | Show::Nothing => None,
    };
    // Any instant will do as the replay's origin: no output depends on it.
    #[allow(clippy::disallowed_methods)]
    let origin = Instant::now();
    let replay = recording
        .replay_until(origin, until)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut report = match show {
        Show::Timeline => format!("{replay}\n{}", replay.state()),
        Show::At(_) => {
            let steps = replay.steps();
            let recent = &steps[steps.len().saturating_sub(STEPS_BEFORE_STATE)..];
            let mut text: String = recent
                .iter()
                .map(|s| format!("{} {}\n", cmap_core::Seconds(s.at), s.input))
                .collect();
            text.push_str(replay.state());
            text
        }
        Show::Nothing => String::new(),
    };
    if let Some(incident) = recording.incident() {
        report.push_str(&format!("incident recorded: {incident}\n"));
    }
    report.push_str(&format!(
        "{} inputs replayed, {} outputs identical to the recording\n",
        replay.steps().len(),
        replay.steps().iter().map(|s| s.outputs.len()).sum::<usize>()
    ));
    Ok(report)
}
