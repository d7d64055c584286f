//! `spec-runner [--adapter <name>] [--trace <file-substring>] <dir-or-file>...`:
//! runs CMAP test files and prints `PASS`/`FAIL`/`SKIP` per test, then
//! `N passed, N failed` (`N passed, N failed, N skipped` when some were
//! skipped). Exits non-zero on any failure, or when a folder is missing or
//! holds no test file; skipped tests alone do not fail the run.
//!
//! Without `--adapter`, CMAP-format files run on virtual time against the
//! bare core (as `cmap spec` does). With `--adapter tokio` they run in
//! real time against that runtime's async pool, and unified-format files
//! (the logging tests) run too, one line per test.
//!
//! `spec-runner replay [--at SECONDS] [--quiet] FILE` is `cmap replay`.

use std::path::PathBuf;
use std::process::ExitCode;

use cmap_cli::cli;
use spec_runner::adapter::{AdapterKind, WithAdapter};
use spec_runner::report::{self, Summary};
use spec_runner::Driver;
use spec_runner::RunOptions;

const USAGE: &str = "usage: spec-runner [--adapter <name>] [--trace <file-substring>] <dir-or-file>...
       spec-runner replay [--at SECONDS] [--quiet] FILE";

fn main() -> ExitCode {
    let mut options = RunOptions::default();
    let mut adapter = None;
    let mut paths = Vec::new();
    let mut args = std::env::args().skip(1).peekable();
    if args.next_if_eq("replay").is_some() {
        return cli::replay("spec-runner", args).unwrap_or_else(usage);
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
    let (files, broken) = cli::test_files_of("spec-runner", &paths);
    let summary = match adapter {
        None => cli::run_on_core(&files, &options),
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
    cli::finish(summary, broken)
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
                cli::print_outcome(&name, &report::named(&name, &outcome), &outcome);
                summary.add(&outcome);
            }
        }
        summary
    }
}

fn usage() -> ExitCode {
    eprintln!("{USAGE}");
    ExitCode::from(2)
}
