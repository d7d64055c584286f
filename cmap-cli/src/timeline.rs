//! `cmap timeline FILE [-o OUT.svg]`: a recording's replay drawn against
//! time, as one self-contained SVG file (no script, no server; any browser
//! opens it).
//!
//! Lanes, top to bottom: connections by state (in use, available,
//! pending, stacked); checkouts waiting; checkouts failed, by reason;
//! establishments failed, with their labels; and the establishment pace
//! where the adaptive pace is on. Clears (a generation bumped) and the
//! pool's state changes are vertical lines across every lane. Every mark
//! has a `<title>`, which a browser shows on hover: the instant and the
//! input that caused it.
//!
//! The picture's data is in the file too, as JSON in its `<metadata>`
//! element ([`Timeline::to_json`]), for tools and tests to read back.

use std::fmt::Write as _;
use std::time::Instant;

use cmap_core::{EstablishErrorKind, PoolState, Recording, Seconds, Step};
use serde_json::{json, Value};

/// The pool's counts after one input (only those that changed a count are
/// kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Nanoseconds from the recording's zero.
    pub at: i64,
    /// Connections being established.
    pub pending: usize,
    /// Idle connections.
    pub available: usize,
    /// Checked-out connections.
    pub in_use: usize,
    /// Checkouts in the wait queue.
    pub waiting: usize,
    /// The pool's generation.
    pub generation: u32,
    /// How many connections may be established at once.
    pub pace: u32,
}

/// What a mark on the timeline shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkKind {
    /// The generation went up: the pool was cleared.
    Clear {
        /// The new generation.
        generation: u32,
    },
    /// The pool became paused, ready or closed.
    State(PoolState),
    /// A checkout failed.
    CheckOutFailed {
        /// The error's variant: `WaitQueueTimeout`, `PoolCleared`,
        /// `ConnectionError`, `PoolClosed`...
        reason: String,
    },
    /// Establishing a connection failed.
    EstablishFailed {
        /// The connection's id.
        id: u64,
        /// The error's labels (`SystemOverloadedError`...), by its kind.
        labels: Vec<&'static str>,
        /// The error's message.
        message: String,
    },
}

/// One mark: what happened, when, and the input that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// Nanoseconds from the recording's zero.
    pub at: i64,
    /// What it shows.
    pub kind: MarkKind,
    /// The input, as the recording writes it.
    pub input: String,
}

/// A replayed recording, as the picture shows it.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// The counts, at each input that changed one.
    pub samples: Vec<Sample>,
    /// Clears, state changes and failures, in order.
    pub marks: Vec<Mark>,
    /// Whether the adaptive establishment pace is on (its lane is drawn).
    pub adaptive_pace: bool,
}

impl Timeline {
    /// Replays `recording` (every output must be the recorded one) and
    /// reads its timeline.
    ///
    /// # Errors
    ///
    /// Why the recording does not replay.
    pub fn of(recording: &Recording) -> Result<Timeline, String> {
        // Any instant will do as the replay's origin: no output depends on it.
        #[allow(clippy::disallowed_methods)]
        let replay = recording.replay(Instant::now()).map_err(|e| e.to_string())?;
        let adaptive_pace = replay.state().contains("establishment pace:");
        Ok(Timeline::from_steps(replay.steps(), adaptive_pace))
    }

    /// The timeline of replayed steps.
    pub fn from_steps(steps: &[Step], adaptive_pace: bool) -> Timeline {
        let mut samples: Vec<Sample> = Vec::new();
        let mut marks = Vec::new();
        let mut last: Option<&Step> = None;
        for step in steps {
            let s = step.status;
            let sample = Sample {
                at: step.at,
                pending: s.pending,
                available: s.available,
                in_use: s.in_use,
                waiting: s.waiting,
                generation: s.generation,
                pace: step.pace,
            };
            if samples.last().is_none_or(|l| Sample { at: l.at, ..sample } != *l) {
                samples.push(sample);
            }
            let mark = |kind| Mark {
                at: step.at,
                kind,
                input: step.input.clone(),
            };
            if let Some(before) = last {
                if s.generation > before.status.generation {
                    marks.push(mark(MarkKind::Clear {
                        generation: s.generation,
                    }));
                }
                if s.state != before.status.state {
                    marks.push(mark(MarkKind::State(s.state)));
                }
            }
            if let Some(failed) = establish_failure(&step.input) {
                marks.push(mark(failed));
            }
            for output in &step.outputs {
                if let Some(reason) = check_out_failure(output) {
                    marks.push(mark(MarkKind::CheckOutFailed { reason }));
                }
            }
            last = Some(step);
        }
        Timeline {
            samples,
            marks,
            adaptive_pace,
        }
    }

    /// The data of the picture: `samples` as arrays
    /// `[at, pending, available, in_use, waiting, generation, pace]`,
    /// `marks` as objects with `at`, `kind` (`clear`, `state`,
    /// `checkout_failed`, `establish_failed`), their details and `input`;
    /// instants in nanoseconds from the recording's zero.
    pub fn to_json(&self) -> Value {
        let samples: Vec<Value> = self
            .samples
            .iter()
            .map(|s| {
                json!([
                    s.at,
                    s.pending,
                    s.available,
                    s.in_use,
                    s.waiting,
                    s.generation,
                    s.pace
                ])
            })
            .collect();
        let marks: Vec<Value> = self
            .marks
            .iter()
            .map(|m| {
                let mut v = match &m.kind {
                    MarkKind::Clear { generation } => json!({"kind": "clear", "generation": generation}),
                    MarkKind::State(state) => json!({"kind": "state", "state": format!("{state:?}")}),
                    MarkKind::CheckOutFailed { reason } => {
                        json!({"kind": "checkout_failed", "reason": reason})
                    }
                    MarkKind::EstablishFailed { id, labels, message } => json!({
                        "kind": "establish_failed", "id": id, "labels": labels, "message": message
                    }),
                };
                v["at"] = m.at.into();
                v["input"] = m.input.clone().into();
                v
            })
            .collect();
        json!({
            "format": "cmap-timeline",
            "version": 1,
            "columns": ["at", "pending", "available", "in_use", "waiting", "generation", "pace"],
            "adaptive_pace": self.adaptive_pace,
            "samples": samples,
            "marks": marks,
        })
    }

    /// The picture, titled `title` (the recording's name).
    pub fn to_svg(&self, title: &str) -> String {
        Drawing::new(self).svg(title)
    }
}

/// An `EstablishFailed` input's mark.
fn establish_failure(input: &str) -> Option<MarkKind> {
    let value: Value = serde_json::from_str(input).ok()?;
    let failed = value.get("EstablishFailed")?;
    let error = &failed["error"];
    let kind: EstablishErrorKind = serde_json::from_value(error["kind"].clone()).ok()?;
    let message = error["chain"]
        .as_array()
        .and_then(|chain| chain.first())
        .and_then(|e| e["display"].as_str())
        .unwrap_or("")
        .to_owned();
    Some(MarkKind::EstablishFailed {
        id: failed["id"].as_u64()?,
        labels: kind.labels().to_vec(),
        message,
    })
}

/// The reason of a `Fail { waiter: .., error: Reason .. }` output.
fn check_out_failure(output: &str) -> Option<String> {
    let error = output.strip_prefix("Fail {")?.split_once("error: ")?.1;
    let end = error
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(error.len());
    Some(error[..end].to_owned())
}

/// Geometry: the plot's width and left margin, in pixels.
const WIDTH: f64 = 1100.0;
const LEFT: f64 = 220.0;
const RIGHT: f64 = 30.0;
/// Colours: in use, available, pending, waiting, pace, clears.
const IN_USE: &str = "#1f77b4";
const AVAILABLE: &str = "#2ca02c";
const PENDING: &str = "#ff7f0e";
const WAITING: &str = "#9467bd";
const PACE: &str = "#8c564b";
const CLEAR: &str = "#d62728";

/// A layer of the stacked lane: its name, its colour, and its top.
type Layer = (&'static str, &'static str, fn(&Sample) -> usize);

/// The SVG being written, and where time maps to.
struct Drawing<'a> {
    timeline: &'a Timeline,
    start: i64,
    span: f64,
    out: String,
    y: f64,
}

impl<'a> Drawing<'a> {
    fn new(timeline: &'a Timeline) -> Drawing<'a> {
        let start = timeline.samples.first().map_or(0, |s| s.at.min(0));
        let end = timeline.samples.last().map_or(1, |s| s.at).max(start + 1);
        Drawing {
            timeline,
            start,
            span: (end - start) as f64,
            out: String::new(),
            y: 72.0,
        }
    }

    fn x(&self, at: i64) -> f64 {
        LEFT + (at - self.start) as f64 / self.span * (WIDTH - LEFT - RIGHT)
    }

    fn svg(mut self, title: &str) -> String {
        let t = self.timeline;
        let top = self.y;
        self.stacked_lane("connections", 200.0);
        self.line_lane("waiting", 80.0, WAITING, |s| s.waiting as f64);
        let reasons = distinct(t.marks.iter().filter_map(|m| match &m.kind {
            MarkKind::CheckOutFailed { reason } => Some(reason.clone()),
            _ => None,
        }));
        self.tick_lane("checkouts failed", &reasons, |k| match k {
            MarkKind::CheckOutFailed { reason } => Some(reason.clone()),
            _ => None,
        });
        let labels = distinct(t.marks.iter().filter_map(|m| establish_row(&m.kind)));
        self.tick_lane("establishments failed", &labels, establish_row);
        if t.adaptive_pace {
            self.line_lane("establishment pace", 60.0, PACE, |s| f64::from(s.pace));
        }
        let bottom = self.y;
        self.verticals(top, bottom);
        self.axis(bottom);
        let height = bottom + 40.0;
        let data = t.to_json().to_string().replace("]]>", "]]]]><![CDATA[>");
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
             viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"11\">\n\
             <title>{title}</title>\n<metadata id=\"cmap-timeline\"><![CDATA[{data}]]></metadata>\n\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
             <text x=\"{LEFT}\" y=\"20\" font-size=\"14\">{title}: the pool against time \
             (hover a mark for its input)</text>\n{}</svg>\n",
            self.out,
            title = escape(title),
        )
    }

    /// A lane's frame, its name above it; returns its top.
    fn frame(&mut self, name: &str, height: f64) -> f64 {
        let top = self.y + 16.0;
        let _ = writeln!(
            self.out,
            "<rect x=\"{LEFT}\" y=\"{top}\" width=\"{}\" height=\"{height}\" fill=\"#f7f7f7\"/>\
             <text x=\"{LEFT}\" y=\"{}\" font-weight=\"bold\">{}</text>",
            WIDTH - LEFT - RIGHT,
            top - 4.0,
            escape(name)
        );
        self.y = top + height + 8.0;
        top
    }

    /// A step path through `values` (instant, value), scaled to a lane.
    /// Values that fall in one half-pixel column are drawn as a vertical
    /// stroke through their first, lowest, highest and last: the same
    /// picture, and a path that grows with the width, not the recording.
    fn step_path(&self, values: impl Iterator<Item = (i64, f64)>, top: f64, height: f64, max: f64) -> String {
        let end = self.x(self.timeline.samples.last().map_or(0, |s| s.at));
        let y = |v: f64| top + height - v / max * (height - 4.0);
        let mut d = String::new();
        let mut last = 0.0;
        for (x, column) in columns(values.map(|(at, v)| (self.x(at), v))) {
            for (k, v) in column.into_iter().enumerate() {
                match (d.is_empty(), k) {
                    (true, _) => write!(d, "M{x:.1},{:.1}", y(v)),
                    (false, 0) => write!(d, "H{x:.1}V{:.1}", y(v)),
                    (false, _) => write!(d, "V{:.1}", y(v)),
                }
                .expect("writing to a String");
                last = v;
            }
        }
        let _ = write!(d, "H{end:.1}V{:.1}", y(last));
        d
    }

    /// Connections by state, stacked: in use, available, pending.
    fn stacked_lane(&mut self, name: &str, height: f64) {
        let top = self.frame(name, height);
        let samples = &self.timeline.samples;
        let max = samples
            .iter()
            .map(|s| s.in_use + s.available + s.pending)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let layers: [Layer; 3] = [
            ("pending", PENDING, |s| s.in_use + s.available + s.pending),
            ("available", AVAILABLE, |s| s.in_use + s.available),
            ("in use", IN_USE, |s| s.in_use),
        ];
        for (i, (layer, colour, value)) in layers.into_iter().enumerate() {
            let d = self.step_path(samples.iter().map(|s| (s.at, value(s) as f64)), top, height, max);
            let (x0, base) = (self.x(samples.first().map_or(0, |s| s.at)), top + height);
            let _ = writeln!(
                self.out,
                "<path d=\"{d}V{base}H{x0:.1}Z\" fill=\"{colour}\" fill-opacity=\"0.8\">\
                 <title>{layer}</title></path>\
                 <text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{colour}\">{layer}</text>",
                LEFT - 30.0,
                top + 12.0 + 14.0 * i as f64
            );
        }
        let _ = writeln!(
            self.out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max}</text>",
            LEFT - 4.0,
            top + 10.0
        );
    }

    /// One count as a step line.
    fn line_lane(&mut self, name: &str, height: f64, colour: &str, value: fn(&Sample) -> f64) {
        let top = self.frame(name, height);
        let samples = &self.timeline.samples;
        let max = samples.iter().map(value).fold(1.0, f64::max);
        let d = self.step_path(samples.iter().map(|s| (s.at, value(s))), top, height, max);
        let _ = writeln!(
            self.out,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\"><title>{}</title></path>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max}</text>",
            escape(name),
            LEFT - 4.0,
            top + 10.0
        );
    }

    /// Marks as ticks, one row per `rows` entry (the row `row_of` gives).
    fn tick_lane(&mut self, name: &str, rows: &[String], row_of: fn(&MarkKind) -> Option<String>) {
        let height = 16.0 * rows.len().max(1) as f64 + 8.0;
        let top = self.frame(name, height);
        for (i, row) in rows.iter().enumerate() {
            let y = top + 6.0 + 16.0 * i as f64;
            let _ = writeln!(
                self.out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"9\">{}</text>",
                LEFT - 4.0,
                y + 10.0,
                escape(row)
            );
            for mark in &self.timeline.marks {
                if row_of(&mark.kind).as_deref() != Some(row) {
                    continue;
                }
                let x = self.x(mark.at);
                let colour = if row.contains("Overloaded") || row.contains("Timeout") {
                    PENDING
                } else {
                    CLEAR
                };
                let _ = writeln!(
                    self.out,
                    "<rect x=\"{:.1}\" y=\"{y}\" width=\"2\" height=\"12\" fill=\"{colour}\"><title>{}</title></rect>",
                    x - 1.0,
                    escape(&hover(mark))
                );
            }
        }
    }

    /// Clears and state changes across every lane.
    fn verticals(&mut self, top: f64, bottom: f64) {
        let lines = self
            .timeline
            .marks
            .iter()
            .filter(|m| matches!(m.kind, MarkKind::Clear { .. } | MarkKind::State(_)));
        for (n, mark) in lines.enumerate() {
            let (colour, dash, label) = match &mark.kind {
                MarkKind::Clear { generation } => (CLEAR, "4,2", format!("clear: generation {generation}")),
                MarkKind::State(state) => ("#555", "1,3", format!("{state:?}")),
                _ => continue,
            };
            let x = self.x(mark.at);
            let _ = writeln!(
                self.out,
                "<g><line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"{colour}\" \
                 stroke-dasharray=\"{dash}\" stroke-width=\"1.5\"/><rect x=\"{:.1}\" y=\"{top}\" width=\"6\" \
                 height=\"{}\" fill=\"transparent\"/><text x=\"{:.1}\" y=\"{}\" fill=\"{colour}\" \
                 font-size=\"9\">{}</text><title>{}</title></g>",
                x - 3.0,
                bottom - top,
                x + 2.0,
                top - 3.0 - 11.0 * (n % 3) as f64,
                escape(&label),
                escape(&hover(mark))
            );
        }
    }

    /// Seconds from the recording's zero, about ten ticks.
    fn axis(&mut self, bottom: f64) {
        let seconds = self.span / 1e9;
        let step = nice_step(seconds / 10.0);
        let first = (self.start as f64 / 1e9 / step).ceil() as i64;
        let mut k = first;
        while (k as f64) * step * 1e9 <= (self.start as f64 + self.span) {
            let at = ((k as f64) * step * 1e9) as i64;
            let x = self.x(at);
            let _ = writeln!(
                self.out,
                "<line x1=\"{x:.1}\" y1=\"{bottom}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#333\"/>\
                 <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}s</text>",
                bottom + 5.0,
                bottom + 18.0,
                trim_float(k as f64 * step)
            );
            k += 1;
        }
        let _ = writeln!(
            self.out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">seconds from the recording's start</text>",
            WIDTH - RIGHT,
            bottom + 32.0
        );
    }
}

/// `points` (x, value) by half-pixel column: each column's x and its
/// first, lowest, highest and last values, repeats left out.
fn columns(points: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, Vec<f64>)> {
    let mut out: Vec<(f64, Vec<f64>)> = Vec::new();
    // The column being gathered: its key, x, first, low, high, last.
    let mut open: Option<(i64, f64, [f64; 4])> = None;
    let mut close = |column: Option<(i64, f64, [f64; 4])>| {
        if let Some((_, x, [first, low, high, last])) = column {
            let mut values = vec![first];
            for v in [low, high, last] {
                if values.last() != Some(&v) {
                    values.push(v);
                }
            }
            out.push((x, values));
        }
    };
    for (x, v) in points {
        let key = (x * 2.0).round() as i64;
        match &mut open {
            Some((k, _, [_, low, high, last])) if *k == key => {
                *low = low.min(v);
                *high = high.max(v);
                *last = v;
            }
            _ => close(open.replace((key, x, [v, v, v, v]))),
        }
    }
    close(open);
    out
}

/// The row of an establishment failure: its labels, or its kind's lack.
fn establish_row(kind: &MarkKind) -> Option<String> {
    match kind {
        MarkKind::EstablishFailed { labels, .. } if labels.is_empty() => Some("no label".into()),
        MarkKind::EstablishFailed { labels, .. } => Some(labels.join(", ")),
        _ => None,
    }
}

/// What a mark says on hover: its instant, what it is, and its input.
fn hover(mark: &Mark) -> String {
    let what = match &mark.kind {
        MarkKind::Clear { generation } => format!("cleared, generation {generation}"),
        MarkKind::State(state) => format!("pool {state:?}"),
        MarkKind::CheckOutFailed { reason } => format!("checkout failed: {reason}"),
        MarkKind::EstablishFailed { id, labels, message } => {
            format!("establishing #{id} failed: {message} [{}]", labels.join(", "))
        }
    };
    format!("{} {what}\ninput: {}", Seconds(mark.at), mark.input)
}

fn distinct(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1e-9);
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power)
}

fn trim_float(v: f64) -> String {
    let text = format!("{v:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_and_inputs_give_their_marks() {
        assert_eq!(
            check_out_failure("Fail { waiter: WaiterId(3), error: WaitQueueTimeout { address: x } }")
                .as_deref(),
            Some("WaitQueueTimeout")
        );
        assert_eq!(check_out_failure("Deliver { waiter: WaiterId(3) }"), None);
        let input = r#"{"EstablishFailed":{"error":{"chain":[{"debug":"d","display":"refused"}],"kind":"Network"},"id":5}}"#;
        let Some(MarkKind::EstablishFailed { id, labels, message }) = establish_failure(input) else {
            panic!("not read")
        };
        assert_eq!((id, message.as_str()), (5, "refused"));
        assert!(labels.contains(&"SystemOverloadedError"), "{labels:?}");
        assert_eq!(establish_failure(r#""Timeout""#), None);
    }

    #[test]
    fn a_column_keeps_its_first_lowest_highest_and_last_values() {
        let busy = (0..10_000).map(|i| (10.0 + f64::from(i) / 1e5, f64::from(i % 7)));
        let later = [(20.0, 3.0), (20.1, 3.0), (30.0, 1.0)];
        let columns = columns(busy.chain(later));
        assert_eq!(
            columns,
            [(10.0, vec![0.0, 6.0, 3.0]), (20.0, vec![3.0]), (30.0, vec![1.0])]
        );
    }

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(nice_step(0.07), 0.1);
        assert_eq!(nice_step(0.13), 0.2);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(trim_float(0.30000000001), "0.3");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
