//! The command line, shared by `cmap` and the workspace's `spec-runner`:
//! the arguments of each subcommand and what it prints. Every function
//! takes the program's name for its error lines.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cmap_core::Recording;

use crate::replay::{replay_file, Show};
use crate::report::{self, Summary};
use crate::timeline::Timeline;
use crate::{RunOptions, TestOutcome};

/// The test files named by `paths` (a folder gives its `*.json` files),
/// and whether one of them was missing or empty (said on stderr).
pub fn test_files_of(program: &str, paths: &[PathBuf]) -> (Vec<PathBuf>, bool) {
    let mut files = Vec::new();
    let mut broken = false;
    for path in paths {
        let found = match path.is_dir() {
            true => crate::test_files(path),
            false if path.is_file() => Ok(vec![path.clone()]),
            false => Err(format!("{} does not exist", path.display())),
        };
        match found {
            Ok(found) => files.extend(found),
            Err(e) => {
                eprintln!("{program}: {e}");
                broken = true;
            }
        }
    }
    (files, broken)
}

/// Runs every file on virtual time against the core, printing a line per
/// file (its trace before it, when traced).
pub fn run_on_core(files: &[PathBuf], options: &RunOptions) -> Summary {
    let mut summary = Summary::default();
    for file in files {
        let outcome = crate::run_file(file, options);
        print_outcome(
            &file.display().to_string(),
            &report::line(file, &outcome),
            &outcome,
        );
        summary.add(&outcome);
    }
    summary
}

/// Prints a test's trace, if any, then its line.
pub fn print_outcome(name: &str, line: &str, outcome: &TestOutcome) {
    if !outcome.trace.is_empty() {
        println!("--- trace {name}");
        outcome.trace.iter().for_each(|l| println!("{l}"));
    }
    println!("{line}");
}

/// Prints the totals; fails on a failed test or a missing folder.
pub fn finish(summary: Summary, broken: bool) -> ExitCode {
    println!("{summary}");
    match broken || summary.failed > 0 {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    }
}

/// `replay [--at SECONDS] [--quiet] FILE`: exits non-zero when the
/// recording cannot be read or does not replay identically, and with 2
/// (`None`) on bad arguments.
pub fn replay(program: &str, mut args: impl Iterator<Item = String>) -> Option<ExitCode> {
    let mut show = Show::Timeline;
    let mut file = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--at" => show = Show::At(args.next()?.parse().ok()?),
            "--quiet" => show = Show::Nothing,
            _ if arg.starts_with('-') || file.is_some() => return None,
            _ => file = Some(PathBuf::from(arg)),
        }
    }
    Some(match replay_file(&file?, show) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{program}: {e}");
            ExitCode::FAILURE
        }
    })
}

/// `timeline FILE [-o OUT]`: the recording's picture, written to `OUT`
/// (by default FILE with the extension `.svg`). Exits non-zero when the
/// recording cannot be read or does not replay identically, and with 2
/// (`None`) on bad arguments.
pub fn timeline(program: &str, mut args: impl Iterator<Item = String>) -> Option<ExitCode> {
    let mut file = None;
    let mut out = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-o" | "--output" => out = Some(PathBuf::from(args.next()?)),
            _ if arg.starts_with('-') || file.is_some() => return None,
            _ => file = Some(PathBuf::from(arg)),
        }
    }
    let file = file?;
    let out = out.unwrap_or_else(|| file.with_extension("svg"));
    Some(match draw(&file, &out) {
        Ok(()) => {
            println!("{}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{program}: {e}");
            ExitCode::FAILURE
        }
    })
}

fn draw(file: &Path, out: &Path) -> Result<(), String> {
    let name = |p: &Path| p.display().to_string();
    let reader = File::open(file).map_err(|e| format!("{}: {e}", name(file)))?;
    let recording =
        Recording::read_from(BufReader::new(reader)).map_err(|e| format!("{}: {e}", name(file)))?;
    let timeline = Timeline::of(&recording).map_err(|e| format!("{}: {e}", name(file)))?;
    let title = file
        .file_name()
        .map_or(name(file), |f| f.to_string_lossy().into_owned());
    std::fs::write(out, timeline.to_svg(&title)).map_err(|e| format!("{}: {e}", name(out)))
}
