//! `sqlmq consume --exec`: ack on exit 0, nack with stderr otherwise, the environment, lease
//! extension for long commands, and the SIGTERM protocol.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{Stats, TestDb, eventually, lines};

/// Writes one line per message: body|queue|id|receipt|attempt|ordering key|header; fails (exit
/// 3, with a message on stderr) for bodies starting with "fail".
const RECORDING_CMD: &str = r#"body=$(cat); printf '%s|%s|%s|%s|%s|%s|%s\n' "$body" "$SQLMQ_QUEUE" "$SQLMQ_MESSAGE_ID" "$SQLMQ_RECEIPT" "$SQLMQ_ATTEMPT" "${SQLMQ_ORDERING_KEY-unset}" "${SQLMQ_HEADER_TRACE_ID-unset}" >> seen; case "$body" in fail*) echo "it broke: $body" >&2; exit 3;; esac"#;

/// Guarantee: exit 0 acks, a non-zero exit nacks with the command's stderr and exit status in
/// the error history, and the command sees the message on stdin and its facts in SQLMQ_*.
#[test]
fn exit_status_decides_ack_or_nack_and_env_is_set() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "c", "--max-attempts", "1"]);
    let ok1 = db.ok(&[
        "send",
        "c",
        "ok 1",
        "--key",
        "k1",
        "--header",
        "trace-id=t1",
    ]);
    let ok2 = db.ok(&["send", "c", "ok 2"]);
    let fail = db.ok(&["send", "c", "fail 3"]);
    // In the order of their bodies, as the recorded lines are sorted below.
    let ids = [fail.trim(), ok1.trim(), ok2.trim()];

    let out = db
        .spawn(&["consume", "c", "--exec", RECORDING_CMD, "--exit-when-empty"])
        .wait(Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("3 processed") && stderr.contains("2 acked") && stderr.contains("1 nacked"),
        "summary: {stderr}"
    );

    let mut seen = lines(&db.path("seen"));
    seen.sort();
    assert_eq!(seen.len(), 3, "{seen:?}");
    let fields: Vec<Vec<&str>> = seen.iter().map(|l| l.split('|').collect()).collect();
    for (f, id) in fields.iter().zip(ids) {
        assert_eq!(f[1], "c", "SQLMQ_QUEUE");
        assert_eq!(f[2], id, "SQLMQ_MESSAGE_ID");
        assert!(
            f[3].starts_with(&format!("{id}:")),
            "SQLMQ_RECEIPT {}",
            f[3]
        );
        assert_eq!(f[4], "1", "SQLMQ_ATTEMPT");
    }
    assert_eq!(fields[0][0], "fail 3");
    assert_eq!(fields[1][..1], ["ok 1"]);
    assert_eq!(fields[1][5..], ["k1", "t1"], "ordering key and header");
    assert_eq!(fields[2][5..], ["unset", "unset"]);

    assert_eq!(
        db.stats("c"),
        Stats {
            dead: 1,
            ..Stats::default()
        }
    );
    let dead = db.json(&["dlq", "list", "c", "--json"]);
    assert_eq!(dead[0]["id"], ids[0]);
    let error = dead[0]["errors"][0]["error"].as_str().unwrap();
    assert_eq!(error, "it broke: fail 3\nexit status 3");
}

/// Guarantee: while a command runs longer than the lease, the worker extends the lease, so a
/// second consumer running beside it never gets the message; it is acked once, at the end.
#[test]
fn a_long_command_keeps_its_message() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "slow"]);
    let id = db.ok(&["send", "slow", "take your time"]).trim().to_owned();
    let slow = db.spawn(&[
        "consume",
        "slow",
        "--lease",
        "1s",
        "--max-messages",
        "1",
        "--exec",
        r#"sleep 3; printf '%s\n' "$SQLMQ_MESSAGE_ID" >> slow.out"#,
    ]);
    eventually(Duration::from_secs(10), "the message to be claimed", || {
        (db.stats("slow").in_flight == 1).then_some(())
    });
    let rival = db.spawn(&[
        "consume",
        "slow",
        "--lease",
        "1s",
        "--exec",
        r#"printf '%s\n' "$SQLMQ_MESSAGE_ID" >> rival.out"#,
    ]);
    let out = slow.wait(Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 acked") && stderr.contains("0 lost leases"),
        "{stderr}"
    );
    assert_eq!(lines(&db.path("slow.out")), [id]);
    assert!(
        lines(&db.path("rival.out")).is_empty(),
        "the rival consumer got the message while its lease was being extended"
    );
    assert_eq!(db.stats("slow"), Stats::default());
    drop(rival);
}

/// Guarantee: on SIGTERM the worker claims nothing more, lets running commands finish, acks
/// their messages and exits 0 within the grace period, leaving nothing in flight.
#[test]
fn sigterm_finishes_running_commands_and_exits_cleanly() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "t"]);
    db.ok_with_stdin(&["send", "t", "--batch"], b"1\n2\n3\n4\n5\n");
    let worker = db.spawn(&[
        "consume",
        "t",
        "--concurrency",
        "3",
        "--grace",
        "20s",
        "--exec",
        r#"sleep 2; printf '%s\n' "$SQLMQ_MESSAGE_ID" >> done"#,
    ]);
    eventually(Duration::from_secs(10), "three messages in flight", || {
        (db.stats("t").in_flight == 3).then_some(())
    });
    worker.signal(libc::SIGTERM);
    let signalled = Instant::now();
    let out = worker.wait(Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        signalled.elapsed() < Duration::from_secs(20),
        "exited within the grace period"
    );
    assert!(stderr.contains("3 acked"), "{stderr}");

    let done: HashSet<String> = lines(&db.path("done")).into_iter().collect();
    assert_eq!(done.len(), 3, "the running commands finished");
    assert_eq!(
        db.stats("t"),
        Stats {
            ready: 2,
            ..Stats::default()
        },
        "the finished messages are acked, nothing in flight, nothing more claimed"
    );
    let rest = db.json(&["recv", "t", "-n", "10", "--json"]);
    for m in rest.as_array().unwrap() {
        assert!(
            !done.contains(m["id"].as_str().unwrap()),
            "an acked message came back"
        );
    }
}

/// Guarantee: a command still running when the grace period ends is killed and its message
/// released at once (nacked for an immediate retry, not left to its 1 minute lease); exit 0.
#[test]
fn commands_outliving_the_grace_period_are_killed_and_released() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "g"]);
    let id = db.ok(&["send", "g", "stuck"]).trim().to_owned();
    let worker = db.spawn(&[
        "consume",
        "g",
        "--lease",
        "1m",
        "--grace",
        "1s",
        "--exec",
        "sleep 60; touch never",
    ]);
    eventually(Duration::from_secs(10), "the message in flight", || {
        (db.stats("g").in_flight == 1).then_some(())
    });
    worker.signal(libc::SIGTERM);
    let out = worker.wait(Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("1 released at shutdown"), "{stderr}");
    assert_eq!(
        db.stats("g"),
        Stats {
            ready: 1,
            ..Stats::default()
        }
    );
    let again = db.json(&["recv", "g", "--json"]);
    assert_eq!(again[0]["id"], id.as_str());
    assert_eq!(again[0]["attempt"], 2);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !db.path("never").exists(),
        "the killed command did not run on"
    );
}

/// Guarantee: `sqlmq cancel` of a message whose command runs sends the command's process group
/// SIGTERM (SIGKILL after the grace period for one that ignores it), and the message is removed,
/// never run again; the worker goes on.
#[test]
fn cancelling_a_running_message_terminates_its_command() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "x"]);
    let polite = db.ok(&["send", "x", "polite"]).trim().to_owned();
    let stubborn = db.ok(&["send", "x", "stubborn"]).trim().to_owned();
    let worker = db.spawn(&[
        "consume",
        "x",
        "--concurrency",
        "2",
        "--grace",
        "1s",
        "--exec",
        // `polite` leaves on SIGTERM; `stubborn` ignores it and runs on until killed.
        r#"body=$(cat); echo "$body" >> started;
           if [ "$body" = polite ]; then trap 'echo "$body" >> terminated; exit 7' TERM; else trap '' TERM; fi;
           i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo "$body" >> finished"#,
    ]);
    eventually(Duration::from_secs(10), "both commands running", || {
        (lines(&db.path("started")).len() == 2).then_some(())
    });
    for id in [&polite, &stubborn] {
        let said = db.ok(&["cancel", "x", id]);
        assert!(said.contains("while in flight"), "{said}");
    }
    eventually(Duration::from_secs(10), "the polite command's exit", || {
        (lines(&db.path("terminated")) == ["polite"]).then_some(())
    });
    // The stubborn one goes once SIGKILL ended its command, a second after the SIGTERM.
    eventually(Duration::from_secs(15), "both messages gone", || {
        [&polite, &stubborn]
            .iter()
            .all(|id| !db.run(&["show", "x", id]).status.success())
            .then_some(())
    });
    assert_eq!(db.stats("x"), Stats::default());
    worker.signal(libc::SIGTERM);
    let out = worker.wait(Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("2 cancelled while running"), "{stderr}");
    assert_eq!(lines(&db.path("started")).len(), 2, "never run again");
    assert!(!db.path("finished").exists(), "no command ran to its end");
}

/// A message's run timeout or deadline stops its command as a cancel does (SIGTERM to its
/// group, SIGKILL after `--grace`) and makes it a dead letter with the reason, never run again;
/// `show` tells a waiting message's deadline and run timeout.
#[test]
fn a_run_timeout_or_deadline_terminates_the_command_and_dead_letters_the_message() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "x", "--max-attempts", "5"]);
    let timed = db
        .ok(&["send", "x", "timed", "--run-timeout", "1s"])
        .trim()
        .to_owned();
    let due = db
        .ok(&["send", "x", "due", "--deadline", "2s"])
        .trim()
        .to_owned();
    let shown = db.ok(&["show", "x", &timed]);
    assert!(shown.contains("run timeout: 1s"), "{shown}");
    let shown = db.ok(&["show", "x", &due]);
    assert!(shown.contains("deadline:"), "{shown}");
    let worker = db.spawn(&[
        "consume",
        "x",
        "--concurrency",
        "2",
        "--grace",
        "1s",
        "--exec",
        r#"body=$(cat); echo "$body" >> started;
           trap 'echo "$body" >> terminated; exit 7' TERM;
           i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo "$body" >> finished"#,
    ]);
    eventually(Duration::from_secs(30), "both messages dead", || {
        (db.stats("x").dead == 2).then_some(())
    });
    let mut terminated = lines(&db.path("terminated"));
    terminated.sort();
    assert_eq!(terminated, ["due", "timed"]);
    let dead = db.ok(&["show", "x", &timed]);
    assert!(dead.contains("run timeout of 1s exceeded"), "{dead}");
    let dead = db.ok(&["show", "x", &due]);
    assert!(dead.contains("deadline passed"), "{dead}");
    worker.signal(libc::SIGTERM);
    let out = worker.wait(Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(lines(&db.path("started")).len(), 2, "never run again");
    assert!(!db.path("finished").exists(), "no command ran to its end");
}

/// `--metrics-listen`: the worker's own counters for Prometheus, per queue.
#[test]
fn metrics_listen_serves_the_workers_counters() {
    use std::io::{Read, Write};
    let db = TestDb::new();
    db.ok(&["queue", "create", "x"]);
    for i in 0..5 {
        db.ok(&["send", "x", &format!("m{i}")]);
    }
    let addr = format!("127.0.0.1:{}", common::free_port());
    let worker = db.spawn(&[
        "consume",
        "x",
        "--metrics-listen",
        &addr,
        "--exec",
        "cat > /dev/null",
    ]);
    let scrape = || -> Option<String> {
        let mut conn = std::net::TcpStream::connect(&addr).ok()?;
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        conn.read_to_string(&mut text).ok()?;
        Some(text)
    };
    let text = eventually(Duration::from_secs(30), "5 acks in the metrics", || {
        scrape().filter(|t| t.contains("sqlmq_messages_acked_total{queue=\"x\"} 5"))
    });
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains("# HELP sqlmq_messages_claimed_total"),
        "{text}"
    );
    worker.signal(libc::SIGTERM);
    let out = worker.wait(Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("metrics at http://{addr}/metrics")),
        "{stderr}"
    );
}

/// A queue deleted under `consume` stops it with a clear error (it ran on silently, claiming
/// from an id that no longer named anything).
#[test]
fn deleting_the_queue_stops_the_consumer_with_an_error() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "old"]);
    let mut consumer = db.spawn(&["consume", "old", "--exec", "cat > /dev/null"]);
    db.ok(&["send", "old", "one"]);
    eventually(Duration::from_secs(30), "the message handled", || {
        (db.stats("old") == Stats::default()).then_some(())
    });
    assert!(consumer.try_status().is_none(), "still consuming");
    db.ok(&["queue", "delete", "old", "--yes"]);
    let out = consumer.wait(Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("queue \"old\" was deleted while in use"),
        "{stderr}"
    );
}
