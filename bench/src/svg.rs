//! A small SVG writer for line charts: panels side by side sharing one
//! legend and one y range; each axis log₂, log₁₀ or linear (the sweep's
//! charts: log₂ x, log₁₀ y; the fleet's time series: linear). No
//! dependency, deterministic output.

use std::fmt::Write as _;

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Panel {
    pub title: String,
    pub series: Vec<Series>,
}

/// How an axis maps values: ticks at powers of two, powers of ten, or
/// round steps from zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Log2,
    Log10,
    Linear,
}

pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub panels: Vec<Panel>,
    pub x_scale: Scale,
    pub y_scale: Scale,
    /// Formats an x tick.
    pub x_format: fn(f64) -> String,
    /// Formats a y tick.
    pub y_format: fn(f64) -> String,
}

/// A series with more points than this is drawn as a line alone, without
/// a dot per point.
const MAX_MARKED_POINTS: usize = 60;

const PANEL_W: f64 = 330.0;
const PANEL_H: f64 = 250.0;
const LEFT: f64 = 62.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 44.0;
const LEGEND_ROW: f64 = 18.0;

/// A color per pool (and per fleet variant), fixed by name so every chart
/// agrees.
pub fn color(name: &str) -> &'static str {
    match name {
        "cmap-tokio" => "#d62728",
        "cmap-tokio+events" => "#ff9896",
        "cmap-async-std/smol" => "#9467bd",
        "cmap-async-std/async-std" => "#c5b0d5",
        "cmap-blocking" => "#d62728",
        "deadpool" => "#1f77b4",
        "bb8" => "#2ca02c",
        "mobc" => "#8c564b",
        "r2d2" => "#1f77b4",
        "floor-async" | "floor-blocking" => "#444444",
        // `bench fleet`'s variants.
        "defaults" => "#d62728",
        "no maxConnecting" => "#1f77b4",
        "no jitter" => "#2ca02c",
        "no labels" => "#ff7f0e",
        _ => "#17becf",
    }
}

fn dashed(name: &str) -> bool {
    name.starts_with("floor")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Human units for a count: 12.3k, 4.5M.
pub fn si(v: f64) -> String {
    if v >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if v >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

/// Human units for nanoseconds: 120ns, 3.4µs, 12ms, 1.2s.
pub fn time_ns(v: f64) -> String {
    if v >= 1e9 {
        format!("{}s", trim(v / 1e9))
    } else if v >= 1e6 {
        format!("{}ms", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{}µs", trim(v / 1e3))
    } else {
        format!("{}ns", trim(v))
    }
}

/// A tick as a plain number: 8, 0.5, 1024.
pub fn plain(v: f64) -> String {
    format!("{v}")
}

/// The axis range of values `lo..=hi` (positive ones only for a log
/// scale) in the scale's own units (exponents for a log scale), and the
/// step between ticks in those units.
fn axis(scale: Scale, lo: f64, hi: f64) -> (f64, f64, f64) {
    match scale {
        Scale::Log2 => {
            let (a, b) = (lo.log2().floor(), hi.log2().ceil());
            let b = b.max(a + 1.0);
            (a, b, if b - a > 6.0 { 2.0 } else { 1.0 })
        }
        Scale::Log10 => {
            let (a, b) = (lo.log10().floor(), hi.log10().ceil());
            (a, b.max(a + 1.0), 1.0)
        }
        Scale::Linear => {
            let a = lo.min(0.0);
            let b = if hi > a { hi } else { a + 1.0 };
            let raw = (b - a) / 5.0;
            let mag = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 2.5, 5.0, 10.0]
                .into_iter()
                .map(|m| m * mag)
                .find(|s| *s >= raw)
                .unwrap_or(10.0 * mag);
            ((a / step).floor() * step, (b / step).ceil() * step, step)
        }
    }
}

/// A value in the scale's units.
fn to_axis(scale: Scale, v: f64) -> f64 {
    match scale {
        Scale::Log2 => v.log2(),
        Scale::Log10 => v.log10(),
        Scale::Linear => v,
    }
}

/// A tick position in the scale's units back to a value.
fn from_axis(scale: Scale, u: f64) -> f64 {
    match scale {
        Scale::Log2 => 2f64.powf(u),
        Scale::Log10 => 10f64.powf(u),
        Scale::Linear => u,
    }
}

/// Whether a value can be drawn on this scale.
fn drawable(scale: Scale, v: f64) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

fn trim(v: f64) -> String {
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

impl Chart {
    pub fn render(&self) -> String {
        let names: Vec<&str> = {
            let mut names = Vec::new();
            for panel in &self.panels {
                for s in &panel.series {
                    if !names.contains(&s.name.as_str()) {
                        names.push(s.name.as_str());
                    }
                }
            }
            names
        };
        let per_row = 4;
        let legend_rows = names.len().div_ceil(per_row) as f64;
        let width = self.panels.len() as f64 * PANEL_W;
        let height = TOP + PANEL_H + BOTTOM + legend_rows * LEGEND_ROW + 10.0;

        // One y range for all panels, so they compare.
        let ys = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter())
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|y| drawable(self.y_scale, *y));
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        for y in ys {
            lo = lo.min(y);
            hi = hi.max(y);
        }
        if lo > hi {
            (lo, hi) = (1.0, 10.0);
        }
        let (y0, y1, y_step) = axis(self.y_scale, lo, hi);
        let xs = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter())
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .filter(|x| drawable(self.x_scale, *x));
        let (mut xlo, mut xhi) = (f64::MAX, f64::MIN);
        for x in xs {
            xlo = xlo.min(x);
            xhi = xhi.max(x);
        }
        if xlo > xhi {
            (xlo, xhi) = (1.0, 2.0);
        }
        let (x0, x1, x_step) = axis(self.x_scale, xlo, xhi);

        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="18" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
            width / 2.0,
            esc(&self.title)
        );
        for (i, panel) in self.panels.iter().enumerate() {
            let ox = i as f64 * PANEL_W;
            let (px0, px1) = (ox + LEFT, ox + PANEL_W - RIGHT);
            let (py0, py1) = (TOP + PANEL_H - BOTTOM, TOP);
            let sx = |x: f64| px0 + (to_axis(self.x_scale, x) - x0) / (x1 - x0) * (px1 - px0);
            let sy = |y: f64| py0 - (to_axis(self.y_scale, y) - y0) / (y1 - y0) * (py0 - py1);
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}" text-anchor="middle" font-size="12">{}</text>"#,
                (px0 + px1) / 2.0,
                TOP - 10.0,
                esc(&panel.title)
            );
            // Grid and ticks.
            let mut d = y0;
            while d <= y1 + 1e-9 {
                let y = sy(from_axis(self.y_scale, d));
                let _ = writeln!(
                    out,
                    r##"<line x1="{px0}" y1="{y:.1}" x2="{px1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                    px0 - 4.0,
                    y + 4.0,
                    (self.y_format)(from_axis(self.y_scale, d))
                );
                d += y_step;
            }
            let mut e = x0;
            while e <= x1 + 1e-9 {
                let x = sx(from_axis(self.x_scale, e));
                let _ = writeln!(
                    out,
                    r##"<line x1="{x:.1}" y1="{py1}" x2="{x:.1}" y2="{py0}" stroke="#eee"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                    py0 + 14.0,
                    (self.x_format)(from_axis(self.x_scale, e))
                );
                e += x_step;
            }
            let _ = writeln!(
                out,
                r##"<rect x="{px0}" y="{py1}" width="{}" height="{}" fill="none" stroke="#888"/>"##,
                px1 - px0,
                py0 - py1
            );
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
                (px0 + px1) / 2.0,
                py0 + 30.0,
                esc(&self.x_label)
            );
            let _ = writeln!(
                out,
                r#"<text transform="translate({},{}) rotate(-90)" text-anchor="middle">{}</text>"#,
                ox + 14.0,
                (py0 + py1) / 2.0,
                esc(&self.y_label)
            );
            for s in &panel.series {
                let pts: Vec<String> = s
                    .points
                    .iter()
                    .filter(|p| drawable(self.x_scale, p.0) && drawable(self.y_scale, p.1))
                    .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
                    .collect();
                let c = color(&s.name);
                let dash = if dashed(&s.name) {
                    r#" stroke-dasharray="5,3""#
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"{dash}/>"#,
                    pts.join(" ")
                );
                for p in pts.iter().filter(|_| pts.len() <= MAX_MARKED_POINTS) {
                    let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = writeln!(out, r#"<circle cx="{x}" cy="{y}" r="2.5" fill="{c}"/>"#);
                }
            }
        }
        // Legend.
        let ly = TOP + PANEL_H + 4.0;
        let col_w = width / per_row as f64;
        for (i, name) in names.iter().enumerate() {
            let x = (i % per_row) as f64 * col_w + 20.0;
            let y = ly + (i / per_row) as f64 * LEGEND_ROW;
            let c = color(name);
            let dash = if dashed(name) {
                r#" stroke-dasharray="5,3""#
            } else {
                ""
            };
            let _ = writeln!(
                out,
                r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{c}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
                x + 24.0,
                x + 30.0,
                y + 4.0,
                esc(name)
            );
        }
        out.push_str("</svg>\n");
        out
    }
}
