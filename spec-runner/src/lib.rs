//! # spec-runner
//!
//! Runs the official CMAP test files against every driver of this
//! workspace, in real time (`--adapter <name>`): the async pool of
//! `cmap-async` on each runtime, cmap-local (`--adapter local`), the
//! logging tests (unified test format, [`logging_suite`]) too. Without
//! `--adapter` it runs them on virtual time against the bare core, with the
//! engine of the published `cmap-cli` crate (the `cmap spec` command),
//! whose pieces it re-exports: [`format`](mod@format), [`pool_options`],
//! [`endpoint`], [`observe`], [`matcher`], [`verify`], [`sim`], [`trace`],
//! [`report`] and [`replay`](mod@replay).
//!
//! Both real-time engines are generic over a [`Driver`] (the conformance
//! kit, [`driver`]): a driver built on `cmap-core` outside this workspace
//! implements it and calls [`run_file_on`].
//!
//! No test is special-cased: a rule that makes a test pass belongs in the
//! core.
#![forbid(unsafe_code)]

pub mod adapter;
pub mod blocking_driver;
pub mod driver;
pub mod local_driver;
pub mod log_capture;
pub mod logging_suite;
pub mod realtime;
pub mod unified_matcher;

pub use cmap_cli::{endpoint, format, matcher, observe, pool_options, replay, report, sim, trace, verify};
pub use cmap_cli::{run_dir, run_file, run_test, test_files, RunOptions, TestFile, TestOutcome};

use std::path::Path;

use cmap_cli::read_json;

pub use adapter::Adapter;
pub use driver::{Driver, DriverPool, PoolSpec};

/// Reads and runs one test file in real time on `driver` (a cmap-async
/// [`Adapter`], cmap-local's [`local_driver::LocalDriver`], or a driver of
/// your own: see [`driver`]): a CMAP-format file gives one outcome named
/// after the file, a unified-format file (the logging tests) one per
/// test, named `file: description`.
pub fn run_file_on<D: Driver>(driver: &D, path: &Path, options: &RunOptions) -> Vec<(String, TestOutcome)> {
    let name = path
        .file_name()
        .unwrap_or(path.as_os_str())
        .to_string_lossy()
        .into_owned();
    let value = match read_json(path) {
        Ok(value) => value,
        Err(e) => return vec![(name, TestOutcome::failed(e))],
    };
    if logging_suite::is_unified(&value) {
        return logging_suite::run_file(driver, &name, &value);
    }
    let outcome = match TestFile::from_json(&value) {
        Ok(test) => run_test_on(driver, &test, options.traces(path)),
        Err(e) => TestOutcome::failed(e),
    };
    vec![(name, outcome)]
}

/// Runs one parsed CMAP test in real time on `driver`, recording its
/// trace (real times) if asked.
pub fn run_test_on<D: Driver>(driver: &D, test: &TestFile, trace: bool) -> TestOutcome {
    let options = match pool_options::build(&test.pool_options) {
        Ok(options) => options,
        Err(e) => return TestOutcome::failed(e),
    };
    let (observed, trace) = realtime::run(driver, test, options, trace);
    TestOutcome {
        failure: observed.and_then(|o| verify::verify(test, &o)).err(),
        skipped: None,
        trace,
    }
}
