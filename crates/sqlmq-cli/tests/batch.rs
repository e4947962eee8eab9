//! `send --batch`: every stdin line is a message and the batch is atomic (the atomic enqueue guarantee of the guide (docs/guide/src/guarantees.md)).

mod common;

use std::collections::HashSet;
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use common::{Stats, TestDb};

const LINES: usize = 1000;

fn input(lines: usize, bad_line: Option<usize>) -> Vec<u8> {
    let mut text = String::new();
    for i in 1..=lines {
        if Some(i) == bad_line {
            text.push_str(&"x".repeat(2000));
        } else {
            text.push_str(&format!("message {i}"));
        }
        text.push('\n');
        if i % 100 == 0 {
            // Empty lines are skipped, not sent as empty messages.
            text.push('\n');
        }
    }
    text.into_bytes()
}

/// Guarantee: a batch of 1 000 lines becomes visible all at once: an observer polling the
/// counts while it is sent sees 0 or 1 000, never a part; every line is a message, in order.
#[test]
fn a_batch_of_1000_lines_is_atomic() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "b"]);
    let mut sender = db
        .cmd(&["send", "b", "--batch", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = sender.stdin.take().unwrap();
    // Observe while the batch is written (the write of stdin starts it).
    let observer = {
        let url = db.url.clone();
        std::thread::spawn(move || observe(&url))
    };
    stdin.write_all(&input(LINES, None)).unwrap();
    drop(stdin);
    let out = sender.wait_with_output().unwrap();
    let seen = observer.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ready in &seen {
        assert!(
            *ready == 0 || *ready == LINES as u64,
            "an observer saw a partial batch: {ready} of {LINES} (all seen: {seen:?})"
        );
    }

    let sent: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent = sent.as_array().unwrap();
    assert_eq!(sent.len(), LINES);
    let ids: HashSet<&str> = sent.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), LINES, "every message has its own id");
    assert!(sent.iter().all(|s| s["duplicate"] == false));
    assert_eq!(
        db.stats("b"),
        Stats {
            ready: LINES as u64,
            ..Stats::default()
        }
    );
    let first = db.json(&["recv", "b", "-n", "3", "--json"]);
    let bodies: Vec<&str> = first
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["message 1", "message 2", "message 3"]);
}

/// Polls the ready count of queue `b` until the observer has seen the batch (or 30 s).
fn observe(url: &str) -> Vec<u64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = sqlmq::Client::connect(url).await.unwrap();
        let mut seen = Vec::new();
        let start = std::time::Instant::now();
        loop {
            let stats = client.queue_stats().await.unwrap();
            let ready = stats.iter().find(|s| s.name == "b").map_or(0, |s| s.ready);
            seen.push(ready);
            if ready > 0 || start.elapsed() > Duration::from_secs(30) {
                return seen;
            }
        }
    })
}

/// Guarantee: one invalid line (over --max-payload-bytes) rejects the whole batch with a clear
/// error naming the line, and nothing of it is written, even lines before the bad one.
#[test]
fn a_batch_with_one_invalid_line_writes_nothing() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "b"]);
    db.ok_with_stdin(&["send", "b", "--batch"], &input(LINES, None));
    let before = db.stats("b");
    assert_eq!(before.ready, LINES as u64);

    for bad in [LINES, 1, 500] {
        let stderr = db.fails_with_stdin(
            &["--max-payload-bytes", "1024", "send", "b", "--batch"],
            &input(LINES, Some(bad)),
            1,
            "nothing was sent",
        );
        assert!(stderr.contains(&format!("line {bad}")), "{stderr}");
        assert!(
            stderr.contains("exceeds the limit of 1024 bytes"),
            "{stderr}"
        );
        assert_eq!(db.stats("b"), before, "a rejected batch must write nothing");
    }
}
