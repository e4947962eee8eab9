//! `/metrics`: the recorder's counters and histograms (the library's, and this server's HTTP
//! figures), then the gauges read from the database by the refresher, rendered from the last
//! snapshot in Prometheus' text format.
//!
//! The database gauges are rendered here rather than set through the `metrics` facade so that
//! a deleted queue or group disappears from the next scrape instead of lingering with its
//! last value.

use std::fmt::Write;
use std::sync::OnceLock;
use std::time::SystemTime;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::snapshot::Snapshot;

/// Install `metrics-exporter-prometheus` as the global `metrics` recorder (once per process;
/// later calls return the same handle). The `sqlmq` binary calls it before serving; an
/// application embedding the server may install its own recorder instead and pass its handle
/// to [`ServeConfig::prometheus`](crate::ServeConfig::prometheus).
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
            // Fails only when another recorder is installed: then ours is not the global
            // one and the handle renders nothing but what is recorded through it (nothing).
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder is already installed; /metrics shows only the database gauges");
            }
            describe();
            handle
        })
        .clone()
}

/// HELP texts of this server's own facade metrics.
fn describe() {
    metrics::describe_counter!(
        "sqlmq_http_requests_total",
        "HTTP requests answered by sqlmq serve, by route template, method and status"
    );
    metrics::describe_histogram!(
        "sqlmq_http_request_duration_seconds",
        metrics::Unit::Seconds,
        "Time to answer an HTTP request (long polls included), by route template"
    );
    metrics::describe_counter!(
        "sqlmq_http_panics_total",
        "Request handlers that panicked (answered 500 with code internal; a bug to report)"
    );
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
        "Messages of a queue by state: ready, scheduled, blocked, in_flight, dead",
    );
    for q in &s.queues {
        for (state, n) in [
            ("ready", q.ready),
            ("scheduled", q.scheduled),
            ("blocked", q.blocked),
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_every_family_has_help_and_type() {
        let mut s = Snapshot {
            up: true,
            ..Snapshot::default()
        };
        let mut q = sqlmq::QueueStats::default();
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
}
