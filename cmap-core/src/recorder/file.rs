//! A recording as a value and as a file: JSON lines.
//!
//! ```text
//! {"format":"cmap-recording","version":4,"incident":null,"inputs":2,"outputs":3}
//! {"snapshot":{ the pool's state, instants in ns from the recording's zero }}
//! {"at":1500000,"input":{"CheckOut":{"deadline":null,"direct":true}}}
//! {"output":"Served { waiter: WaiterId(7), connection: ConnectionId(3) }"}
//! ```
//!
//! The first line names the format and its version; the second is the
//! pool when the recording begins; then each input with its instant (in
//! nanoseconds from the recording's zero, the instant recording started)
//! is followed by the text of each output it caused, in order. Nothing of
//! a connection is kept, only the pool's bookkeeping: ids, generations,
//! instants, and error messages as the pool's events already carry them.

use std::io::{self, BufRead, Write};
use std::sync::OnceLock;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::codec::with_base;
use super::{Recorder, Segment};

/// The name on a recording's first line.
const FORMAT: &str = "cmap-recording";
/// The version of the format this crate writes and reads. 2: the wait
/// queue's snapshot keeps its deadlines in its entries (a chain) instead of
/// a separate FIFO. 3: the snapshot keeps the establishment pace, and the
/// options the adaptive one. 4: an adaptive pace's limit may be 1, under
/// its minimum (a single probe while the server refuses).
pub(crate) const VERSION: u32 = 4;

/// What a pool's flight recorder held: a snapshot of the pool, then every
/// input since with its instant and the outputs it caused. Write it with
/// [`write_to`](Self::write_to), read it back with
/// [`read_from`](Self::read_from), and re-execute it with
/// [`replay`](Self::replay).
///
/// Taking one from a pool copies the recorder's entries as they are (plain
/// data: a memory copy, done under a driver's lock); they are turned into
/// lines on first use, outside it.
#[derive(Debug, Clone)]
pub struct Recording {
    pub(crate) incident: Option<String>,
    pub(crate) snapshot: serde_json::Value,
    /// The entries as recorded, until `lines` is first asked for.
    entries: Option<Entries>,
    lines: OnceLock<Vec<Line>>,
}

/// A copy of a recorder's segments and the instant its lines count from.
#[derive(Debug, Clone)]
struct Entries {
    base: Instant,
    segments: Vec<Segment>,
}

/// Two recordings are equal when they hold the same lines.
impl PartialEq for Recording {
    fn eq(&self, other: &Recording) -> bool {
        self.incident == other.incident && self.snapshot == other.snapshot && self.lines() == other.lines()
    }
}

/// One line after the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Line {
    Input { at: i64, input: serde_json::Value },
    Output { output: String },
}

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    incident: Option<String>,
    inputs: usize,
    outputs: usize,
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    snapshot: serde_json::Value,
}

/// A recording that cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// Reading failed.
    #[error("reading the recording: {0}")]
    Io(#[from] io::Error),
    /// A line is not what the format says.
    #[error("line {line} of the recording: {message}")]
    Format {
        /// 1-based.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// Written by a version of the format this crate does not read.
    #[error("recording format version {found}; this crate reads version {VERSION}")]
    Version {
        /// The file's.
        found: u32,
    },
}

impl Recording {
    pub(crate) fn of(recorder: &Recorder) -> Option<Recording> {
        let first = recorder.segments().next()?;
        Some(Recording {
            incident: recorder.incident.clone(),
            snapshot: first.snapshot.clone(),
            entries: Some(Entries {
                base: recorder.base,
                segments: recorder.segments().cloned().collect(),
            }),
            lines: OnceLock::new(),
        })
    }

    /// Every line after the snapshot, made from the entries on first use.
    pub(crate) fn lines(&self) -> &[Line] {
        self.lines.get_or_init(|| match &self.entries {
            Some(Entries { base, segments }) => {
                with_base(*base, || segments.iter().flat_map(|s| s.lines()).collect())
            }
            None => Vec::new(),
        })
    }

    /// Inputs recorded.
    pub fn inputs(&self) -> usize {
        self.lines()
            .iter()
            .filter(|l| matches!(l, Line::Input { .. }))
            .count()
    }

    /// Outputs recorded.
    pub fn outputs(&self) -> usize {
        self.lines().len() - self.inputs()
    }

    /// Why the recorder stopped on its own, if it did: the pool's state
    /// failed its invariant check (see `Pool::recording_incident`).
    pub fn incident(&self) -> Option<&str> {
        self.incident.as_deref()
    }

    /// Writes the recording as JSON lines (see the module doc).
    pub fn write_to(&self, mut out: impl Write) -> io::Result<()> {
        let header = Header {
            format: FORMAT.to_owned(),
            version: VERSION,
            incident: self.incident.clone(),
            inputs: self.inputs(),
            outputs: self.outputs(),
        };
        let snapshot = Snapshot {
            snapshot: self.snapshot.clone(),
        };
        serde_json::to_writer(&mut out, &header)?;
        out.write_all(b"\n")?;
        serde_json::to_writer(&mut out, &snapshot)?;
        out.write_all(b"\n")?;
        for line in self.lines() {
            serde_json::to_writer(&mut out, line)?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }

    /// Reads a recording written by [`write_to`](Self::write_to).
    ///
    /// # Errors
    ///
    /// [`RecordingError`] when reading fails, a line is malformed, or the
    /// format's version is not this crate's.
    pub fn read_from(input: impl BufRead) -> Result<Recording, RecordingError> {
        let mut lines = input.lines().enumerate();
        let mut next = |what: &str, line: usize| -> Result<(usize, String), RecordingError> {
            match lines.next() {
                Some((_, text)) => Ok((line, text?)),
                None => Err(RecordingError::Format {
                    line,
                    message: format!("the file ends before its {what}"),
                }),
            }
        };
        let parse_error = |line: usize, e: serde_json::Error| RecordingError::Format {
            line,
            message: e.to_string(),
        };
        let (n, text) = next("header", 1)?;
        let header: Header = serde_json::from_str(&text).map_err(|e| parse_error(n, e))?;
        if header.format != FORMAT {
            return Err(RecordingError::Format {
                line: n,
                message: format!("not a {FORMAT} file (format {:?})", header.format),
            });
        }
        if header.version != VERSION {
            return Err(RecordingError::Version {
                found: header.version,
            });
        }
        let (n, text) = next("snapshot", 2)?;
        let Snapshot { snapshot } = serde_json::from_str(&text).map_err(|e| parse_error(n, e))?;
        let mut parsed = Vec::new();
        for (n, line) in lines {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            parsed.push(serde_json::from_str(&line).map_err(|e| parse_error(n + 1, e))?);
        }
        Ok(Recording {
            incident: header.incident,
            snapshot,
            entries: None,
            lines: OnceLock::from(parsed),
        })
    }
}
