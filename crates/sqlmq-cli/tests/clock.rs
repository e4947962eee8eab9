//! Only the database's clock counts: delays, leases and heartbeats are computed by the server,
//! so a client whose clock is hours off behaves exactly like one whose clock is right. Skewed
//! clients run with libfaketime preloaded (Debian's faketime package; `scripts/test.sh`
//! installs it) — in the process itself, so that killing it kills the client — with the
//! monotonic clock left alone so that timers still run at the right pace.
//!
//! MySQL/MariaDB only, as every CLI test: on SQLite there is no server, and the database's
//! clock is each process's own.

mod common;

use std::process::Output;
use std::time::Duration;

use common::{TestDb, skewed_cmd};
use serde_json::Value;

/// How far off the skewed clients are, both ways.
const SKEWS: [&str; 2] = ["+5h", "-5h"];

/// The body sent by (or for) the client with clock `skew` (not starting with `-`, which
/// would read as a flag).
fn body(skew: &str) -> String {
    format!("skew{skew}")
}

/// Run the binary to completion with its wall clock shifted by `skew`.
fn skewed(db: &TestDb, skew: &str, args: &[&str]) -> Output {
    let out = skewed_cmd(db, skew, args).output().unwrap();
    assert!(
        out.status.success(),
        "sqlmq {args:?} with the clock {skew}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The bodies a `recv --json` claimed (on a correct clock), with their attempts.
fn claim(db: &TestDb, queue: &str, lease: &str) -> Vec<(String, u64)> {
    let rows: Value = db.json(&["recv", queue, "-n", "10", "--lease", lease, "--json"]);
    let mut out: Vec<(String, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["body"].as_str().unwrap().to_owned(),
                r["attempt"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Guarantee: a delay given by a client whose clock is 5 hours ahead or behind lasts exactly
/// as long for everyone; a lease taken by such a client ends when the database says so.
#[test]
fn delays_and_leases_follow_the_database_clock_whatever_the_clients_clock() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "delays"]);
    db.ok(&["queue", "create", "leases"]);

    // Delays: 2 s from each skewed producer. Computed on the client, the one 5 h behind would
    // be due at once and the one 5 h ahead only in 5 hours.
    for skew in SKEWS {
        skewed(&db, skew, &["send", "delays", "--delay", "2s", &body(skew)]);
    }
    assert!(claim(&db, "delays", "30s").is_empty(), "due before 2 s");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        claim(&db, "delays", "30s"),
        [(body("+5h"), 1), (body("-5h"), 1)],
        "due after 2 s"
    );

    // Leases: each skewed consumer takes a 2 s lease. Computed on the client, the one 5 h
    // behind would hold an already ended lease, and the one 5 h ahead would hold it 5 hours.
    for skew in SKEWS {
        db.ok(&["send", "leases", &body(skew)]);
        let out = skewed(
            &db,
            skew,
            &["recv", "leases", "-n", "1", "--lease", "2s", "--json"],
        );
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got[0]["body"], body(skew));
    }
    assert!(
        claim(&db, "leases", "30s").is_empty(),
        "a lease ended early"
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        claim(&db, "leases", "30s"),
        [(body("+5h"), 2), (body("-5h"), 2)],
        "the leases ended after 2 s and the messages came back"
    );
}

/// Guarantee: a worker process whose clock is 5 hours behind is alive to its peers as long as
/// it heartbeats (its claims are not released under it), and one 5 hours ahead is found dead
/// as soon as it stops heartbeating (its claims come back at once, not in 5 hours).
#[test]
fn heartbeats_follow_the_database_clock_whatever_the_workers_clock() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "work"]);
    for skew in SKEWS {
        db.ok(&["send", "work", &body(skew)]);
    }
    // Two skewed workers each hold one message for 6 s, with leases far longer than the run.
    let consume = |skew: &str| {
        skewed_cmd(
            &db,
            skew,
            &[
                "consume",
                "work",
                "--exec",
                "body=$(cat); echo \"$body\" >> started; sleep 6",
                "--concurrency",
                "1",
                "--lease",
                "10m",
            ],
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
    };
    let mut behind = consume("-5h");
    let mut ahead = consume("+5h");
    common::eventually(Duration::from_secs(30), "both claimed", || {
        (common::lines(&db.path("started")).len() == 2).then_some(())
    });
    // A correct-clock peer worker (one line per message, written at once: its commands run
    // concurrently): while both heartbeat it takes nothing (a worker judged by
    // its own clock 5 h behind would look dead and its claim would be released to the peer).
    let peer = db.spawn(&[
        "consume",
        "work",
        "--exec",
        "printf '%s\\n' \"$(cat)\" >> redone",
        "--lease",
        "10m",
    ]);
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        common::lines(&db.path("redone")).is_empty(),
        "a live worker's claim was released"
    );
    // Both killed: the peer finds them dead from the database's clock and takes their claims
    // at once (judged by a clock 5 h ahead, a heartbeat would keep its claim for 5 hours).
    ahead.kill().unwrap();
    behind.kill().unwrap();
    ahead.wait().unwrap();
    behind.wait().unwrap();
    let redone = common::eventually(Duration::from_secs(30), "the claims come back", || {
        let mut lines = common::lines(&db.path("redone"));
        lines.sort();
        (lines.len() == 2).then_some(lines)
    });
    assert_eq!(redone, [body("+5h"), body("-5h")]);
    drop(peer);
}
