//! What a run found: figures grouped by scenario, ratios to their baselines, and the two ways
//! of showing them (a table for people, one JSON document for scripts).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;

use super::args::Plan;
use super::machine::{Machine, ServerFacts};
use super::measure::{Summary, rate};
use super::scratch::Area;
use super::track::Check;
use sqlmq_cli_common::output::print_table;

/// Unit of a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Unit {
    /// Messages per second.
    #[serde(rename = "msg/s")]
    MsgPerS,
    /// Table rows per second.
    #[serde(rename = "rows/s")]
    RowsPerS,
    /// Milliseconds (latencies: the figure's value is the median).
    #[serde(rename = "ms")]
    Ms,
    /// Statements the server executed per second.
    #[serde(rename = "queries/s")]
    QueriesPerS,
    /// Mebibytes.
    #[serde(rename = "MiB")]
    MiB,
    /// Statements the server executed per operation.
    #[serde(rename = "statements/op")]
    StatementsPerOp,
}

/// One measured number, with what it is compared with.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    /// Stable identifier, e.g. `queue.drain.8`.
    pub key: String,
    /// What was measured, for people.
    pub label: String,
    /// The number (for latencies, the median).
    pub value: f64,
    /// Its unit.
    pub unit: Unit,
    /// Messages (or rows) behind a rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
    /// Wall time behind a rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Latency percentiles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Summary>,
    /// Key of the figure this one is compared with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// That figure's label and value, filled in once every scenario has run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_label: Option<String>,
    /// That figure's value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_value: Option<f64>,
    /// Unit of `baseline_value` (for the table).
    #[serde(skip)]
    pub baseline_unit: Option<Unit>,
    /// `value / baseline_value`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Deliveries of an already delivered message (and deliveries of unknown ids).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    /// Messages sent and never delivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub losses: Option<u64>,
    /// Anything a reader needs to interpret the number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Figure {
    /// A figure with only its value.
    pub fn new(key: impl Into<String>, label: impl Into<String>, value: f64, unit: Unit) -> Self {
        Figure {
            key: key.into(),
            label: label.into(),
            value,
            unit,
            messages: None,
            seconds: None,
            latency: None,
            baseline: None,
            baseline_label: None,
            baseline_value: None,
            baseline_unit: None,
            ratio: None,
            duplicates: None,
            losses: None,
            note: None,
        }
    }

    /// `messages` in `elapsed`, as messages per second.
    pub fn rate(key: &str, label: impl Into<String>, messages: u64, elapsed: Duration) -> Self {
        let mut f = Figure::new(key, label, rate(messages, elapsed), Unit::MsgPerS);
        f.messages = Some(messages);
        f.seconds = Some(elapsed.as_secs_f64());
        f
    }

    /// `rows` in `elapsed`, as rows per second.
    pub fn rows(key: &str, label: impl Into<String>, rows: u64, elapsed: Duration) -> Self {
        let mut f = Figure::rate(key, label, rows, elapsed);
        f.unit = Unit::RowsPerS;
        f
    }

    /// A latency distribution; the value is its median.
    pub fn latency(key: &str, label: impl Into<String>, summary: Summary) -> Self {
        let mut f = Figure::new(key, label, summary.p50_ms, Unit::Ms);
        f.latency = Some(summary);
        f
    }

    /// Compare with the figure `key`.
    pub fn against(mut self, key: &str) -> Self {
        self.baseline = Some(key.to_owned());
        self
    }

    /// Record what the consumers observed.
    pub fn checked(mut self, check: Check) -> Self {
        self.duplicates = Some(check.duplicates + check.unexpected);
        self.losses = Some(check.losses);
        self
    }

    /// Attach a note.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// How a scenario ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// It ran; its figures are valid.
    Ok,
    /// Not run (a peer's server was not reachable).
    Skipped,
    /// It failed with an error.
    Failed,
    /// Not run: it means nothing on this backend (the reason says why). Not a failure.
    NotAvailable,
}

/// A figure a scenario cannot measure on this backend: listed with the reason, never with a
/// number.
#[derive(Clone, Debug, Serialize)]
pub struct Unavailable {
    /// The figure's key where it is measured, e.g. `worker.idle.queries`.
    pub key: String,
    /// What it would measure, for people.
    pub label: String,
    /// Why it is not available ("not available on SQLite: …").
    pub reason: String,
}

/// Facts about a peer's server.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PeerInfo {
    /// Server version, when the client can tell.
    pub version: Option<String>,
    /// Whether an acknowledged message survives a crash of the server machine.
    pub durable: bool,
    /// Why (the settings that decide it).
    pub durability: String,
    /// Relevant server settings as read from the server.
    pub settings: BTreeMap<String, String>,
}

/// One scenario's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// Registry id, e.g. `queue.drain`.
    pub id: &'static str,
    /// What it measures.
    pub title: &'static str,
    /// How it ended.
    pub status: Status,
    /// Why it was skipped or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Wall time of the whole scenario (set-up included).
    pub seconds: f64,
    /// For peers: the server and its durability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerInfo>,
    /// The figures.
    pub figures: Vec<Figure>,
    /// Figures of this scenario that mean nothing on this backend.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_available: Vec<Unavailable>,
}

/// A scenario of a later issue, listed so that readers see what is not measured yet.
#[derive(Clone, Debug, Serialize)]
pub struct Planned {
    /// Future id.
    pub id: &'static str,
    /// What it will measure.
    pub title: &'static str,
}

/// The whole run.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Version of the sqlmq binary that ran.
    pub sqlmq_version: &'static str,
    /// Start of the run, RFC 3339 UTC.
    pub date: String,
    /// `quick` or `full`.
    pub mode: &'static str,
    /// Message counts and durations used.
    pub plan: Plan,
    /// Body size of every message.
    pub body_bytes: usize,
    /// The machine the bench ran on.
    pub machine: Machine,
    /// The MySQL/MariaDB server and its durability settings, or SQLite and the settings of
    /// sqlmq's connections.
    pub server: ServerFacts,
    /// Where the bench's tables lived.
    pub scratch: Area,
    /// Every selected scenario, in run order.
    pub scenarios: Vec<ScenarioReport>,
    /// Scenarios that come with later issues.
    pub planned: Vec<Planned>,
    /// Wall time of the run.
    pub seconds: f64,
}

impl Report {
    /// Fill in baselines and ratios from the figures of this run.
    pub fn resolve_ratios(&mut self) {
        let known: HashMap<String, (String, f64, Unit)> = self
            .scenarios
            .iter()
            .flat_map(|s| &s.figures)
            .map(|f| (f.key.clone(), (f.label.clone(), f.value, f.unit)))
            .collect();
        for f in self.scenarios.iter_mut().flat_map(|s| &mut s.figures) {
            let Some((label, value, unit)) = f.baseline.as_ref().and_then(|k| known.get(k)) else {
                continue;
            };
            f.baseline_label = Some(label.clone());
            f.baseline_value = Some(*value);
            f.baseline_unit = Some(*unit);
            if *value > 0.0 {
                f.ratio = Some(f.value / value);
            }
        }
    }

    /// Figures of sqlmq (not of peers) that observed duplicates or losses.
    pub fn broken_guarantees(&self) -> Vec<&Figure> {
        self.scenarios
            .iter()
            .filter(|s| !s.id.starts_with("peer."))
            .flat_map(|s| &s.figures)
            .filter(|f| f.duplicates.unwrap_or(0) + f.losses.unwrap_or(0) > 0)
            .collect()
    }

    /// Print the report for people.
    pub fn print_table(&self) {
        println!(
            "sqlmq {} bench ({}), {}: {}; {} cores, {:.1} GiB, Linux {}",
            self.sqlmq_version,
            self.mode,
            self.date,
            server_text(&self.server),
            self.machine.cores,
            self.machine.memory_bytes as f64 / f64::from(1u32 << 30),
            self.machine.kernel,
        );
        println!(
            "{}-byte bodies; ratios compare each figure with the baseline named beside it, \
             measured in this run\n",
            self.body_bytes
        );
        let mut rows = Vec::new();
        let mut group = "";
        for sc in &self.scenarios {
            let this = sc.id.split('.').next().unwrap_or("");
            if this != group && !rows.is_empty() {
                rows.push(Vec::new());
            }
            group = this;
            let why = sc.reason.as_deref().unwrap_or("");
            match sc.status {
                Status::Ok => {}
                Status::Skipped => {
                    rows.push(vec![sc.id.to_owned(), format!("skipped: {why}")]);
                    continue;
                }
                Status::Failed => {
                    rows.push(vec![sc.id.to_owned(), format!("FAILED: {why}")]);
                    continue;
                }
                Status::NotAvailable => {
                    rows.push(vec![sc.id.to_owned(), why.to_owned()]);
                    continue;
                }
            }
            for f in &sc.figures {
                rows.push(table_row(f));
            }
            for u in &sc.not_available {
                rows.push(vec![u.label.clone(), u.reason.clone()]);
            }
        }
        print_table(
            &[
                "scenario",
                "result",
                "compared with",
                "ratio",
                "p50",
                "p99",
                "dup/lost",
            ],
            &rows,
        );
        let peers: Vec<String> = self
            .scenarios
            .iter()
            .filter_map(|s| Some((s.id, s.peer.as_ref()?)))
            .map(|(id, p)| {
                let durable = if p.durable { "durable" } else { "NOT durable" };
                format!("  {id}: {durable}: {}", p.durability)
            })
            .collect();
        if !peers.is_empty() {
            println!("\npeers:\n{}", peers.join("\n"));
        }
        let notes: Vec<String> = self
            .scenarios
            .iter()
            .flat_map(|s| &s.figures)
            .filter_map(|f| Some(format!("  {}: {}", f.key, f.note.as_ref()?)))
            .collect();
        if !notes.is_empty() {
            println!("\nnotes:\n{}", notes.join("\n"));
        }
        if !self.planned.is_empty() {
            let ids: Vec<&str> = self.planned.iter().map(|p| p.id).collect();
            println!("\nnot built yet (later issues): {}", ids.join(", "));
        }
    }
}

/// The database and the settings behind every figure, for the table's first line.
fn server_text(server: &ServerFacts) -> String {
    match server {
        ServerFacts::MySql(s) => format!(
            "{} {} (innodb_flush_log_at_trx_commit={}, binlog {}, sync_binlog={})",
            s.flavor,
            s.version,
            s.innodb_flush_log_at_trx_commit,
            if s.log_bin { "on" } else { "off" },
            s.sync_binlog,
        ),
        ServerFacts::Sqlite(s) => format!(
            "{} {} (journal_mode={}, synchronous={}, busy_timeout={} ms, {}; server variables {})",
            s.flavor,
            s.version,
            s.journal_mode,
            s.synchronous,
            s.busy_timeout_ms,
            s.writers,
            s.variables,
        ),
    }
}

/// One table row.
fn table_row(f: &Figure) -> Vec<String> {
    let compared = match (&f.baseline_label, f.baseline_value) {
        (Some(label), Some(v)) => {
            format!(
                "{label}: {}",
                value_text(v, f.baseline_unit.unwrap_or(f.unit))
            )
        }
        _ => String::new(),
    };
    let ratio = f.ratio.map(|r| format!("{r:.2}×")).unwrap_or_default();
    let (p50, p99) = match &f.latency {
        Some(l) => (ms_text(l.p50_ms), ms_text(l.p99_ms)),
        None => (String::new(), String::new()),
    };
    let checked = match (f.duplicates, f.losses) {
        (Some(d), Some(l)) => format!("{d}/{l}"),
        _ => String::new(),
    };
    vec![
        f.label.clone(),
        value_text(f.value, f.unit),
        compared,
        ratio,
        p50,
        p99,
        checked,
    ]
}

/// A value with its unit, rounded for reading.
pub fn value_text(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Ms => ms_text(v),
        Unit::MiB => format!("{v:.1} MiB"),
        Unit::StatementsPerOp => format!("{v:.2} statements"),
        Unit::MsgPerS | Unit::RowsPerS | Unit::QueriesPerS => {
            let label = match unit {
                Unit::MsgPerS => "msg/s",
                Unit::RowsPerS => "rows/s",
                _ => "queries/s",
            };
            if v < 100.0 {
                format!("{v:.1} {label}")
            } else {
                format!("{} {label}", grouped(v.round() as u64))
            }
        }
    }
}

/// Milliseconds with a precision that suits their size.
fn ms_text(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// `1234567` → `1,234,567`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_values() {
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped(999), "999");
        assert_eq!(value_text(14_012.4, Unit::MsgPerS), "14,012 msg/s");
        assert_eq!(value_text(5.56, Unit::QueriesPerS), "5.6 queries/s");
        assert_eq!(value_text(2.5, Unit::Ms), "2.50 ms");
        assert_eq!(value_text(512.0, Unit::Ms), "512 ms");
    }
}
