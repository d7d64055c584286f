//! # cmap-cli
//!
//! The `cmap` command (`cargo install cmap-cli`) and the library behind
//! it:
//!
//! - `cmap replay [--at SECONDS] [--quiet] FILE` re-executes a pool's
//!   flight recording (cmap-core's `recorder`) and prints its verdict,
//!   its timeline or the pool at one instant ([`replay`](mod@replay));
//! - `cmap timeline FILE [-o OUT.svg]` draws it against time, as one
//!   self-contained SVG file ([`timeline`]);
//! - `cmap spec <dir-or-file>...` runs the official CMAP test files
//!   (format version 1) against `cmap_core::Pool` on virtual time, with
//!   simulated threads and a simulated endpoint that applies each test's
//!   `failPoint` to connection establishment: the same test gives the same
//!   events, byte for byte, in a few milliseconds of real time.
//!
//! The pieces of the spec engine are kept apart so that another engine
//! (real time, against the runtime adapters: the workspace's
//! `spec-runner --adapter`) reuses all but one:
//!
//! - [`format`](mod@format): the parsed test file; [`pool_options`]: its pool options;
//! - [`endpoint`]: the failPoint applied to handshakes (decides, never
//!   sleeps);
//! - [`observe`]: events and errors in the JSON shape tests are written in;
//! - [`matcher`] and [`verify`]: the format's MATCH and its assertions;
//! - [`sim`]: the virtual-time engine (the only part tied to virtual time);
//! - [`report`]: the lines the command prints; [`cli`]: its arguments.
//!
//! No test is special-cased: a rule that makes a test pass belongs in the
//! core.
#![forbid(unsafe_code)]

pub mod cli;
pub mod endpoint;
pub mod format;
pub mod matcher;
pub mod observe;
pub mod pool_options;
pub mod replay;
pub mod report;
pub mod sim;
mod threads;
pub mod timeline;
pub mod trace;
pub mod verify;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub use format::TestFile;

/// How to run tests.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunOptions {
    /// Record the timeline of the tests whose path contains this text.
    pub trace: Option<String>,
}

impl RunOptions {
    /// Options that trace the files whose path contains `filter`.
    pub fn tracing(filter: impl Into<String>) -> RunOptions {
        RunOptions {
            trace: Some(filter.into()),
        }
    }

    /// Whether the test file at `path` is to be traced.
    pub fn traces(&self, path: &Path) -> bool {
        self.trace
            .as_deref()
            .is_some_and(|f| path.to_string_lossy().contains(f))
    }
}

/// The result of one test file (or one test of a unified-format file):
/// passed, failed (`failure`), or skipped without running (`skipped`).
/// At most one of `failure` and `skipped` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestOutcome {
    /// Why it failed; `None` when it passed or was skipped.
    pub failure: Option<String>,
    /// Why it was skipped, by a rule taken from the spec; `None` when it
    /// ran.
    pub skipped: Option<String>,
    /// Its timeline, when traced (see [`trace`]).
    pub trace: Vec<String>,
}

impl TestOutcome {
    /// A test that ran and passed, with no trace.
    pub fn pass() -> TestOutcome {
        TestOutcome {
            failure: None,
            skipped: None,
            trace: Vec::new(),
        }
    }

    /// Whether the test ran and passed: no failure, and not skipped.
    pub fn passed(&self) -> bool {
        self.failure.is_none() && self.skipped.is_none()
    }

    /// Whether the test failed.
    pub fn is_failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Whether the test was skipped (it did not run).
    pub fn is_skipped(&self) -> bool {
        self.failure.is_none() && self.skipped.is_some()
    }

    /// A test that failed without running (or with no trace).
    pub fn failed(why: String) -> TestOutcome {
        TestOutcome {
            failure: Some(why),
            skipped: None,
            trace: Vec::new(),
        }
    }

    /// A test skipped without running, for `reason`.
    pub fn skipped(reason: String) -> TestOutcome {
        TestOutcome {
            failure: None,
            skipped: Some(reason),
            trace: Vec::new(),
        }
    }
}

/// Whether a test file is in the unified test format (the logging tests),
/// which only a real-time engine runs.
pub fn is_unified(value: &Value) -> bool {
    value.get("schemaVersion").is_some()
}

/// Reads, parses and runs one test file on virtual time.
pub fn run_file(path: &Path, options: &RunOptions) -> TestOutcome {
    let value = match read_json(path) {
        Ok(value) => value,
        Err(e) => return TestOutcome::failed(e),
    };
    if is_unified(&value) {
        return TestOutcome::failed(
            "a unified-format test file (the logging tests): its log messages come from \
             cmap-async's `tracing` output, which the virtual-time engine (the bare core) does \
             not produce; run it with the workspace's `spec-runner --adapter <name>`"
                .into(),
        );
    }
    match TestFile::from_json(&value) {
        Ok(test) => run_test(&test, options.traces(path)),
        Err(e) => TestOutcome::failed(e),
    }
}

/// Reads a file as JSON; the error says why, without the path.
pub fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("invalid JSON: {e}"))
}

/// Runs one parsed test on virtual time, recording its trace if asked.
pub fn run_test(test: &TestFile, trace: bool) -> TestOutcome {
    let options = match pool_options::build(&test.pool_options) {
        Ok(options) => options,
        Err(e) => return TestOutcome::failed(e),
    };
    let (observed, trace) = sim::run(test, options, trace);
    TestOutcome {
        failure: observed.and_then(|o| verify::verify(test, &o)).err(),
        skipped: None,
        trace,
    }
}

/// The `*.json` files of `dir`, sorted by name. A missing or empty folder
/// is an error: a run of nothing must not look like a pass.
pub fn test_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .path();
        if path.extension().is_some_and(|x| x == "json") && path.is_file() {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(format!("no *.json test files in {}", dir.display()));
    }
    files.sort();
    Ok(files)
}

/// Runs every test file of `dir`, in name order.
pub fn run_dir(dir: &Path, options: &RunOptions) -> Result<Vec<(PathBuf, TestOutcome)>, String> {
    Ok(test_files(dir)?
        .into_iter()
        .map(|path| {
            let outcome = run_file(&path, options);
            (path, outcome)
        })
        .collect())
}
