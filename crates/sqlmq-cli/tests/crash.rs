//! THE CRASH TEST (the at-least-once guarantee of the guide (docs/guide/src/guarantees.md)): every committed message is delivered until acked, whatever the
//! point at which a consumer dies. Real `sqlmq consume` processes are `kill -9`ed at random
//! moments (before, during or after a command, before or after an ack) and replaced; at the
//! end every message must have been handled at least once and the queue must be empty.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{Running, TestDb, lines};

const MESSAGES: usize = 20_000;
/// Consumer processes alive at any time.
const CONSUMERS: usize = 3;
/// `kill -9`s over the run.
const KILLS: usize = 12;
const CONCURRENCY: &str = "16";
/// Short, so that the messages of killed consumers come back quickly.
const LEASE: &str = "2s";
/// The whole run (kills and drain) must end by then.
const DEADLINE: Duration = Duration::from_secs(150);

/// Guarantee: at-least-once delivery across `kill -9` of consumers. Every one of 20 000 ids is
/// handled at least once (duplicates are allowed and reported), lines are never torn, and the
/// queue ends with nothing ready, scheduled, blocked, in flight or dead.
#[test]
fn every_message_is_handled_although_consumers_are_killed() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "crash"]);
    let input: String = (0..MESSAGES).map(|i| format!("message {i}\n")).collect();
    let sent = db.ok_with_stdin(&["send", "crash", "--batch"], input.as_bytes());
    let ids: HashSet<String> = sent.lines().map(str::to_owned).collect();
    assert_eq!(ids.len(), MESSAGES);

    let started = Instant::now();
    let mut spawned = 0;
    let mut start_consumer = || {
        spawned += 1;
        // printf's single write(2) to an O_APPEND file keeps each line whole.
        let exec = format!(r#"printf '%s\n' "$SQLMQ_MESSAGE_ID" >> out-{spawned}"#);
        db.spawn(&[
            "consume",
            "crash",
            "--concurrency",
            CONCURRENCY,
            "--lease",
            LEASE,
            "--exit-when-empty",
            "--exec",
            &exec,
        ])
    };
    let mut consumers: Vec<Running> = (0..CONSUMERS).map(|_| start_consumer()).collect();

    let mut kills = 0;
    let mut handled_at_kill = Vec::new();
    while kills < KILLS {
        assert!(started.elapsed() < DEADLINE, "kill phase over the deadline");
        std::thread::sleep(Duration::from_millis(rand::random_range(200..900)));
        let victim = consumers.swap_remove(rand::random_range(0..consumers.len()));
        victim.kill9();
        kills += 1;
        handled_at_kill.push(handled(&db).len());
        consumers.push(start_consumer());
        // A consumer whose claim found nothing (all messages held by others) exits; keep
        // CONSUMERS alive while the kills go on.
        for c in consumers.iter_mut() {
            if let Some(status) = c.try_status() {
                assert!(status.success(), "a consumer failed: {status}");
                *c = start_consumer();
            }
        }
    }
    println!("killed {kills} consumers; messages handled at each kill: {handled_at_kill:?}");

    // The kills stop. The consumers exit when they find nothing to claim; messages of killed
    // consumers are claimable again only when their 2 s leases expire, so start new rounds
    // while anything is pending.
    loop {
        for c in consumers.drain(..) {
            let left = DEADLINE.saturating_sub(started.elapsed());
            let out = c.wait(left.max(Duration::from_secs(1)));
            assert!(
                out.status.success(),
                "a consumer failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stats = db.stats("crash");
        if stats.pending() == 0 {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "messages still pending at the deadline: {stats:?}"
        );
        if stats.ready == 0 {
            // Only expired-to-be leases left: let them run out before the next round.
            std::thread::sleep(Duration::from_millis(200));
        }
        consumers.push(start_consumer());
    }

    let all = handled(&db);
    let unique: HashSet<&String> = all.iter().collect();
    for line in &all {
        assert!(ids.contains(line), "a torn or unknown line: {line:?}");
    }
    let missing = ids.iter().filter(|id| !unique.contains(id)).count();
    assert_eq!(missing, 0, "{missing} messages were never handled");
    let stats = db.stats("crash");
    assert_eq!(
        stats,
        common::Stats::default(),
        "the queue is empty, nothing dead"
    );
    println!(
        "{} messages handled {} times in {:.1?} by {spawned} consumer processes: {} duplicates \
         (allowed: at least once)",
        unique.len(),
        all.len(),
        started.elapsed(),
        all.len() - unique.len()
    );
    assert!(kills >= 10);
}

/// Every line of every consumer's output file.
fn handled(db: &TestDb) -> Vec<String> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(&db.dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("out-") {
            all.extend(lines(&path));
        }
    }
    all
}
