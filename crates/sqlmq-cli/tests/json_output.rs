//! Every `--json` command prints one format: times as RFC 3339 UTC with milliseconds
//! (`2026-11-28T18:35:29.123Z`), durations as whole milliseconds in fields ending in `_ms`.
//!
//! The commands are found from the binary's own help (every subcommand, recursively, that has
//! a `--json` option), so a new `--json` command fails this test until it is run here too.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::TestDb;
use serde_json::Value;

/// Every command path (`["dlq", "list"]`) whose help offers `--json`.
fn json_commands() -> BTreeSet<Vec<String>> {
    fn help(path: &[String]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_sqlmq"))
            .args(path)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{path:?} --help");
        String::from_utf8(out.stdout).unwrap()
    }
    fn walk(path: Vec<String>, found: &mut BTreeSet<Vec<String>>) {
        let text = help(&path);
        if text.contains("--json") {
            found.insert(path.clone());
        }
        let Some(start) = text.find("Commands:\n") else {
            return;
        };
        let block = &text[start + "Commands:\n".len()..];
        for line in block.lines().take_while(|l| !l.trim().is_empty()) {
            let name = line.split_whitespace().next().unwrap();
            if name != "help" {
                let mut sub = path.clone();
                sub.push(name.to_owned());
                walk(sub, found);
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(Vec::new(), &mut found);
    found
}

/// `2026-11-28T18:35:29.123Z`.
fn is_time(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
        && humantime::parse_rfc3339(text).is_ok()
}

/// `YYYY-MM-DDT…`: meant as a time, whatever follows.
fn looks_like_a_time(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() > 11 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[10] == b'T'
}

/// Keys that hold a point in time.
fn names_a_time(key: &str) -> bool {
    key.ends_with("_at") || ["at", "since", "lease_until", "next_fire", "last_fired"].contains(&key)
}

/// Keys that hold a duration but do not say their unit.
fn names_a_bare_duration(key: &str) -> bool {
    let words = [
        "age",
        "window",
        "timeout",
        "retention",
        "interval",
        "every",
        "silent_for",
    ];
    !key.ends_with("_ms")
        && words
            .iter()
            .any(|w| key == *w || key.ends_with(&format!("_{w}")))
}

/// What one document held, for the checks that the test saw what it checks.
#[derive(Default)]
struct Seen {
    times: usize,
    durations: usize,
}

/// Check every value of `v` (at `path`), counting what was seen.
fn check(v: &Value, path: &str, seen: &mut Seen) {
    match v {
        Value::Object(map) => {
            for bad in ["secs_since_epoch", "nanos_since_epoch", "secs", "nanos"] {
                assert!(
                    !map.contains_key(bad),
                    "{path}: Rust's own form of a time: {v}"
                );
            }
            for (key, value) in map {
                let at = format!("{path}.{key}");
                if names_a_time(key) {
                    match value {
                        Value::String(s) => {
                            assert!(is_time(s), "{at}: {s:?} is not RFC 3339 UTC with ms");
                            seen.times += 1;
                        }
                        Value::Null => {}
                        other => panic!("{at}: a time as {other}"),
                    }
                } else if key.ends_with("_ms") {
                    assert!(
                        value.is_u64() || value.is_null(),
                        "{at}: {value} is not whole ms"
                    );
                    seen.durations += value.is_u64() as usize;
                } else {
                    assert!(!names_a_bare_duration(key), "{at}: a duration without _ms");
                }
                check(value, &at, seen);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check(item, &format!("{path}[{i}]"), seen);
            }
        }
        // A string that looks like a time anywhere (headers aside) is in the one form too.
        Value::String(s) if looks_like_a_time(s) && !path.contains(".headers.") => {
            assert!(is_time(s), "{path}: {s:?} is not RFC 3339 UTC with ms");
        }
        _ => {}
    }
}

/// Run `args` and parse its output: one JSON document, or one per line (`subscribe`).
fn documents(db: &TestDb, args: &[&str]) -> Vec<Value> {
    let text = db.ok(args);
    match serde_json::from_str(&text) {
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: {e}: {l}")))
            .collect(),
    }
}

#[test]
fn every_json_command_prints_times_and_durations_in_one_form() {
    let db = TestDb::new();
    // A queue with a dead letter (with its error history), a scheduled and an in-flight message.
    db.ok(&["queue", "create", "jobs", "--max-attempts", "1"]);
    let dying = db.ok(&["send", "jobs", "dies"]).trim().to_owned();
    let claimed = db.json(&["recv", "jobs", "--json"]);
    let receipt = claimed[0]["receipt"].as_str().unwrap().to_owned();
    db.ok(&["nack", "jobs", &receipt, "--error", "boom"]);
    let later = db
        .ok(&["send", "jobs", "later", "--delay", "1h"])
        .trim()
        .to_owned();
    db.ok(&["send", "jobs", "now"]);
    // A fair queue with a key waiting.
    db.ok(&["queue", "create", "tenants", "--fair"]);
    db.ok(&["send", "tenants", "report", "--fairness-key", "t1"]);
    // A topic: a cluster group that acked one record and retries another, a broadcast member.
    db.ok(&["topic", "create", "events", "--retention", "7d"]);
    let published = db.json(&["publish", "events", "one", "--json"]);
    let record = published[0]["id"].as_str().unwrap().to_owned();
    db.ok(&["publish", "events", "two"]);
    let group = |name: &str, rest: &[&str]| {
        let mut args = vec!["subscribe", "events", "--group", name, "--from", "earliest"];
        args.extend_from_slice(rest);
        db.ok(&args);
    };
    group("g", &["-n", "1", "--json"]);
    group("r", &["-n", "1", "--exec", "exit 3"]);
    group("b", &["--mode", "broadcast", "-n", "2"]);
    db.ok(&[
        "schedule", "create", "tick", "--every", "1h", "--queue", "jobs",
    ]);
    let batch = db.json(&["batch", "create", "jobs", "a", "b", "--json"]);
    let batch = batch["id"].as_str().unwrap().to_owned();

    let runs: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["migrate"], vec!["migrate", "--json"]),
        (vec!["queues"], vec!["queues", "--json"]),
        (
            vec!["queue", "keys"],
            vec!["queue", "keys", "tenants", "--json"],
        ),
        (vec!["send"], vec!["send", "jobs", "more", "--json"]),
        (
            vec!["recv"],
            vec!["recv", "jobs", "--json", "--lease", "1h"],
        ),
        (vec!["dlq", "list"], vec!["dlq", "list", "jobs", "--json"]),
        (
            vec!["peek"],
            vec!["peek", "jobs", "--state", "scheduled", "--json"],
        ),
        (vec!["show"], vec!["show", "jobs", &later, "--json"]),
        (vec!["schedule", "list"], vec!["schedule", "list", "--json"]),
        (
            vec!["event", "emit"],
            vec!["event", "emit", "shipped", r#"{"n":1}"#, "--json"],
        ),
        (vec!["event", "list"], vec!["event", "list", "--json"]),
        (
            vec!["schedule", "describe"],
            vec!["schedule", "describe", "tick", "--json"],
        ),
        (
            vec!["batch", "create"],
            vec!["batch", "create", "jobs", "c", "--json"],
        ),
        (
            vec!["batch", "show"],
            vec!["batch", "show", &batch, "--json"],
        ),
        (vec!["batch", "list"], vec!["batch", "list", "--json"]),
        (vec!["topic", "list"], vec!["topic", "list", "--json"]),
        (
            vec!["topic", "describe"],
            vec!["topic", "describe", "events", "--json"],
        ),
        (
            vec!["publish"],
            vec!["publish", "events", "three", "--json"],
        ),
        (
            vec!["subscribe"],
            vec!["subscribe", "events", "--group", "g", "-n", "1", "--json"],
        ),
        (vec!["groups"], vec!["groups", "--json"]),
        (vec!["lag"], vec!["lag", "events", "--json"]),
        (
            vec!["retries"],
            vec!["retries", "events", "--group", "r", "--json"],
        ),
        (
            vec!["query"],
            vec!["query", "events", "--since", "1h", "--json"],
        ),
        (vec!["trace"], vec!["trace", "events", &record, "--json"]),
        (
            vec!["reset"],
            vec![
                "reset", "events", "--group", "g", "--to", "earliest", "--json",
            ],
        ),
    ];
    let ran: BTreeSet<Vec<String>> = runs
        .iter()
        .map(|(path, _)| path.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(ran, json_commands(), "run every --json command here");

    let mut total = Seen::default();
    for (path, args) in &runs {
        let docs = if *path == ["migrate"] {
            let out = db.run_as_admin(args);
            assert!(out.status.success(), "{args:?}");
            vec![serde_json::from_slice(&out.stdout).unwrap()]
        } else {
            documents(&db, args)
        };
        assert!(!docs.is_empty(), "{args:?} printed nothing");
        for doc in &docs {
            check(doc, &path.join(" "), &mut total);
        }
    }
    // The check saw what it checks: the dead letter's times and error history, the lease, the
    // schedule's interval, the topic's retention, a group's lag...
    assert!(total.times >= 20, "only {} times seen", total.times);
    assert!(
        total.durations >= 4,
        "only {} durations seen",
        total.durations
    );
    let dead = &documents(&db, &["dlq", "list", "jobs", "--json"])[0][0];
    assert_eq!(dead["id"], dying.as_str());
    assert!(is_time(dead["errors"][0]["at"].as_str().unwrap()), "{dead}");
    let schedule = &documents(&db, &["schedule", "describe", "tick", "--json"])[0];
    assert_eq!(schedule["every_ms"], 3_600_000);
    let topic = &documents(&db, &["topic", "describe", "events", "--json"])[0];
    assert_eq!(topic["config"]["retention_ms"], 7 * 86_400_000u64);
}

#[test]
fn the_checks_catch_the_other_forms() {
    let bad = [
        serde_json::json!({"created_at": {"secs_since_epoch": 1, "nanos_since_epoch": 0}}),
        serde_json::json!({"created_at": "2026-11-28T18:35:29Z"}),
        serde_json::json!({"at": "2026-11-28T18:35:29.123456Z"}),
        serde_json::json!({"every": "1h"}),
        serde_json::json!({"oldest_unconsumed_age": {"secs": 1, "nanos": 0}}),
        serde_json::json!({"wait_ms": "10s"}),
        serde_json::json!({"note": "2026-11-28T19:35:29.123+01:00"}),
    ];
    for doc in bad {
        let caught = std::panic::catch_unwind(|| check(&doc, "", &mut Seen::default()));
        assert!(caught.is_err(), "{doc} passed");
    }
    let good = serde_json::json!({"run_at": "2026-11-28T18:35:29.123Z", "every_ms": 1000});
    check(&good, "", &mut Seen::default());
}
