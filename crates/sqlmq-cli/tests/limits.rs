//! A queue's limits with real processes: `sqlmq consume` processes of eight slots each never
//! run more commands at once than the queue's `--max-in-flight`, a process killed with
//! `kill -9` holding slots gives them back when its leases end, and `--rate-limit` spaces the
//! deliveries of every process together; `--concurrency-limit` holds each concurrency key to its
//! limit across processes while the other keys flow.

mod common;

use std::time::Duration;

use common::{TestDb, eventually, lines};

/// The command each consumer runs: note its start and end (nanoseconds) in `log`.
fn exec(log: &str, work: &str) -> String {
    format!(
        "echo \"start $(date +%s%N)\" >> {log}; sleep {work}; echo \"end $(date +%s%N)\" >> {log}"
    )
}

/// Most commands running at once, from the start and end lines of `log`.
fn most_at_once(log: &[String]) -> usize {
    let mut events: Vec<(u128, i32)> = log
        .iter()
        .map(|l| {
            let (what, at) = l.split_once(' ').unwrap();
            // An end sorts before a start at the same instant.
            (at.parse().unwrap(), if what == "start" { 1 } else { -1 })
        })
        .collect();
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in events {
        now += step;
        most = most.max(now);
    }
    most as usize
}

/// A `consume` process of queue `jobs` whose commands never finish (leases of 3 s), once it
/// holds `holds` messages.
fn stuck_consumer(db: &TestDb, holds: u64) -> common::Running {
    let stuck = db.spawn(&[
        "consume",
        "jobs",
        "--concurrency",
        "8",
        "--lease",
        "3s",
        "--exec",
        "sleep 60",
    ]);
    eventually(
        Duration::from_secs(20),
        "the stuck process holds its share",
        || (db.stats("jobs").in_flight == holds).then_some(()),
    );
    stuck
}

/// Stop `consumers` with SIGTERM; each exits 0.
fn stop_all(consumers: Vec<common::Running>) {
    for c in consumers {
        c.signal(libc::SIGTERM);
        let out = c.wait(Duration::from_secs(30));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn consumers_never_run_more_than_the_queue_allows_and_a_killed_ones_slots_come_back() {
    let db = TestDb::new();
    let out = db.ok(&["queue", "create", "jobs", "--max-in-flight", "3"]);
    assert!(out.contains("at most 3 in flight"), "{out}");
    let log = db.path("log");
    let log_s = log.display().to_string();

    // A process that claims and never finishes: its command sleeps for a minute, and it is
    // killed with kill -9 while holding its slots (leases of 3 s).
    db.ok_with_stdin(&["send", "jobs", "--batch"], b"h1\nh2\nh3\n");
    let stuck = stuck_consumer(&db, 3);
    let work: Vec<String> = (0..24).map(|i| format!("m{i}")).collect();
    db.ok_with_stdin(&["send", "jobs", "--batch"], work.join("\n").as_bytes());
    stuck.kill9();

    // Three consumers of eight slots each: 24 could run at once without the limit.
    let args = exec(&log_s, "0.2");
    let consumers: Vec<_> = (0..3)
        .map(|_| db.spawn(&["consume", "jobs", "--concurrency", "8", "--exec", &args]))
        .collect();
    eventually(Duration::from_secs(60), "every message handled", || {
        let s = db.stats("jobs");
        (s.pending() == 0).then_some(())
    });
    stop_all(consumers);
    let log = lines(&log);
    // The 24 and the three the killed process held, once their leases ended.
    assert_eq!(log.iter().filter(|l| l.starts_with("start")).count(), 27);
    let most = most_at_once(&log);
    assert!((2..=3).contains(&most), "{most} commands ran at once");
}

#[test]
fn a_rate_limit_spaces_the_deliveries_of_every_process_together() {
    let db = TestDb::new();
    let out = db.ok(&["queue", "create", "mail", "--rate-limit", "5/1s"]);
    assert!(out.contains("rate limit 5/1s"), "{out}");
    let work: Vec<String> = (0..15).map(|i| format!("m{i}")).collect();
    db.ok_with_stdin(&["send", "mail", "--batch"], work.join("\n").as_bytes());
    let log = db.path("log");
    let args = exec(&log.display().to_string(), "0");
    let consumers: Vec<_> = (0..2)
        .map(|_| db.spawn(&["consume", "mail", "--concurrency", "8", "--exec", &args]))
        .collect();
    eventually(Duration::from_secs(60), "every message handled", || {
        (db.stats("mail").pending() == 0).then_some(())
    });
    stop_all(consumers);
    let mut starts: Vec<u128> = lines(&log)
        .iter()
        .filter_map(|l| l.strip_prefix("start ").map(|t| t.parse().unwrap()))
        .collect();
    starts.sort();
    assert_eq!(starts.len(), 15);
    // 5 at once, 5 more a second later, the last 5 two seconds on.
    let span = Duration::from_nanos((starts[14] - starts[0]) as u64);
    assert!(span >= Duration::from_millis(1800), "{span:?}");
    // No window of (nearly) a second holds more than 5: 150 ms allowed for a command that
    // starts a little after its claim.
    let window = 850_000_000u128;
    for (i, t) in starts.iter().enumerate() {
        let within = starts[i..].iter().take_while(|s| **s - t < window).count();
        assert!(within <= 5, "{within} started within 850 ms");
    }
    db.fails(
        &["queue", "create", "mail", "--rate-limit", "0/1s"],
        2,
        "rate limit",
    );
    db.fails(
        &["queue", "create", "mail", "--rate-limit", "fast"],
        2,
        "COUNT/DURATION",
    );
    let out = db.ok(&[
        "queue",
        "create",
        "mail",
        "--rate-limit",
        "none",
        "--max-in-flight",
        "0",
    ]);
    assert!(
        !out.contains("rate limit") && !out.contains("in flight"),
        "{out}"
    );
}

#[test]
fn no_concurrency_key_runs_more_than_its_limit_across_processes_and_a_killed_ones_slots_come_back()
{
    let db = TestDb::new();
    let out = db.ok(&["queue", "create", "jobs", "--concurrency-limit", "2"]);
    assert!(out.contains("at most 2 per concurrency key"), "{out}");
    let log = db.path("log");
    let log_s = log.display().to_string();

    // A process that takes both slots of k0 and never finishes: killed with kill -9 while
    // holding them (leases of 3 s).
    db.ok_with_stdin(
        &["send", "jobs", "--batch", "--concurrency-key", "k0"],
        b"h1\nh2\n",
    );
    let stuck = stuck_consumer(&db, 2);
    // 200 messages over 5 keys.
    for k in 0..5 {
        let work: Vec<String> = (0..40).map(|i| format!("k{k}-{i}")).collect();
        db.ok_with_stdin(
            &[
                "send",
                "jobs",
                "--batch",
                "--concurrency-key",
                &format!("k{k}"),
            ],
            work.join("\n").as_bytes(),
        );
    }
    stuck.kill9();

    // Three consumers of eight slots each; each command notes its key.
    let args = format!(
        "echo \"start $SQLMQ_CONCURRENCY_KEY $(date +%s%N)\" >> {log_s}; sleep 0.05; \
         echo \"end $SQLMQ_CONCURRENCY_KEY $(date +%s%N)\" >> {log_s}"
    );
    let consumers: Vec<_> = (0..3)
        .map(|_| db.spawn(&["consume", "jobs", "--concurrency", "8", "--exec", &args]))
        .collect();
    eventually(Duration::from_secs(90), "every message handled", || {
        (db.stats("jobs").pending() == 0).then_some(())
    });
    stop_all(consumers);
    let log = lines(&log);
    // The 200 and the two the killed process held, once their leases ended.
    assert_eq!(log.iter().filter(|l| l.starts_with("start")).count(), 202);
    let mut reached = false;
    for k in 0..5 {
        let key = format!("k{k}");
        let of_key: Vec<String> = log
            .iter()
            .filter_map(|l| {
                let (what, rest) = l.split_once(' ')?;
                let (k, at) = rest.split_once(' ')?;
                (k == key).then(|| format!("{what} {at}"))
            })
            .collect();
        let most = most_at_once(&of_key);
        assert!(most <= 2, "{most} commands of {key} ran at once");
        reached |= most == 2;
    }
    assert!(reached, "no key ever ran two at once");
    db.fails(
        &["send", "jobs", "x", "--concurrency-key", "k", "--key", "k"],
        2,
        "cannot be used with",
    );
    let out = db.ok(&["queue", "create", "jobs", "--rate-limit-per-key", "10/1s"]);
    assert!(
        out.contains("at most 2 per concurrency key, rate limit 10/1s per concurrency key"),
        "{out}"
    );
    db.fails(
        &["queue", "create", "jobs", "--rate-limit-per-key", "0/1s"],
        2,
        "rate limit",
    );
    let out = db.ok(&[
        "queue",
        "create",
        "jobs",
        "--rate-limit-per-key",
        "none",
        "--concurrency-limit",
        "0",
    ]);
    assert!(!out.contains("concurrency key"), "{out}");
}
