//! The timeline of one run, for `--trace`: every operation, event and
//! action with its virtual time and the actor that caused it. Lines hold
//! nothing that varies between runs (no real time, no map order), so two
//! traces of the same test can be diffed.

use std::time::{Duration, Instant};

/// Records lines only when enabled; when not, building a line costs nothing.
#[derive(Debug)]
pub struct Trace {
    origin: Instant,
    lines: Option<Vec<String>>,
}

impl Trace {
    /// A trace whose times count from `origin`.
    pub fn new(origin: Instant, enabled: bool) -> Trace {
        Trace {
            origin,
            lines: enabled.then(Vec::new),
        }
    }

    /// Adds a line at `now` for `actor`; `what` runs only when enabled.
    pub fn record(&mut self, now: Instant, actor: &str, what: impl FnOnce() -> String) {
        if let Some(lines) = &mut self.lines {
            let at = millis(now.saturating_duration_since(self.origin));
            lines.push(format!("{at:>10} {actor:<10} {}", what()));
        }
    }

    /// The lines recorded (empty when disabled).
    pub fn into_lines(self) -> Vec<String> {
        self.lines.unwrap_or_default()
    }
}

/// `1234.500ms`, from whole microseconds so formatting is exact.
pub fn millis(d: Duration) -> String {
    let micros = d.as_micros();
    format!("{}.{:03}ms", micros / 1000, micros % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_virtual_time_and_actor() {
        let origin = crate::sim::origin();
        let mut t = Trace::new(origin, true);
        t.record(origin + Duration::from_micros(1_500), "main", || {
            "op ready".into()
        });
        assert_eq!(t.into_lines(), ["   1.500ms main       op ready"]);
        let mut off = Trace::new(origin, false);
        off.record(origin, "main", || unreachable!());
        assert!(off.into_lines().is_empty());
    }
}
