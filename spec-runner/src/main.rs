//! `spec-runner [--adapter <name>] [--trace <file-substring>] <dir-or-file>...`:
//! runs CMAP test files and prints `PASS`/`FAIL`/`SKIP` per test, then
//! `N passed, N failed` (`N passed, N failed, N skipped` when some were
//! skipped). Exits non-zero on any failure, or when a folder is missing or
//! holds no test file; skipped tests alone do not fail the run.
//!
//! Without `--adapter`, CMAP-format files run on virtual time against the
//! bare core. With `--adapter tokio` they run in real time against that
//! runtime's async pool, and unified-format files (the logging tests) run
//! too, one line per test.
//!
//! `spec-runner replay [--at SECONDS] [--quiet] FILE` re-executes a pool's
//! flight recording instead (see `spec_runner::replay`).

use std::path::PathBuf;
use std::process::ExitCode;

use spec_runner::adapter::{AdapterKind, WithAdapter};
use spec_runner::replay::{replay_file, Show};
use spec_runner::report::{self, Summary};
use spec_runner::Driver;
use spec_runner::{RunOptions, TestOutcome};

const USAGE: &str = "usage: spec-runner [--adapter <name>] [--trace <file-substring>] <dir-or-file>...
       spec-runner replay [--at SECONDS] [--quiet] FILE";

fn main() -> ExitCode {
    let mut options = RunOptions::default();
    let mut adapter = None;
    let mut paths = Vec::new();
    let mut args = std::env::args().skip(1).peekable();
    if args.next_if_eq("replay").is_some() {
        return replay(args);
    }
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--trace" => match args.next() {
                Some(filter) => options = RunOptions::tracing(filter),
                None => return usage(),
            },
            "--adapter" => match args.next().as_deref().map(AdapterKind::from_name) {
                Some(Some(kind)) => adapter = Some(kind),
                _ => {
                    eprintln!("spec-runner: --adapter takes one of: {}", AdapterKind::names());
                    return usage();
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}\nadapters: {}", AdapterKind::names());
                return ExitCode::SUCCESS;
            }
            _ if arg.starts_with('-') => return usage(),
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    if paths.is_empty() {
        return usage();
    }
    let mut files = Vec::new();
    let mut broken = false;
    for path in paths {
        let found = match path.is_dir() {
            true => spec_runner::test_files(&path),
            false if path.is_file() => Ok(vec![path]),
            false => Err(format!("{} does not exist", path.display())),
        };
        match found {
            Ok(found) => files.extend(found),
            Err(e) => {
                eprintln!("spec-runner: {e}");
                broken = true;
            }
        }
    }
    let summary = match adapter {
        None => {
            let mut summary = Summary::default();
            for file in &files {
                let outcome = spec_runner::run_file(file, &options);
                print_outcome(
                    &file.display().to_string(),
                    &report::line(file, &outcome),
                    &outcome,
                );
                summary.add(&outcome);
            }
            summary
        }
        Some(kind) => match kind.with(RunAll {
            files: &files,
            options: &options,
        }) {
            Ok(summary) => summary,
            Err(e) => {
                eprintln!("spec-runner: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    println!("{summary}");
    match broken || summary.failed > 0 {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    }
}

/// Runs every file on one adapter, printing as it goes.
struct RunAll<'a> {
    files: &'a [PathBuf],
    options: &'a RunOptions,
}

impl WithAdapter<Summary> for RunAll<'_> {
    fn call<D: Driver>(self, driver: &D) -> Summary {
        let mut summary = Summary::default();
        for file in self.files {
            for (name, outcome) in spec_runner::run_file_on(driver, file, self.options) {
                print_outcome(&name, &report::named(&name, &outcome), &outcome);
                summary.add(&outcome);
            }
        }
        summary
    }
}

fn print_outcome(name: &str, line: &str, outcome: &TestOutcome) {
    if !outcome.trace.is_empty() {
        println!("--- trace {name}");
        outcome.trace.iter().for_each(|l| println!("{l}"));
    }
    println!("{line}");
}

/// `spec-runner replay`: exits non-zero when the recording cannot be read
/// or does not replay identically.
fn replay(mut args: impl Iterator<Item = String>) -> ExitCode {
    let mut show = Show::Timeline;
    let mut file = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--at" => match args.next().and_then(|s| s.parse().ok()) {
                Some(seconds) => show = Show::At(seconds),
                None => return usage(),
            },
            "--quiet" => show = Show::Nothing,
            _ if arg.starts_with('-') || file.is_some() => return usage(),
            _ => file = Some(PathBuf::from(arg)),
        }
    }
    let Some(file) = file else { return usage() };
    match replay_file(&file, show) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("spec-runner: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> ExitCode {
    eprintln!("{USAGE}");
    ExitCode::from(2)
}
