//! When `sqlmq consume` stops on its own: `--exit-when-empty` only once nothing is ready,
//! nothing of its own is running or waiting to be acked, and nothing its acks release is left
//! (a key's next messages, dependants, a batch's callback); `--max-messages N` only after N
//! messages were handed out, whatever the number of claim loops.

mod common;

use std::time::Duration;

use common::{Stats, TestDb, lines};

/// Appends each body as a line to `seen` (one write), slowly enough that acks and claims overlap.
const RECORD: &str = r#"body=$(cat); printf '%s\n' "$body" >> seen; sleep 0.2"#;

/// One `consume QUEUE --exit-when-empty` run with 8 slots; returns its summary (stderr).
fn consume_until_empty(db: &TestDb, queue: &str) -> String {
    let out = db
        .spawn(&[
            "consume",
            queue,
            "--exec",
            RECORD,
            "--concurrency",
            "8",
            "--exit-when-empty",
        ])
        .wait(Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// The bodies `RECORD` saw, in the order it saw them.
fn seen(db: &TestDb) -> Vec<String> {
    lines(&db.path("seen"))
        .into_iter()
        .filter(|l| !l.is_empty())
        .collect()
}

/// Five messages of one ordering key run one at a time, each released by the previous one's
/// ack: one run handles all five (it once stopped after the first).
#[test]
fn exit_when_empty_drains_an_ordering_key() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "k"]);
    for i in 0..5 {
        db.ok(&["send", "k", &format!("k-{i}"), "--key", "K"]);
    }
    let summary = consume_until_empty(&db, "k");
    assert!(summary.contains("5 processed"), "{summary}");
    assert_eq!(seen(&db), ["k-0", "k-1", "k-2", "k-3", "k-4"]);
    assert_eq!(db.stats("k"), Stats::default());
}

/// Ten messages of a concurrency key limited to 2 at once: one run handles all ten (it once
/// stopped after the first two, with six blocked).
#[test]
fn exit_when_empty_drains_a_concurrency_key() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "cc", "--concurrency-limit", "2"]);
    let bodies: Vec<String> = (0..10).map(|i| format!("c1-{i:02}")).collect();
    db.ok_with_stdin(
        &["send", "cc", "--batch", "--concurrency-key", "c1"],
        bodies.join("\n").as_bytes(),
    );
    let summary = consume_until_empty(&db, "cc");
    assert!(summary.contains("10 processed"), "{summary}");
    let mut seen = seen(&db);
    seen.sort();
    assert_eq!(seen, bodies);
    assert_eq!(db.stats("cc"), Stats::default());
}

/// A chain a ← b ← c on the consumed queue: each dependant becomes ready when the ack of what
/// it depends on commits, and one run handles all three.
#[test]
fn exit_when_empty_drains_a_dependency_chain() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "chain"]);
    let a = db.ok(&["send", "chain", "a"]);
    let b = db.ok(&["send", "chain", "b", "--depends-on", a.trim()]);
    db.ok(&["send", "chain", "c", "--depends-on", b.trim()]);
    let summary = consume_until_empty(&db, "chain");
    assert!(summary.contains("3 processed"), "{summary}");
    assert_eq!(seen(&db), ["a", "b", "c"]);
    assert_eq!(db.stats("chain"), Stats::default());
}

/// A batch whose callback goes to the consumed queue: the last member's ack sends it, and
/// the same run handles it.
#[test]
fn exit_when_empty_handles_a_batch_callback_sent_by_its_own_ack() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "jobs"]);
    db.ok(&[
        "batch",
        "create",
        "jobs",
        "m1",
        "m2",
        "m3",
        "--on-success",
        "jobs=all done",
    ]);
    let summary = consume_until_empty(&db, "jobs");
    assert!(summary.contains("4 processed"), "{summary}");
    let seen = seen(&db);
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(seen[3], "all done", "the callback comes after every member");
    assert_eq!(db.stats("jobs"), Stats::default());
}

/// `--max-messages 1` and `2` on an empty queue wait for messages (they once exited at once,
/// their budget taken by one claim loop's empty claim), then handle exactly that many.
#[test]
fn max_messages_waits_for_its_messages_and_stops_after_them() {
    let db = TestDb::new();
    for n in [1usize, 2] {
        let queue = format!("e{n}");
        db.ok(&["queue", "create", &queue]);
        let mut consumer = db.spawn(&[
            "consume",
            &queue,
            "--max-messages",
            &n.to_string(),
            "--exec",
            "cat > /dev/null",
        ]);
        // Long enough for both claim loops to claim the empty queue many times over.
        std::thread::sleep(Duration::from_secs(2));
        assert!(
            consumer.try_status().is_none(),
            "--max-messages {n} exited with nothing processed"
        );
        for i in 0..3 {
            db.ok(&["send", &queue, &format!("m{i}")]);
        }
        let out = consumer.wait(Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains(&format!("{n} processed")), "{stderr}");
        assert_eq!(
            db.stats(&queue),
            Stats {
                ready: 3 - n as u64,
                ..Stats::default()
            }
        );
    }
}

/// `--max-messages 1` on a queue a schedule fills: it waits for the first fire, handles it
/// and exits.
#[test]
fn max_messages_waits_for_a_schedule_to_fire() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "ticks"]);
    db.ok(&[
        "schedule", "create", "tick", "--every", "2s", "--queue", "ticks", "--body", "tick",
    ]);
    let out = db
        .spawn(&[
            "consume",
            "ticks",
            "--max-messages",
            "1",
            "--exec",
            r#"body=$(cat); printf '%s\n' "$body" >> seen"#,
        ])
        .wait(Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("1 processed"), "{stderr}");
    assert_eq!(seen(&db), ["tick"]);
}
