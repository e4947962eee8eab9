//! `sqlmq schedule`: schedules declared from the command line, fired by running `sqlmq consume`
//! processes — each fire time exactly once while processes are killed with `kill -9` at
//! random moments and the others' clocks are seconds off.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Running, TestDb, skewed_cmd, spawn_cmd};
use rand::RngExt;

/// A consumer of an idle queue: it does nothing but fire schedules.
const CONSUME: &[&str] = &["consume", "idle", "--exec", "true"];

/// Every message of `queue`, taken and acked: fire time → how many times it came.
fn fire_times(db: &TestDb, queue: &str, schedule: &str) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    loop {
        let got = db.json(&["recv", queue, "-n", "100", "--ack", "--json"]);
        let got = got.as_array().unwrap();
        if got.is_empty() {
            return seen;
        }
        for d in got {
            assert_eq!(d["headers"]["sqlmq-schedule"], schedule, "{d}");
            let at = d["headers"]["sqlmq-fire-time"].as_str().unwrap().to_owned();
            *seen.entry(at).or_default() += 1;
        }
    }
}

#[test]
fn each_second_is_fired_once_by_processes_killed_at_random_with_clocks_apart() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "ticks"]);
    db.ok(&["queue", "create", "idle"]);
    let created = db.ok(&[
        "schedule", "create", "tick", "--every", "1s", "--queue", "ticks", "--body", "t",
    ]);
    assert!(created.contains("every 1s → queue ticks"), "{created}");

    // Two processes run throughout, their clocks 3 s ahead and 3 s behind; meanwhile a third
    // is started and killed with kill -9 at random moments, again and again.
    let steady: Vec<Running> = ["+3s", "-3s"]
        .iter()
        .map(|skew| spawn_cmd(skewed_cmd(&db, skew, CONSUME)))
        .collect();
    let started = Instant::now();
    let mut rng = rand::rng();
    let mut kills = 0;
    while started.elapsed() < Duration::from_secs(20) {
        let victim = db.spawn(CONSUME);
        std::thread::sleep(Duration::from_millis(rng.random_range(300..2000)));
        victim.kill9();
        kills += 1;
    }
    for p in &steady {
        p.signal(libc::SIGTERM);
    }
    for p in steady {
        let out = p.wait(Duration::from_secs(30));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(kills >= 10, "{kills}");

    let seen = fire_times(&db, "ticks", "tick");
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "fired more than once: {twice:?}");
    let secs: Vec<i64> = seen
        .keys()
        .map(|t| {
            let at = humantime::parse_rfc3339(t).unwrap();
            let us = at
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_micros();
            assert_eq!(us % 1_000_000, 0, "{t}");
            (us / 1_000_000) as i64
        })
        .collect();
    for pair in secs.windows(2) {
        assert_eq!(pair[1] - pair[0], 1, "a fire time is missing: {seen:?}");
    }
    assert!(secs.len() >= 18, "{} fire times in 20 s", secs.len());

    let listed = db.json(&["schedule", "list", "--json"]);
    assert_eq!(listed[0]["fired"], secs.len() as u64, "{listed}");
    assert_eq!(listed[0]["every_ms"], 1000);
}

#[test]
fn schedules_are_managed_from_the_command_line() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "reports"]);
    db.ok(&["topic", "create", "ticks"]);
    let out = db.ok(&[
        "schedule",
        "create",
        "nightly",
        "--cron",
        "30 2 * * *",
        "--tz",
        "Europe/Paris",
        "--queue",
        "reports",
        "--body",
        "{\"report\":\"daily\"}",
        "--header",
        "kind=report",
        "--key",
        "reports",
        "--priority",
        "-3",
        "--catch-up",
        "one",
    ]);
    assert!(out.contains("cron \"30 2 * * *\" in Europe/Paris"), "{out}");
    db.ok(&[
        "schedule", "create", "tick", "--every", "10s", "--topic", "ticks",
    ]);

    let s = db.json(&["schedule", "describe", "nightly", "--json"]);
    assert_eq!(s["cron"], "30 2 * * *");
    assert_eq!(s["time_zone"], "Europe/Paris");
    assert_eq!(s["queue"], "reports");
    assert_eq!(s["body"], "{\"report\":\"daily\"}");
    assert_eq!(s["headers"]["kind"], "report");
    assert_eq!(
        (s["key"].as_str(), s["priority"].as_i64()),
        (Some("reports"), Some(-3))
    );
    assert_eq!(s["catch_up"], "one");
    assert_eq!(s["paused"], false);
    assert!(
        s["next_fire"].as_str().unwrap().ends_with(":30:00.000Z"),
        "{s}"
    );

    let table = db.ok(&["schedule", "list"]);
    assert!(
        table.contains("NEXT FIRE") && table.contains("LAST FIRED"),
        "{table}"
    );
    assert!(
        table.contains("nightly") && table.contains("every 10s"),
        "{table}"
    );
    assert!(db.ok(&["schedule", "pause", "tick"]).contains("paused"));
    assert_eq!(
        db.json(&["schedule", "describe", "tick", "--json"])["paused"],
        true
    );
    assert!(db.ok(&["schedule", "resume", "tick"]).contains("next fire"));
    assert_eq!(
        db.json(&["schedule", "describe", "tick", "--json"])["paused"],
        false
    );

    db.fails(&["schedule", "delete", "tick"], 2, "--yes");
    db.ok(&["schedule", "delete", "tick", "--yes"]);
    db.fails(
        &["schedule", "describe", "tick"],
        1,
        "unknown schedule \"tick\"",
    );
    db.fails(
        &[
            "schedule",
            "create",
            "x",
            "--cron",
            "61 * * * *",
            "--queue",
            "reports",
        ],
        1,
        "cron expression",
    );
    db.fails(
        &[
            "schedule",
            "create",
            "x",
            "--cron",
            "* * * * *",
            "--tz",
            "Mars/Base",
            "--queue",
            "reports",
        ],
        1,
        "unknown time zone",
    );
    db.fails(
        &[
            "schedule", "create", "x", "--every", "1s", "--queue", "nope",
        ],
        1,
        "unknown queue",
    );
    db.fails(
        &["schedule", "create", "x", "--queue", "reports"],
        2,
        "--cron",
    );
    db.fails(&["schedule", "create", "x", "--every", "1s"], 2, "--queue");
    db.fails(
        &[
            "schedule", "create", "x", "--every", "1s", "--tz", "UTC", "--queue", "reports",
        ],
        2,
        "--cron",
    );
    let listed = db.json(&["schedule", "list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
}
