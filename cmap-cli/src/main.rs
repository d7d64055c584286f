//! `cmap`: see what a cmap pool did, and check the core against the spec.
//!
//! ```text
//! cmap replay [--at SECONDS] [--quiet] FILE   replay a flight recording
//! cmap timeline FILE [-o OUT.svg]             draw it against time (SVG)
//! cmap spec [--trace TEXT] DIR-OR-FILE...     run the official CMAP tests
//! ```
//!
//! `replay` and `timeline` exit non-zero when the recording cannot be read or does not
//! replay identically; `spec` when a test fails or a folder is missing or
//! holds no test file. Bad arguments exit with 2.

use std::path::PathBuf;
use std::process::ExitCode;

use cmap_cli::{cli, RunOptions};

const USAGE: &str = "usage: cmap replay [--at SECONDS] [--quiet] FILE
       cmap timeline FILE [-o OUT.svg]
       cmap spec [--trace <file-substring>] <dir-or-file>...";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let done = match args.next().as_deref() {
        Some("replay") => cli::replay("cmap", args),
        Some("timeline") => cli::timeline("cmap", args),
        Some("spec") => spec(args),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => None,
    };
    done.unwrap_or_else(|| {
        eprintln!("{USAGE}");
        ExitCode::from(2)
    })
}

/// `cmap spec`: every file on virtual time against the core.
fn spec(mut args: impl Iterator<Item = String>) -> Option<ExitCode> {
    let mut options = RunOptions::default();
    let mut paths = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--trace" => options = RunOptions::tracing(args.next()?),
            _ if arg.starts_with('-') => return None,
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    if paths.is_empty() {
        return None;
    }
    let (files, broken) = cli::test_files_of("cmap", &paths);
    Some(cli::finish(cli::run_on_core(&files, &options), broken))
}
