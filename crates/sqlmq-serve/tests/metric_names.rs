//! Every metric the library and the server can emit has its help text — by construction, not
//! by luck. `sqlmq_schedule_fires_total` once had none: `promtool check metrics` failed on
//! `/metrics` whenever a schedule fired before a scrape.
//!
//! The construction (`sqlmq::telemetry::catalogue`): a metric is recorded only under the name
//! of a catalogue entry, and entries exist only in the catalogue's list, each with its text.
//! This test holds both halves: it reads every source file of the library, the server and the
//! CLI and fails on a `counter!`, `gauge!` or `histogram!` whose name is anything but an
//! entry's `.name()`; and it records every entry through the server's recorder and finds each
//! with its `# HELP` line in what `/metrics` renders.

use std::path::{Path, PathBuf};

use sqlmq::telemetry::{METRICS, MetricKind};

/// The `.rs` files under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The first argument of each metric macro call in `text`, with its line number: the text
/// after `counter!(`, `gauge!(` or `histogram!(` up to the first `,` or `)` outside brackets.
fn metric_names(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for mac in ["counter!(", "gauge!(", "histogram!("] {
        for (at, _) in text.match_indices(mac) {
            let before = &text[..at];
            // `describe_counter!(…)` gives a text, it records nothing.
            if before.ends_with("describe_") {
                continue;
            }
            let rest = &text[at + mac.len()..];
            let mut depth = 0usize;
            let end = rest
                .char_indices()
                .find(|&(_, c)| match c {
                    '(' | '[' | '{' => {
                        depth += 1;
                        false
                    }
                    ')' | ']' | '}' if depth > 0 => {
                        depth -= 1;
                        false
                    }
                    ',' | ')' => depth == 0,
                    _ => false,
                })
                .map_or(rest.len(), |(i, _)| i);
            let line = before.matches('\n').count() + 1;
            found.push((line, rest[..end].trim().to_owned()));
        }
    }
    found
}

#[test]
fn every_metric_is_recorded_under_a_catalogue_name() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in ["sqlmq", "sqlmq-serve", "sqlmq-cli"] {
        sources(&crates.join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 100, "the sources were found: {}", files.len());
    let mut calls = 0;
    let mut strays = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, name) in metric_names(&text) {
            calls += 1;
            if !name.ends_with(".name()") || name.contains('"') {
                strays.push(format!("{}:{line}: {name}", file.display()));
            }
        }
    }
    assert!(calls >= 30, "the metric calls were found: {calls}");
    assert!(
        strays.is_empty(),
        "metrics recorded under a name that is not a catalogue entry's `.name()` (add the \
         metric to sqlmq::telemetry::catalogue, with its help text):\n{}",
        strays.join("\n")
    );
}

#[test]
fn the_scan_sees_a_stray_name() {
    let found = metric_names(
        "metrics::counter!(\"sqlmq_x_total\", \"a\" => b).increment(1);\n\
         metrics::describe_counter!(\"sqlmq_x_total\", \"text\");\n\
         metrics::histogram!(catalogue::SEND_SECONDS.name(), \"queue\" => f(x, y))",
    );
    assert_eq!(
        found,
        [
            (1, "\"sqlmq_x_total\"".to_owned()),
            (3, "catalogue::SEND_SECONDS.name()".to_owned()),
        ]
    );
}

/// Every entry, recorded once through the server's recorder, renders with its `# HELP` line
/// (the families the server renders from the database, with texts of their own, excepted).
#[test]
fn every_catalogue_metric_renders_with_its_help_text() {
    let handle = sqlmq_serve::install_prometheus_recorder();
    let mut names: Vec<&str> = METRICS.iter().map(|m| m.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), METRICS.len(), "each name once");
    for m in METRICS {
        assert!(!m.help().trim().is_empty(), "{} has no help text", m.name());
        match m.kind() {
            MetricKind::Counter => metrics::counter!(m.name(), "queue" => "q").increment(1),
            MetricKind::Gauge => metrics::gauge!(m.name(), "queue" => "q").set(1.0),
            MetricKind::Histogram => metrics::histogram!(m.name(), "queue" => "q").record(0.5),
        }
    }
    let rendered = handle.render();
    let from_database = sqlmq_serve::render_gauges(&sqlmq_serve::Snapshot::default());
    for m in METRICS {
        if from_database.contains(&format!("# TYPE {} ", m.name())) {
            continue;
        }
        assert!(
            rendered.contains(&format!("# HELP {} {}", m.name(), m.help())),
            "{} renders without its help text:\n{rendered}",
            m.name()
        );
    }
}
