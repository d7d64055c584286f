//! Runs the official CMAP tests through the library when they are present:
//! the folder named by `CMAP_SPEC_TESTS`, or else `../shared/spec-tests/
//! cmap-format` beside the workspace. They are not part of the repository
//! (they are read where they are published), so without them these tests
//! say so and pass.

use std::path::PathBuf;

use spec_runner::{report, RunOptions};

fn spec_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("CMAP_SPEC_TESTS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec-tests/cmap-format"),
    };
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("CMAP spec tests not found at {}; skipping", dir.display());
        None
    }
}

#[test]
fn every_spec_test_passes() {
    let Some(dir) = spec_dir() else { return };
    let outcomes = spec_runner::run_dir(&dir, &RunOptions::default()).unwrap();
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
    for path in spec_runner::test_files(&dir).unwrap() {
        let first = spec_runner::run_file(&path, &tracing);
        let second = spec_runner::run_file(&path, &tracing);
        assert!(!first.trace.is_empty(), "{} has no trace", path.display());
        assert_eq!(first, second, "{} ran differently twice", path.display());
    }
}
