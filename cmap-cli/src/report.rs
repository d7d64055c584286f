//! What the binary prints: one line per test file, then the totals.

use std::fmt;
use std::path::Path;

use crate::TestOutcome;

/// `PASS <file>`, `FAIL <file>: <reason>` or `SKIP <file>: <reason>`, on
/// one line.
pub fn line(path: &Path, outcome: &TestOutcome) -> String {
    let name = path.file_name().unwrap_or(path.as_os_str()).to_string_lossy();
    named(&name, outcome)
}

/// `PASS <name>`, `FAIL <name>: <reason>` or `SKIP <name>: <reason>`, on
/// one line, for a test named otherwise than by its file (a test of a
/// unified-format file).
pub fn named(name: &str, outcome: &TestOutcome) -> String {
    match (&outcome.failure, &outcome.skipped) {
        (Some(why), _) => format!("FAIL {name}: {}", why.replace('\n', " ")),
        (None, Some(why)) => format!("SKIP {name}: {}", why.replace('\n', " ")),
        (None, None) => format!("PASS {name}"),
    }
}

/// Counts of passed, failed and skipped tests; prints as
/// `N passed, N failed`, or `N passed, N failed, N skipped` when some were
/// skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Tests that passed.
    pub passed: usize,
    /// Tests that failed.
    pub failed: usize,
    /// Tests skipped without running.
    pub skipped: usize,
}

impl Summary {
    /// Counts one outcome.
    pub fn add(&mut self, outcome: &TestOutcome) {
        if outcome.is_failed() {
            self.failed += 1;
        } else if outcome.is_skipped() {
            self.skipped += 1;
        } else {
            self.passed += 1;
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} passed, {} failed", self.passed, self.failed)?;
        if self.skipped > 0 {
            write!(f, ", {} skipped", self.skipped)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_summary() {
        let pass = TestOutcome::pass();
        let fail = TestOutcome::failed("event 0:\nmismatch".into());
        let skip = TestOutcome::skipped("uses x,\na removed option".into());
        assert_eq!(line(Path::new("/x/a.json"), &pass), "PASS a.json");
        assert_eq!(line(Path::new("b.json"), &fail), "FAIL b.json: event 0: mismatch");
        assert_eq!(
            named("c.json: t", &skip),
            "SKIP c.json: t: uses x, a removed option"
        );
        assert!(pass.passed() && !pass.is_failed() && !pass.is_skipped());
        assert!(!fail.passed() && fail.is_failed() && !fail.is_skipped());
        assert!(!skip.passed() && !skip.is_failed() && skip.is_skipped());
        let mut s = Summary::default();
        s.add(&pass);
        s.add(&fail);
        assert_eq!(s.to_string(), "1 passed, 1 failed");
        s.add(&skip);
        assert_eq!(s.to_string(), "1 passed, 1 failed, 1 skipped");
        assert_eq!(s.skipped, 1);
    }
}
