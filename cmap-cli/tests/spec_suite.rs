//! Runs the official CMAP tests through the library, on virtual time: the
//! folder named by `CMAP_SPEC_TESTS`, or else `../shared/spec-tests/
//! cmap-format` beside the workspace. They are not part of the repository
//! (they are read where they are published). Without them, a test fails
//! when `CI` is set, and otherwise passes without running after writing
//! `SKIPPED <test>: <why>` to stderr, visible in `cargo test`'s output
//! (see `spec_files/mod.rs`); `official_spec_files_found_or_tests_skipped`
//! names the outcome in the list of tests.

mod spec_files;

use cmap_cli::{report, RunOptions};

fn spec_dir() -> Option<std::path::PathBuf> {
    spec_files::cmap_format()
}

/// Found: how many files. Missing: fails under CI, else says SKIPPED.
#[test]
fn official_spec_files_found_or_tests_skipped() {
    if let Some(dir) = spec_dir() {
        let files = cmap_cli::test_files(&dir).unwrap();
        assert!(!files.is_empty(), "no test file in {}", dir.display());
    }
}

#[test]
fn every_spec_test_passes() {
    let Some(dir) = spec_dir() else { return };
    let outcomes = cmap_cli::run_dir(&dir, &RunOptions::default()).unwrap();
    let failures: Vec<String> = outcomes
        .iter()
        .filter(|(_, o)| !o.passed())
        .map(|(path, o)| report::line(path, o))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_spec_test_traces_identically_twice() {
    let Some(dir) = spec_dir() else { return };
    let tracing = RunOptions::tracing(".json");
    for path in cmap_cli::test_files(&dir).unwrap() {
        let first = cmap_cli::run_file(&path, &tracing);
        let second = cmap_cli::run_file(&path, &tracing);
        assert!(!first.trace.is_empty(), "{} has no trace", path.display());
        assert_eq!(first, second, "{} ran differently twice", path.display());
    }
}

/// `cmap spec <dir>`, the installed command: a line per file, the totals,
/// success; a missing folder fails it.
#[test]
fn the_cmap_command_runs_them() {
    let Some(dir) = spec_dir() else { return };
    let cmap = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_cmap"))
            .arg("spec")
            .args(args)
            .output()
            .unwrap()
    };
    let out = cmap(&[dir.as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let files = cmap_cli::test_files(&dir).unwrap().len();
    assert!(out.status.success(), "{stdout}");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("PASS ")).count(),
        files,
        "{stdout}"
    );
    assert!(
        stdout.ends_with(&format!("{files} passed, 0 failed\n")),
        "{stdout}"
    );
    let missing = dir.join("no-such-folder");
    let out = cmap(&[dir.as_os_str(), missing.as_os_str()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}
