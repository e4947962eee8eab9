//! Dead letters through the CLI: retries, the error history, redrive (the guide, "Retry and dead letters").

mod common;

use std::time::Duration;

use common::{Stats, TestDb, eventually};
use serde_json::Value;

/// Claim the queue's one message, waiting for its backoff to pass.
fn claim(db: &TestDb, queue: &str) -> Value {
    eventually(Duration::from_secs(10), "the message to be ready", || {
        let got = db.json(&["recv", queue, "--json", "--lease", "1m"]);
        got.as_array().unwrap().first().cloned()
    })
}

/// Guarantee: a message nacked until its attempts run out (max 2) becomes a dead letter that
/// `dlq list --json` shows with its whole error history; `dlq redrive --all` puts it back with
/// its attempts reset.
#[test]
fn nacked_until_dead_then_listed_and_redriven() {
    let db = TestDb::new();
    db.ok(&[
        "queue",
        "create",
        "d",
        "--max-attempts",
        "2",
        "--backoff",
        "100ms",
    ]);
    let id = db.ok(&["send", "d", "{\"order\": 7}"]).trim().to_owned();

    let first = claim(&db, "d");
    assert_eq!(first["attempt"], 1);
    let out = db.ok(&[
        "nack",
        "d",
        first["receipt"].as_str().unwrap(),
        "--error",
        "smtp timeout",
    ]);
    assert!(out.contains("retried in"), "{out}");
    assert_eq!(db.stats("d").dead, 0);

    let second = claim(&db, "d");
    assert_eq!(second["attempt"], 2);
    let out = db.ok(&[
        "nack",
        "d",
        second["receipt"].as_str().unwrap(),
        "--error",
        "smtp refused\nsecond line",
    ]);
    assert!(out.contains("dead letter"), "{out}");
    assert_eq!(
        db.stats("d"),
        Stats {
            dead: 1,
            ..Stats::default()
        }
    );

    let dead = db.json(&["dlq", "list", "d", "--json"]);
    let dead = dead.as_array().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["id"], id.as_str());
    assert_eq!(dead[0]["attempts"], 2);
    assert_eq!(dead[0]["body"], "{\"order\": 7}");
    let errors: Vec<(u64, &str)> = dead[0]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["attempt"].as_u64().unwrap(), e["error"].as_str().unwrap()))
        .collect();
    assert_eq!(
        errors,
        [(1, "smtp timeout"), (2, "smtp refused\nsecond line")]
    );
    let table = db.ok(&["dlq", "list", "d"]);
    assert!(
        table.contains(&id) && table.contains("smtp refused second line"),
        "{table}"
    );

    // Redrive by an id that is not a dead letter: named, exit 1, nothing changes.
    db.fails(
        &[
            "dlq",
            "redrive",
            "d",
            "01a204ca-9864-70ad-9b80-bf7238019630",
        ],
        1,
        "not dead letters",
    );
    db.fails(&["dlq", "redrive", "d"], 2, "--all");
    let out = db.ok(&["dlq", "redrive", "d", "--all"]);
    assert!(out.contains("redrove 1"), "{out}");
    assert_eq!(
        db.stats("d"),
        Stats {
            ready: 1,
            ..Stats::default()
        }
    );
    let back = claim(&db, "d");
    assert_eq!(back["id"], id.as_str());
    assert_eq!(back["attempt"], 1, "a redrive resets the attempts");
}

/// Guarantee: redrive by id and purge act on dead letters only.
#[test]
fn redrive_by_id_and_purge() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "p", "--max-attempts", "1"]);
    let ids: Vec<String> = db
        .ok_with_stdin(&["send", "p", "--batch"], b"a\nb\nc\n")
        .lines()
        .map(str::to_owned)
        .collect();
    let got = db.json(&["recv", "p", "-n", "3", "--json"]);
    for m in got.as_array().unwrap() {
        db.ok(&["nack", "p", m["receipt"].as_str().unwrap()]);
    }
    assert_eq!(db.stats("p").dead, 3);
    let out = db.ok(&["dlq", "redrive", "p", &ids[0]]);
    assert!(out.contains("redrove 1"), "{out}");
    assert_eq!(db.stats("p").ready, 1);
    let out = db.ok(&["dlq", "purge", "p", "--yes"]);
    assert!(out.contains("deleted 2"), "{out}");
    assert_eq!(
        db.stats("p"),
        Stats {
            ready: 1,
            ..Stats::default()
        }
    );
}
