//! `sqlmq demo`, the README's first command.

mod common;

use std::time::{Duration, Instant};

use common::{Stats, TestDb};

/// Guarantee: the demo finishes well under 30 s with exit 0, names the retry and the dead
/// letter with its error history, leaves only the dead letter behind, shows the topic's group
/// consuming every record (one after a retry) with dense offsets, and can run again on the
/// same database (it clears its queue and starts its group from the end).
#[test]
fn demo_runs_to_completion_and_can_run_again() {
    let db = TestDb::new();
    for run in 0..2 {
        let started = Instant::now();
        let stdout = db.ok(&["demo"]);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "run {run} took {:?}",
            started.elapsed()
        );
        assert!(stdout.contains("sent 2002 messages"), "{stdout}");
        assert!(stdout.contains("processed 2001"), "{stdout}");
        assert!(stdout.contains("processed on attempt 2"), "{stdout}");
        assert!(stdout.contains("after 3 attempts"), "{stdout}");
        for attempt in 1..=3 {
            assert!(
                stdout.contains(&format!("  attempt {attempt} at ")),
                "{stdout}"
            );
        }
        assert_eq!(
            db.stats("demo"),
            Stats {
                dead: 1,
                ..Stats::default()
            }
        );
        let dead = db.json(&["dlq", "list", "demo", "--json"]);
        assert_eq!(dead[0]["errors"].as_array().unwrap().len(), 3);
        let (from, to) = (run * 100, run * 100 + 100);
        assert!(
            stdout.contains(&format!(
                "offsets p0 {from}..{to}, p1 {from}..{to}, p2 {from}..{to}, p3 {from}..{to} \
                 (400 new, none skipped)"
            )),
            "{stdout}"
        );
        assert!(stdout.contains("2 members acked 400 records"), "{stdout}");
        assert!(stdout.contains("acked on attempt 2"), "{stdout}");
        assert!(stdout.contains("lag now 0 unconsumed, 0 dead"), "{stdout}");
    }
}
