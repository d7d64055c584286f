//! Where the official spec tests are, and what a test does without them.
//!
//! The official CMAP tests are not part of the repository: they are read
//! where they are published. `CMAP_SPEC_TESTS` names the CMAP-format
//! folder (default: `../shared/spec-tests/cmap-format` beside the
//! workspace) and `CMAP_SPEC_LOGGING_TESTS` the logging one (default: the
//! sibling `logging`); `.ci/run` exports both.
//!
//! A test that needs a folder asks [`cmap_format`] or [`logging`]:
//!
//! - found, it gets the folder and runs;
//! - missing while `CI` is set (non-empty), the test FAILS, naming the
//!   folder: CI must never pass by skipping the official tests;
//! - missing locally, the test passes without running, after writing
//!   `SKIPPED <test>: <why>` straight to stderr. The line bypasses the test
//!   harness's output capture, so it shows in `cargo test`'s output beside
//!   the `ok` of a test that did nothing (libtest has no way to mark a test
//!   skipped at run time; `ignored` is decided at compile time).
//!
//! Each test file that uses this also has a test named
//! `official_spec_files_found_or_tests_skipped`, which reports the same way
//! where the files were looked for, so that the skip is named in the list
//! of tests run even when its line scrolls by.

// Each test file uses only what it needs of this module.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;

/// The CMAP-format folder, or `None` (after saying so) when it is missing
/// outside CI. Panics when it is missing and `CI` is set.
pub fn cmap_format() -> Option<PathBuf> {
    found(
        cmap_format_path(),
        "CMAP_SPEC_TESTS",
        "the CMAP spec tests (cmap-format)",
    )
}

/// The logging folder, as [`cmap_format`].
pub fn logging() -> Option<PathBuf> {
    let path = match std::env::var_os("CMAP_SPEC_LOGGING_TESTS") {
        Some(dir) => PathBuf::from(dir),
        None => cmap_format_path().join("../logging"),
    };
    found(path, "CMAP_SPEC_LOGGING_TESTS", "the CMAP logging spec tests")
}

fn cmap_format_path() -> PathBuf {
    match std::env::var_os("CMAP_SPEC_TESTS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec-tests/cmap-format"),
    }
}

/// Whether this is a CI run: `CI` set and not empty (as CI services and
/// `.ci/run` set it).
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

fn found(path: PathBuf, variable: &str, what: &str) -> Option<PathBuf> {
    if path.is_dir() {
        return Some(path);
    }
    let why = format!("{what} not found at {} (set {variable})", path.display());
    if in_ci() {
        panic!("{why}; CI is set, so this fails instead of skipping");
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // Not `eprintln!`: the harness captures that and shows it only for a
    // failing test.
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {why}");
    None
}
