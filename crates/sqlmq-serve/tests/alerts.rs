//! The Prometheus alerting rules of `docs/alerts/`: `promtool check rules` accepts them, their
//! unit tests (`promtool test rules`: every alert fired by one series and not by another, its
//! `for:` included) pass, every alert has a test, a live server's `/metrics` passes
//! `promtool check metrics` (no lint either), and every metric the rules name is in that live
//! `/metrics` — a renamed metric breaks this test, not the operators' alerts.
//! `scripts/test.sh` installs promtool (Debian package prometheus); without it this test fails
//! and says how to install it.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{TestDb, TestServer, eventually, require_tool, test_config, workspace_root};
use serde_json::{Value, json};

const RULES: &str = "docs/alerts/sqlmq.rules.yml";
const RULE_TESTS: &str = "docs/alerts/sqlmq.rules.test.yml";

fn promtool() -> String {
    require_tool(
        "promtool",
        "SQLMQ_PROMTOOL",
        "apt-get install prometheus (the Debian package has promtool; scripts/test.sh installs it)",
    )
}

/// Run promtool with `args` (and `stdin`) from the workspace root; its output, or a failure
/// that shows it.
fn run_promtool(args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(promtool())
        .args(args)
        .current_dir(workspace_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {} failed ({}):\n{text}",
        args.join(" "),
        out.status
    );
    text
}

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The value of every `key:` of a YAML file, a block scalar (`key: |` and the lines indented
/// under it) joined into one string.
fn yaml_values(text: &str, key: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let indent = |l: &str| l.len() - l.trim_start().len();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start().trim_start_matches("- ");
        let Some(rest) = t.strip_prefix(key).and_then(|r| r.strip_prefix(':')) else {
            continue;
        };
        let rest = rest.trim();
        if rest.starts_with('|') || rest.starts_with('>') {
            let block: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|l| l.trim().is_empty() || indent(l) > indent(line))
                .map(|l| l.trim())
                .collect();
            out.push(block.join(" "));
        } else {
            out.push(rest.trim_matches(|c| c == '"' || c == '\'').to_owned());
        }
    }
    out
}

/// PromQL's words that are no metric: binary operators, modifiers and aggregations (which
/// may be followed by `by (…)` rather than their parenthesis).
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "atan2",
    "offset",
    "bool",
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
/// Modifiers followed by a list of label names in parentheses.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names a PromQL expression reads: its identifiers outside label matchers, label
/// lists, ranges and strings that are neither functions nor keywords.
fn metrics_of(expr: &str) -> BTreeSet<String> {
    let mut plain = String::new();
    let mut depth = 0;
    let mut quote = None;
    for c in expr.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '{' | '[') => depth += 1,
            (None, '}' | ']') => depth -= 1,
            (None, c) if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let mut names = BTreeSet::new();
    let mut rest = plain.as_str();
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
        // A duration or a number's exponent (`5m`, `1e3`) is not a word.
        let in_number = start > 0 && rest.as_bytes()[start - 1].is_ascii_digit();
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        let word = &tail[..end];
        rest = &tail[end..];
        let next = rest.trim_start();
        if LABEL_LISTS.contains(&word) && next.starts_with('(') {
            rest = &next[next.find(')').map_or(next.len(), |i| i + 1)..];
        } else if !next.starts_with('(') && !KEYWORDS.contains(&word) && !in_number {
            names.insert(word.to_owned());
        }
    }
    names
}

#[test]
fn the_metric_names_of_an_expression() {
    let names = |e: &str| metrics_of(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(
            "sum without (partition) (a_total{x=\"y z\"}) > sum by(q) (rate(b[5m] offset 1h)) unless c == bool 1e3"
        ),
        ["a_total", "b", "c"]
    );
}

/// The metric names of a Prometheus text exposition (`foo_seconds_count` included).
fn exposed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_rules_are_valid_and_their_unit_tests_pass() {
    run_promtool(&["check", "rules", RULES], None);
    let tested = run_promtool(&["test", "rules", RULE_TESTS], None);
    assert!(tested.contains("SUCCESS"), "{tested}");

    // Every alert has a test, and every expression reads sqlmq's metrics only.
    let rules = read(RULES);
    let tests = read(RULE_TESTS);
    let alerts = yaml_values(&rules, "alert");
    assert!(alerts.len() >= 6, "{alerts:?}");
    let tested: BTreeSet<String> = yaml_values(&tests, "alertname").into_iter().collect();
    for alert in &alerts {
        assert!(
            tested.contains(alert),
            "{alert} has no test in {RULE_TESTS}"
        );
    }
    let exprs = yaml_values(&rules, "expr");
    assert_eq!(exprs.len(), alerts.len(), "one expression per alert");
    for expr in &exprs {
        let names = metrics_of(expr);
        assert!(!names.is_empty(), "{expr}");
        for name in names {
            assert!(
                name.starts_with("sqlmq_"),
                "{name} (in {expr}) is not sqlmq's"
            );
        }
    }
}

async fn receive(s: &TestServer, path: &str, max: u32) -> Vec<Value> {
    let (status, got) = s
        .post(
            path,
            json!({"max": max, "lease_ms": 600000, "wait_ms": 2000}),
        )
        .await;
    assert_eq!(status, 200, "{got}");
    got["messages"].as_array().unwrap().clone()
}

fn receipts(messages: &[Value]) -> Value {
    messages.iter().map(|m| m["receipt"].clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_metrics_pass_promtool_and_hold_every_metric_the_rules_name() {
    promtool(); // fail before the setup when it is missing
    let handle = sqlmq_serve::install_prometheus_recorder();
    // The server's user is given what `sqlmq grants --monitoring` prints, as the guide tells
    // operators to, before it connects: nothing on MariaDB, which reports InnoDB's history list
    // length to every user; PROCESS on MySQL.
    let db = TestDb::new().await;
    let admin = sqlmq::Client::connect(&db.admin_url).await.unwrap();
    for grant in admin
        .grants(sqlmq::admin::GrantRole::Monitoring, &db.name, "%")
        .await
        .unwrap()
    {
        db.exec(&grant, &[]).await;
    }
    admin.pool().close().await;
    let client = db.client().await;
    let s = TestServer::on(db, client, test_config().prometheus(handle)).await;

    // A queue with traffic: acked, dead-lettered and waiting messages.
    assert_eq!(
        s.put("/v1/queues/jobs", json!({"max_attempts": 1})).await.0,
        200
    );
    s.send("jobs", &["a", "b", "c", "d"]).await;
    let got = receive(&s, "/v1/queues/jobs/receive", 2).await;
    assert_eq!(got.len(), 2);
    let (_, acked) = s
        .post(
            "/v1/queues/jobs/ack",
            json!({"receipts": [got[0]["receipt"]]}),
        )
        .await;
    assert_eq!(acked["results"][0]["result"], "ok", "{acked}");
    let (_, nacked) = s
        .post(
            "/v1/queues/jobs/nack",
            json!({"receipts": [got[1]["receipt"]], "error": "boom"}),
        )
        .await;
    assert_eq!(nacked["results"][0]["result"], "ok", "{nacked}");

    // A topic with a cluster group whose consume timeout a held record outlives, and a
    // dead letter.
    assert_eq!(
        s.put("/v1/topics/orders", json!({"partitions": 2})).await.0,
        200
    );
    let (status, group) = s
        .put(
            "/v1/topics/orders/groups/billing",
            json!({"mode": "cluster", "start": "earliest", "max_attempts": 1, "consume_timeout_ms": 1}),
        )
        .await;
    assert_eq!(status, 200, "{group}");
    let (status, published) = s
        .post(
            "/v1/topics/orders/records",
            json!({"records": [{"body": "r0", "key": "k0"}, {"body": "r1", "key": "k1"}, {"body": "r2", "key": "k2"}]}),
        )
        .await;
    assert_eq!(status, 200, "{published}");
    let g = "/v1/topics/orders/groups/billing";
    let held = eventually(Duration::from_secs(10), "records to consume", || async {
        let got = receive(&s, &format!("{g}/receive"), 3).await;
        (!got.is_empty()).then_some(got)
    })
    .await;
    let (_, nacked) = s
        .post(
            &format!("{g}/nack"),
            json!({"receipts": receipts(&held[..1]), "error": "boom"}),
        )
        .await;
    assert_eq!(nacked["results"][0]["result"], "ok", "{nacked}");

    // A schedule nothing can fire (its queue deleted): it falls behind its fire time.
    assert_eq!(s.put("/v1/queues/gone", json!({})).await.0, 200);
    let (status, created) = s
        .put(
            "/v1/schedules/orphan",
            json!({"every": "1s", "queue": "gone"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(s.delete("/v1/queues/gone").await.0, 204);

    let text = eventually(Duration::from_secs(15), "every gauge refreshed", || async {
        let r = s.http.get(s.url("/metrics")).send().await.unwrap();
        let text = r.text().await.unwrap();
        let ready = text.contains("sqlmq_queue_messages{queue=\"jobs\",state=\"dead\"} 1")
            && text.contains(
                "sqlmq_group_records{topic=\"orders\",group=\"billing\",state=\"dead\"} 1",
            )
            && text.contains("sqlmq_group_consume_timeouts{topic=\"orders\",group=\"billing\"}")
            && text.contains("sqlmq_schedule_overdue_seconds{schedule=\"orphan\"}");
        ready.then_some(text)
    })
    .await;
    std::fs::write(std::env::temp_dir().join("sqlmq-metrics.txt"), &text).unwrap();

    let linted = run_promtool(&["check", "metrics"], Some(&text));
    assert!(linted.trim().is_empty(), "promtool check metrics: {linted}");

    let live = exposed(&text);
    let mut named = BTreeSet::new();
    for expr in yaml_values(&read(RULES), "expr") {
        named.extend(metrics_of(&expr));
    }
    assert!(!named.is_empty());
    for name in &named {
        assert!(
            live.contains(name),
            "{RULES} names {name}, which the live /metrics does not have:\n{text}"
        );
    }
    s.finish().await;
}
