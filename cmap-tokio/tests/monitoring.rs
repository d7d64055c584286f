//! The alert rules and the dashboard of `monitoring/` against what the
//! pool exports: every metric and label their queries name must be in a
//! live scrape of a pool (through `metrics-exporter-prometheus`, histograms
//! as buckets, as docs/alerts.md asks), and `promtool` must accept the
//! rules and pass their unit tests. Without `promtool` on PATH that test
//! fails when `CI` is set (`.ci/promtool.sh` installs it), and otherwise
//! passes without running after writing `SKIPPED <test>: <why>` to stderr.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{block_on, builder, Fake};
use metrics_exporter_prometheus::PrometheusBuilder;

/// Labels Prometheus adds to every series it scrapes (the target's), which
/// the exposition itself never carries.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

fn monitoring() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../monitoring")
}

/// Every metric of a pool's export as Prometheus scrapes it: a pool that
/// establishes, hands out, takes back and times out a checkout, then
/// closes.
fn scrape() -> String {
    let recorder = PrometheusBuilder::new()
        .set_buckets(&[0.001, 0.01, 0.1, 1.0])
        .unwrap()
        .build_recorder();
    let handle = recorder.handle();
    block_on(async {
        let pool = metrics::with_local_recorder(&recorder, || {
            builder().max_pool_size(1).metrics(true).build(Fake::default())
        })
        .unwrap();
        let held = pool.get().await.unwrap();
        assert!(pool.get_timeout(Duration::from_millis(20)).await.is_err());
        drop(held);
        drop(pool.get().await.unwrap());
        pool.close();
    });
    handle.render()
}

/// The series of a scrape: metric name to each label's values.
type Exposed = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn parse_scrape(text: &str) -> Exposed {
    let mut exposed = Exposed::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = exposed.entry(line[..end].to_owned()).or_default();
        let Some(body) = line[end..].strip_prefix('{').and_then(|b| b.split_once('}')) else {
            continue;
        };
        // `name="value"` pairs; the pool's values hold no quote or comma.
        for pair in body.0.split(',').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').expect("a label is name=\"value\"");
            labels
                .entry(name.to_owned())
                .or_default()
                .insert(value.trim_matches('"').to_owned());
        }
    }
    exposed
}

/// What a PromQL expression names: metrics, and labels (with the values
/// a matcher asks for, when it asks for plain ones).
#[derive(Debug, Default)]
struct Named {
    /// Each metric with the label matchers of its selector.
    selectors: Vec<(String, Vec<Matcher>)>,
    /// Labels of `by`, `without`, `on` and `ignoring` lists.
    grouping: BTreeSet<String>,
}

/// A label matcher: the label, and the plain values it asks for (none
/// for a pattern, a negation or a Grafana variable).
type Matcher = (String, Vec<String>);

const KEYWORDS: [&str; 7] = [
    "and",
    "or",
    "unless",
    "offset",
    "bool",
    "group_left",
    "group_right",
];
const GROUPING: [&str; 4] = ["by", "without", "on", "ignoring"];
/// Aggregations, which a grouping list may follow before their `(`.
const AGGREGATIONS: [&str; 12] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];

/// A small PromQL scanner: enough to find the names of this repository's
/// queries (selectors, matchers, grouping lists), strict enough to fail
/// on what it does not understand.
fn promql_names(expr: &str) -> Named {
    let chars: Vec<char> = expr.chars().collect();
    let mut named = Named::default();
    let mut i = 0;
    let ident = |i: &mut usize| {
        let start = *i;
        while *i < chars.len() && (chars[*i].is_ascii_alphanumeric() || chars[*i] == '_' || chars[*i] == ':')
        {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>()
    };
    let skip_space = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '[' {
            // A range or a subquery: durations and Grafana's variables.
            i += chars[i..].iter().position(|&c| c == ']').expect("an unclosed [") + 1;
        } else if c == '$' {
            i += 1;
            ident(&mut i);
        } else if c.is_ascii_digit() || c == '.' {
            // A number or a duration (`30m`).
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let word = ident(&mut i);
            skip_space(&mut i);
            let next = chars.get(i).copied();
            if GROUPING.contains(&word.as_str()) {
                assert_eq!(next, Some('('), "`{word}` without a label list in {expr}");
                let close = i + chars[i..].iter().position(|&c| c == ')').unwrap();
                let list: String = chars[i + 1..close].iter().collect();
                named.grouping.extend(
                    list.split(',')
                        .map(|l| l.trim().to_owned())
                        .filter(|l| !l.is_empty()),
                );
                i = close + 1;
            } else if KEYWORDS.contains(&word.as_str())
                || AGGREGATIONS.contains(&word.as_str())
                || next == Some('(')
            {
                // An operator, or a function (its arguments follow).
            } else {
                let mut matchers = Vec::new();
                if next == Some('{') {
                    let close = i + chars[i..].iter().position(|&c| c == '}').unwrap();
                    let body: String = chars[i + 1..close].iter().collect();
                    for matcher in body.split(',').map(str::trim).filter(|m| !m.is_empty()) {
                        let op = matcher.find(['=', '!']).expect("a matcher has an operator");
                        let (label, rest) = matcher.split_at(op);
                        let value = rest.trim_start_matches(['=', '!', '~']).trim().trim_matches('"');
                        // Plain values (alternatives of `=~` included) are
                        // checked; a Grafana variable or a pattern is not.
                        let plain = !value.contains(['$', '.', '*', '+', '(', '[']) && !rest.starts_with('!');
                        let values = match plain {
                            true => value.split('|').map(str::to_owned).collect(),
                            false => Vec::new(),
                        };
                        matchers.push((label.trim().to_owned(), values));
                    }
                    i = close + 1;
                }
                named.selectors.push((word, matchers));
            }
        } else if c == '"' || c == '\'' {
            panic!("a string outside a matcher in {expr}: extend the scanner");
        } else {
            i += 1;
        }
    }
    named
}

/// The queries of the alert rules (`expr:`, one line or an indented
/// block) and of the dashboard (every `expr`, and the variables'
/// `label_values(metric, label)`), with where each comes from.
fn queries() -> Vec<(String, String)> {
    let mut found = Vec::new();
    let rules = std::fs::read_to_string(monitoring().join("prometheus/cmap-alerts.yml")).unwrap();
    let lines: Vec<&str> = rules.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        let expr = match rest.trim() {
            "|" | ">" | "|-" | ">-" => lines[n + 1..]
                .iter()
                .take_while(|l| l.len() - l.trim_start().len() > indent)
                .copied()
                .collect::<Vec<_>>()
                .join("\n"),
            one => one.to_owned(),
        };
        found.push((format!("cmap-alerts.yml line {}", n + 1), expr));
    }
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(monitoring().join("grafana/cmap-pool.json")).unwrap())
            .unwrap();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let title = panel["title"].as_str().unwrap();
            found.push((
                format!("dashboard panel {title:?}"),
                target["expr"].as_str().unwrap().to_owned(),
            ));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(definition) = variable["definition"].as_str() {
            let args = definition
                .strip_prefix("label_values(")
                .and_then(|d| d.strip_suffix(')'))
                .expect("a variable is label_values(metric, label)");
            let (metric, label) = args.split_once(',').unwrap();
            found.push((
                format!("dashboard variable {}", variable["name"]),
                format!("sum by ({}) ({})", label.trim(), metric.trim()),
            ));
        }
    }
    found
}

/// What `named` names that `exposed` lacks.
fn missing(named: &Named, exposed: &Exposed) -> Vec<String> {
    let mut missing = Vec::new();
    let mut labels_of_query = BTreeSet::new();
    for (metric, matchers) in &named.selectors {
        let Some(labels) = exposed.get(metric) else {
            missing.push(format!("metric {metric}"));
            continue;
        };
        labels_of_query.extend(labels.keys().cloned());
        for (label, values) in matchers {
            if TARGET_LABELS.contains(&label.as_str()) {
                continue;
            }
            let Some(exposed_values) = labels.get(label) else {
                missing.push(format!("label {label} of {metric}"));
                continue;
            };
            for value in values.iter().filter(|v| !exposed_values.contains(*v)) {
                missing.push(format!("{metric}{{{label}=\"{value}\"}}"));
            }
        }
    }
    for label in &named.grouping {
        if !labels_of_query.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
            missing.push(format!("label {label} (grouping)"));
        }
    }
    missing
}

#[test]
fn every_metric_and_label_of_the_alerts_and_dashboard_is_in_a_live_scrape() {
    let exposed = parse_scrape(&scrape());
    let queries = queries();
    assert!(queries.len() >= 15, "too few queries found: {queries:?}");
    let mut problems = Vec::new();
    for (place, expr) in &queries {
        let named = promql_names(expr);
        assert!(!named.selectors.is_empty(), "{place}: no metric found in {expr}");
        for what in missing(&named, &exposed) {
            problems.push(format!("{place}: {what} is not in the scrape"));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nscraped: {:?}",
        problems.join("\n"),
        exposed.keys()
    );
}

/// The checker itself: a name the pool does not export, a label it does
/// not carry or a reason it never gives is caught.
#[test]
fn a_query_naming_what_the_scrape_lacks_is_caught() {
    let exposed = parse_scrape(
        "# TYPE cmap_checkouts_total counter\ncmap_checkouts_total{address=\"db:1\"} 3\n\
         cmap_checkout_failures_total{address=\"db:1\",reason=\"timeout\"} 1\n",
    );
    let check = |expr: &str| missing(&promql_names(expr), &exposed);
    assert!(check("rate(cmap_checkouts_total{address=~\"$address\"}[$__rate_interval]) > 0.5").is_empty());
    assert!(
        check("sum by (address, job) (rate(cmap_checkout_failures_total{reason=\"timeout\"}[5m]))")
            .is_empty()
    );
    assert_eq!(
        check("rate(cmap_checkout_total[5m])"),
        ["metric cmap_checkout_total"]
    );
    assert_eq!(
        check("cmap_checkout_failures_total{reason=~\"timeout|closed\"}"),
        ["cmap_checkout_failures_total{reason=\"closed\"}"]
    );
    assert_eq!(
        check("sum by (pool) (cmap_checkouts_total)"),
        ["label pool (grouping)"]
    );
    assert_eq!(
        check("cmap_checkouts_total{state=\"x\"} offset 1h"),
        ["label state of cmap_checkouts_total"]
    );
}

#[test]
fn promtool_accepts_the_rules_and_passes_their_unit_tests() {
    let dir = monitoring().join("prometheus");
    let promtool = |args: &[&str]| Command::new("promtool").args(args).current_dir(&dir).output();
    let version = match promtool(&["--version"]) {
        Ok(out) => out,
        Err(e) => {
            let why = format!("promtool cannot run ({e}); .ci/promtool.sh installs it");
            if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
                panic!("{why}; CI is set, so this fails instead of skipping");
            }
            // Not `eprintln!`: the harness would capture it.
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIPPED promtool_accepts_the_rules_and_passes_their_unit_tests: {why}"
            );
            return;
        }
    };
    assert!(version.status.success());
    for args in [
        &["check", "rules", "cmap-alerts.yml"][..],
        &["test", "rules", "cmap-alerts.test.yml"],
    ] {
        let out = promtool(args).unwrap();
        assert!(
            out.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
