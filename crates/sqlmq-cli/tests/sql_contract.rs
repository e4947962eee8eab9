//! The SQL contract (the guide, "Sending from SQL"): a program in another language enqueues with
//! `CALL sqlmq_send(…)` inside its own business transactions — here Python with PyMySQL, as
//! the application's user with only the runtime grants — and `sqlmq consume` delivers what it
//! committed: nothing of a rolled-back transaction, keys in order, duplicates once.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::{TestDb, lines};

/// Writes one line per message: id|ordering key|tenant header|body.
const RECORDING_CMD: &str = r#"body=$(cat); printf '%s|%s|%s|%s\n' "$SQLMQ_MESSAGE_ID" "${SQLMQ_ORDERING_KEY-}" "${SQLMQ_HEADER_TENANT-}" "$body" >> seen"#;

#[test]
fn python_enqueues_in_its_own_transactions_and_sqlmq_consume_delivers_what_committed() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "orders"]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/sql/enqueue_from_python.py"
    );
    let out = Command::new("python3")
        .args([script, db.admin_url(), &db.url])
        .output()
        .expect("python3 (scripts/test.sh installs PyMySQL beside it)");
    assert!(
        out.status.success(),
        "the Python program failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let expect: BTreeMap<String, String> =
        serde_json::from_value(report["expect"].clone()).unwrap();
    assert_eq!(expect.len(), 5, "{report}");

    let out = db
        .spawn(&[
            "consume",
            "orders",
            "--exec",
            RECORDING_CMD,
            "--concurrency",
            "1",
            "--max-messages",
            &expect.len().to_string(),
        ])
        .wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = lines(&db.path("seen"));
    let delivered: BTreeMap<String, String> = seen
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, '|').collect();
            (f[0].to_owned(), f[3].to_owned())
        })
        .collect();
    assert_eq!(delivered, expect, "{seen:?}");
    assert_eq!(seen.len(), expect.len(), "each once: {seen:?}");

    // The key's messages in the order they were sent; the header and key as sent.
    let first = report["first"].as_str().unwrap();
    let second = report["second"].as_str().unwrap();
    let at = |id: &str| seen.iter().position(|l| l.starts_with(id)).unwrap();
    assert!(at(first) < at(second), "{seen:?}");
    assert!(seen[at(first)].starts_with(&format!("{first}|customer-7|acme|")));
    assert_eq!(db.stats("orders").pending(), 0);
}
