//! A small SVG writer for line charts: panels side by side sharing one
//! legend, log₂ x axis and log₁₀ y axis. No dependency, deterministic output.

use std::fmt::Write as _;

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Panel {
    pub title: String,
    pub series: Vec<Series>,
}

pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub panels: Vec<Panel>,
    /// Formats a y tick (a power of ten).
    pub y_format: fn(f64) -> String,
}

const PANEL_W: f64 = 330.0;
const PANEL_H: f64 = 250.0;
const LEFT: f64 = 62.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 44.0;
const LEGEND_ROW: f64 = 18.0;

/// A color per pool, fixed by name so every chart agrees.
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

        // One y range for all panels, in decades, so they compare.
        let ys = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter())
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite() && *y > 0.0);
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        for y in ys {
            lo = lo.min(y);
            hi = hi.max(y);
        }
        if lo > hi {
            (lo, hi) = (1.0, 10.0);
        }
        let y0 = lo.log10().floor();
        let y1 = hi.log10().ceil().max(y0 + 1.0);
        let xs = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter())
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let (mut xlo, mut xhi) = (f64::MAX, f64::MIN);
        for x in xs {
            xlo = xlo.min(x);
            xhi = xhi.max(x);
        }
        if xlo > xhi {
            (xlo, xhi) = (1.0, 2.0);
        }
        let x0 = xlo.log2().floor();
        let x1 = xhi.log2().ceil().max(x0 + 1.0);

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
            let sx = |x: f64| px0 + (x.log2() - x0) / (x1 - x0) * (px1 - px0);
            let sy = |y: f64| py0 - (y.log10() - y0) / (y1 - y0) * (py0 - py1);
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
                let y = sy(10f64.powf(d));
                let _ = writeln!(
                    out,
                    r##"<line x1="{px0}" y1="{y:.1}" x2="{px1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                    px0 - 4.0,
                    y + 4.0,
                    (self.y_format)(10f64.powf(d))
                );
                d += 1.0;
            }
            let mut e = x0;
            while e <= x1 + 1e-9 {
                let x = sx(2f64.powf(e));
                let _ = writeln!(
                    out,
                    r##"<line x1="{x:.1}" y1="{py1}" x2="{x:.1}" y2="{py0}" stroke="#eee"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                    py0 + 14.0,
                    2f64.powf(e)
                );
                e += if x1 - x0 > 6.0 { 2.0 } else { 1.0 };
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
                    .filter(|p| p.1.is_finite() && p.1 > 0.0)
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
                for p in &pts {
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
