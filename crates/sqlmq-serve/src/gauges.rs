//! `/metrics`: the recorder's counters and histograms (the library's, and this server's HTTP
//! figures), then the gauges read from the database by the refresher, rendered from the last
//! snapshot in Prometheus' text format.
//!
//! The database gauges are rendered here rather than set through the `metrics` facade so that
//! a deleted queue or group disappears from the next scrape instead of lingering with its
//! last value.

use std::collections::HashSet;
use std::fmt::Write;
use std::sync::OnceLock;
use std::time::SystemTime;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::snapshot::{SILENT_AFTER, Snapshot};

/// Install `metrics-exporter-prometheus` as the global `metrics` recorder (once per process;
/// later calls return the same handle), with the HELP text of every metric of the library and
/// of this server. The `sqlmq` binary calls it before serving; an application embedding the
/// server may install its own recorder instead and pass its handle to
/// [`ServeConfig::prometheus`](crate::ServeConfig::prometheus).
///
/// The recorder leaves out the facade's copy of a family that [`render_gauges`] renders from
/// the database (the library's `sqlmq_group_consume_timeouts{group="topic/group"}`, set by the
/// group maintenance the refresher runs): `/metrics` would otherwise have the family twice,
/// which the Prometheus text format forbids (`promtool check metrics` rejects it).
///
/// ```no_run
/// let handle = sqlmq_serve::install_prometheus_recorder();
/// println!("{}", handle.render());
/// ```
pub fn install_prometheus_recorder() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            let recorder = WithoutDatabaseFamilies {
                inner: recorder,
                families: database_families(),
            };
            // Fails only when another recorder is installed: then ours is not the global
            // one and the handle renders nothing but what is recorded through it (nothing).
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder is already installed; /metrics shows only the database gauges");
            }
            // Every metric of the library and of this server, with its help text.
            sqlmq::telemetry::describe_metrics();
            handle
        })
        .clone()
}

/// The names of the families [`render_gauges`] renders.
fn database_families() -> HashSet<String> {
    let every = Snapshot {
        taken_at: Some(SystemTime::UNIX_EPOCH),
        history_list_length: Some(sqlmq::admin::HistoryListLength::Length(0)),
        ..Snapshot::default()
    };
    render_gauges(&every)
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect()
}

/// A recorder that drops the metrics named in `families` and hands everything else on.
struct WithoutDatabaseFamilies<R> {
    inner: R,
    families: HashSet<String>,
}

impl<R> WithoutDatabaseFamilies<R> {
    fn keeps(&self, name: &str) -> bool {
        !self.families.contains(name)
    }
}

impl<R: Recorder> Recorder for WithoutDatabaseFamilies<R> {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        if self.keeps(key.as_str()) {
            self.inner.describe_counter(key, unit, description);
        }
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        if self.keeps(key.as_str()) {
            self.inner.describe_gauge(key, unit, description);
        }
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        if self.keeps(key.as_str()) {
            self.inner.describe_histogram(key, unit, description);
        }
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if self.keeps(key.name()) {
            self.inner.register_counter(key, metadata)
        } else {
            Counter::noop()
        }
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        if self.keeps(key.name()) {
            self.inner.register_gauge(key, metadata)
        } else {
            Gauge::noop()
        }
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        if self.keeps(key.name()) {
            self.inner.register_histogram(key, metadata)
        } else {
            Histogram::noop()
        }
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

const REFRESHED: &str = "read from the database by a background task every --metrics-refresh (default 10s); a scrape never waits on the database";

struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help} ({REFRESHED})");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn line(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            let inner: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
                .collect();
            let _ = write!(self.out, "{{{}}}", inner.join(","));
        }
        let _ = writeln!(self.out, " {value}");
    }
}

/// The database gauges of `snapshot`.
///
/// ```
/// let text = sqlmq_serve::render_gauges(&sqlmq_serve::Snapshot::default());
/// assert!(text.contains("sqlmq_up 0"));
/// ```
pub fn render_gauges(s: &Snapshot) -> String {
    let mut out = String::new();
    let mut f = Family { out: &mut out };
    f.head(
        "sqlmq_up",
        "gauge",
        "1 when the last read of the database succeeded, else 0",
    );
    f.line("sqlmq_up", &[], if s.up { 1.0 } else { 0.0 });
    if let Some(at) = s.taken_at {
        let secs = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        f.head(
            "sqlmq_gauges_refreshed_timestamp_seconds",
            "gauge",
            "Unix time of the last successful read of the database gauges",
        );
        f.line("sqlmq_gauges_refreshed_timestamp_seconds", &[], secs);
    }

    f.head(
        "sqlmq_queue_messages",
        "gauge",
        "Messages of a queue by state: ready, scheduled, blocked, waiting, in_flight, dead",
    );
    for q in &s.queues {
        for (state, n) in [
            ("ready", q.ready),
            ("scheduled", q.scheduled),
            ("blocked", q.blocked),
            ("waiting", q.waiting),
            ("in_flight", q.in_flight),
            ("dead", q.dead),
        ] {
            f.line(
                "sqlmq_queue_messages",
                &[("queue", &q.name), ("state", state)],
                n as f64,
            );
        }
    }
    f.head(
        "sqlmq_queue_oldest_ready_age_seconds",
        "gauge",
        "Age of a queue's oldest ready message, 0 when none is ready",
    );
    for q in &s.queues {
        let age = q.oldest_ready_age().map_or(0.0, |d| d.as_secs_f64());
        f.line(
            "sqlmq_queue_oldest_ready_age_seconds",
            &[("queue", &q.name)],
            age,
        );
    }
    // The figures of each listed fairness key: name, kind, help and value.
    type KeyFigure = fn(&sqlmq::queue::FairnessKey) -> f64;
    let key_figures: [(&str, &str, &str, KeyFigure); 6] = [
        (
            "sqlmq_fairness_key_ready_messages",
            "gauge",
            "Ready messages of a fair queue's fairness key (the keys with the most)",
            |k| k.ready as f64,
        ),
        (
            "sqlmq_fairness_key_in_flight_messages",
            "gauge",
            "Messages of a fairness key claimed and not yet settled",
            |k| k.in_flight as f64,
        ),
        (
            "sqlmq_fairness_key_oldest_ready_age_seconds",
            "gauge",
            "Age of a fairness key's oldest ready message (the keys with the most ready)",
            |k| k.oldest_ready_ms as f64 / 1000.0,
        ),
        (
            "sqlmq_fairness_key_weight",
            "gauge",
            "A fairness key's weight: its share of claims over the sum of the busy keys' weights",
            |k| f64::from(k.weight),
        ),
        (
            "sqlmq_fairness_key_arrived_total",
            "counter",
            "Messages of a fairness key made ready (sent, due, back after a retry's backoff)",
            |k| k.arrived as f64,
        ),
        (
            "sqlmq_fairness_key_settled_total",
            "counter",
            "Messages of a fairness key that left (acked, dead, cancelled, purged, retrying)",
            |k| k.settled as f64,
        ),
    ];
    for (name, kind, help, value) in key_figures {
        f.head(name, kind, help);
        for (queue, keys) in &s.fairness_keys {
            for k in keys {
                f.line(name, &[("queue", queue), ("key", &k.key)], value(k));
            }
        }
    }
    f.head("sqlmq_queue_paused", "gauge", "1 when a queue is paused");
    for q in &s.queues {
        f.line(
            "sqlmq_queue_paused",
            &[("queue", &q.name)],
            if q.paused { 1.0 } else { 0.0 },
        );
    }

    f.head(
        "sqlmq_group_lag_records",
        "gauge",
        "Records of a partition a consumer group has not consumed yet (backlog, in flight, retrying)",
    );
    for g in &s.groups {
        for p in &g.partitions {
            let part = p.partition.to_string();
            let lag = p.backlog + p.in_flight + p.retrying;
            f.line(
                "sqlmq_group_lag_records",
                &[
                    ("topic", &g.topic),
                    ("group", &g.group),
                    ("partition", &part),
                ],
                lag as f64,
            );
        }
    }
    f.head(
        "sqlmq_group_oldest_unconsumed_age_seconds",
        "gauge",
        "Age of a partition's oldest record a consumer group has not consumed, 0 when none",
    );
    for g in &s.groups {
        for p in &g.partitions {
            let part = p.partition.to_string();
            let age = p.oldest_unconsumed_age.map_or(0.0, |d| d.as_secs_f64());
            f.line(
                "sqlmq_group_oldest_unconsumed_age_seconds",
                &[
                    ("topic", &g.topic),
                    ("group", &g.group),
                    ("partition", &part),
                ],
                age,
            );
        }
    }
    f.head(
        "sqlmq_group_records",
        "gauge",
        "Records of a consumer group by state: in_flight, retrying, dead",
    );
    for g in &s.groups {
        for (state, n) in [
            ("in_flight", g.in_flight),
            ("retrying", g.retrying),
            ("dead", g.dead),
        ] {
            f.line(
                "sqlmq_group_records",
                &[("topic", &g.topic), ("group", &g.group), ("state", state)],
                n as f64,
            );
        }
    }
    f.head(
        "sqlmq_group_consume_timeouts",
        "gauge",
        "Records held by a member longer than the group's consume timeout",
    );
    for (label, n) in &s.consume_timeouts {
        let (topic, group) = label.split_once('/').unwrap_or((label, ""));
        f.line(
            "sqlmq_group_consume_timeouts",
            &[("topic", topic), ("group", group)],
            *n as f64,
        );
    }

    f.head("sqlmq_topic_records", "gauge", "Records a topic retains");
    for t in &s.topics {
        f.line(
            "sqlmq_topic_records",
            &[("topic", &t.name)],
            t.records as f64,
        );
    }
    f.head(
        "sqlmq_topic_bytes",
        "gauge",
        "Bytes of bodies a topic retains",
    );
    for t in &s.topics {
        f.line("sqlmq_topic_bytes", &[("topic", &t.name)], t.bytes as f64);
    }
    f.head(
        "sqlmq_topic_sequenced_records_total",
        "counter",
        "Records ever given an offset in a topic (the sum of its partitions' ends)",
    );
    for t in &s.topics {
        f.line(
            "sqlmq_topic_sequenced_records_total",
            &[("topic", &t.name)],
            t.total as f64,
        );
    }

    f.head(
        "sqlmq_processes_live",
        "gauge",
        "Registered worker processes",
    );
    f.line("sqlmq_processes_live", &[], s.processes.len() as f64);
    f.head(
        "sqlmq_processes_silent",
        "gauge",
        "Registered worker processes silent for more than 15 s (three missed heartbeats; the dashboard's silent workers)",
    );
    let silent = s
        .processes
        .iter()
        .filter(|p| p.silent_for > SILENT_AFTER)
        .count();
    f.line("sqlmq_processes_silent", &[], silent as f64);

    f.head(
        "sqlmq_schedule_overdue_seconds",
        "gauge",
        "How far past its next fire time a recurring schedule that is not paused is, by the database's clock (0 while not due; a few seconds between passes; growing when no process fires schedules)",
    );
    for (name, late) in s.schedules_overdue() {
        f.line(
            "sqlmq_schedule_overdue_seconds",
            &[("schedule", name)],
            late.as_secs_f64(),
        );
    }

    // Absent, not 0, where there is no figure (SQLite) or the server would not tell: an alert
    // on it must not read "unknown" as "fine".
    if let Some(length) = s.history_list_length.as_ref().and_then(|h| h.length()) {
        f.head(
            "sqlmq_innodb_history_list_length",
            "gauge",
            "InnoDB's history list length: undo logs of committed transactions not purged yet, server-wide (grows while a transaction stays open or purge lags; absent where unavailable)",
        );
        f.line("sqlmq_innodb_history_list_length", &[], length as f64);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_leaves_out_the_families_rendered_from_the_database() {
        let families = database_families();
        for name in [
            "sqlmq_group_consume_timeouts",
            "sqlmq_gauges_refreshed_timestamp_seconds",
            "sqlmq_processes_silent",
            "sqlmq_innodb_history_list_length",
            "sqlmq_schedule_overdue_seconds",
        ] {
            assert!(families.contains(name), "{name}: {families:?}");
        }
        let inner = PrometheusBuilder::new().build_recorder();
        let handle = inner.handle();
        let recorder = WithoutDatabaseFamilies { inner, families };
        metrics::with_local_recorder(&recorder, || {
            metrics::describe_gauge!("sqlmq_group_consume_timeouts", "the facade's");
            metrics::gauge!(sqlmq::telemetry::catalogue::GROUP_CONSUME_TIMEOUTS.name(), "group" => "t/g").set(2.0);
            metrics::gauge!(sqlmq::telemetry::catalogue::GROUP_LAG.name(), "group" => "t/g")
                .set(3.0);
        });
        let text = handle.render();
        assert!(!text.contains("sqlmq_group_consume_timeouts"), "{text}");
        assert!(text.contains("sqlmq_group_lag{group=\"t/g\"} 3"), "{text}");
    }

    #[test]
    fn labels_are_escaped_and_every_family_has_help_and_type() {
        let mut s = Snapshot {
            up: true,
            ..Snapshot::default()
        };
        let mut q = sqlmq::queue::QueueStats::default();
        q.name = "a\"b".into();
        q.ready = 3;
        s.queues.push(q);
        let text = render_gauges(&s);
        assert!(text.contains("sqlmq_queue_messages{queue=\"a\\\"b\",state=\"ready\"} 3"));
        for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
            let name = line.split(' ').nth(2).unwrap();
            assert!(text.contains(&format!("# HELP {name} ")), "{name}");
        }
    }

    #[test]
    fn the_history_list_length_is_absent_unless_the_server_told_it() {
        use sqlmq::admin::HistoryListLength::{Length, Unavailable};
        let with = |h| Snapshot {
            up: true,
            history_list_length: h,
            ..Snapshot::default()
        };
        let text = render_gauges(&with(Some(Length(1234))));
        assert!(
            text.contains("\nsqlmq_innodb_history_list_length 1234\n"),
            "{text}"
        );
        assert!(text.contains("# HELP sqlmq_innodb_history_list_length "));
        for h in [None, Some(Unavailable("PROCESS".into()))] {
            let text = render_gauges(&with(h));
            assert!(!text.contains("sqlmq_innodb_history_list_length"), "{text}");
        }
    }
}
