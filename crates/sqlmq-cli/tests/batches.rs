//! Batches and workflows with real processes: a batch of 1 000 handled by three `sqlmq
//! consume` processes, one of them killed with `kill -9` again and again, sends its
//! `on_success` callback exactly once and only after the last member's ack; a batch with a
//! poison member sends `on_failure` and `on_complete` once, with the right counts; a workflow
//! file runs each step after its dependencies, which `batch show` reports.

mod common;

use std::time::{Duration, Instant};

use common::{TestDb, eventually};

/// `batch show ID --json`.
fn status(db: &TestDb, id: &str) -> serde_json::Value {
    db.json(&["batch", "show", id, "--json"])
}

fn consumer(db: &TestDb, exec: &str) -> common::Running {
    db.spawn(&[
        "consume",
        "jobs",
        "--concurrency",
        "8",
        "--lease",
        "3s",
        "--exec",
        exec,
    ])
}

#[test]
fn on_success_is_sent_once_after_the_last_ack_while_consumers_are_killed() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "jobs"]);
    db.ok(&["queue", "create", "done"]);
    let members: Vec<String> = (0..1000).map(|i| format!("photo-{i}")).collect();
    let created: serde_json::Value = serde_json::from_str(&db.ok_with_stdin(
        &[
            "batch",
            "create",
            "jobs",
            "--on-success",
            "done=all thumbnails made",
            "--json",
        ],
        members.join("\n").as_bytes(),
    ))
    .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["members"].as_array().unwrap().len(), 1000);

    let exec = "cat > /dev/null; sleep 0.01";
    let mut consumers: Vec<_> = (0..3).map(|_| consumer(&db, exec)).collect();
    // Kill one consumer with kill -9 every 1.5 s and start another, while watching: once the
    // callback is visible, the batch must have finished with every member acked.
    let started = Instant::now();
    let mut kills = 0;
    let mut last_kill = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the batch never finished"
        );
        let callback = db.stats("done").ready;
        let s = status(&db, &id);
        if callback > 0 {
            assert_eq!(
                s["state"], "finished",
                "callback before the batch finished: {s}"
            );
            assert_eq!(s["succeeded"], 1000, "callback before the last ack: {s}");
            break;
        }
        if kills < 4 && last_kill.elapsed() > Duration::from_millis(1500) {
            let victim = consumers.remove(kills % consumers.len());
            victim.kill9();
            consumers.push(consumer(&db, exec));
            kills += 1;
            last_kill = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        kills >= 1,
        "the batch finished before any consumer was killed"
    );
    // Exactly once, even after the killed processes' leases ran out and their messages ran
    // again.
    std::thread::sleep(Duration::from_secs(4));
    for c in consumers {
        c.signal(libc::SIGTERM);
        c.wait(Duration::from_secs(30));
    }
    assert_eq!(
        db.stats("done").ready,
        1,
        "the callback was sent more than once"
    );
    assert_eq!(db.stats("jobs").pending(), 0);
    let got = db.json(&["recv", "done", "--ack", "--json"]);
    assert_eq!(got[0]["body"], "all thumbnails made", "{got}");
    assert_eq!(
        got[0]["headers"]["sqlmq-batch"], id,
        "the callback carries its batch's id: {got}"
    );
}

/// `batch list`: the unfinished batches first, then the finished ones; `--state` keeps one.
#[test]
fn batch_list_shows_unfinished_batches_first() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "jobs"]);
    let created = |args: &[&str]| -> String {
        let out: serde_json::Value = serde_json::from_str(&db.ok(args)).unwrap();
        out["id"].as_str().unwrap().to_owned()
    };
    let done = created(&["batch", "create", "jobs", "a", "--json"]);
    db.ok(&["recv", "jobs", "--ack"]);
    let open = created(&["batch", "create", "jobs", "b", "--open", "--json"]);
    let listed = db.json(&["batch", "list", "--json"]);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [open.as_str(), done.as_str()], "{listed}");
    let table = db.ok(&["batch", "list"]);
    assert!(
        table.find(&open).unwrap() < table.find(&done).unwrap(),
        "{table}"
    );
    assert!(table.contains("finished"), "{table}");
    let finished = db.ok(&["batch", "list", "--state", "finished"]);
    assert!(
        finished.contains(&done) && !finished.contains(&open),
        "{finished}"
    );
    db.fails(&["batch", "list", "--limit", "0"], 1, "1 to 1000");
}

#[test]
fn a_poison_member_sends_on_failure_and_on_complete_once() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "jobs", "--max-attempts", "1"]);
    for q in ["ok", "failed", "complete"] {
        db.ok(&["queue", "create", q]);
    }
    let members: Vec<String> = (0..20)
        .map(|i| {
            if i == 7 {
                "poison".into()
            } else {
                format!("m{i}")
            }
        })
        .collect();
    let out = db.ok_with_stdin(
        &[
            "batch",
            "create",
            "jobs",
            "--on-success",
            "ok=fine",
            "--on-failure",
            "failed=some failed",
            "--on-complete",
            "complete=finished",
        ],
        members.join("\n").as_bytes(),
    );
    let id = out.split_whitespace().nth(2).unwrap().to_owned();
    let c = consumer(&db, "test \"$(cat)\" != poison");
    eventually(Duration::from_secs(60), "the batch finishes", || {
        (status(&db, &id)["state"] == "finished").then_some(())
    });
    c.signal(libc::SIGTERM);
    c.wait(Duration::from_secs(30));
    let s = status(&db, &id);
    assert_eq!(
        (s["succeeded"].as_u64(), s["dead"].as_u64()),
        (Some(19), Some(1)),
        "{s}"
    );
    assert_eq!(db.stats("ok").ready, 0);
    assert_eq!(db.stats("failed").ready, 1);
    assert_eq!(db.stats("complete").ready, 1);
    let shown = db.ok(&["batch", "show", &id]);
    assert!(shown.contains("19 succeeded, 1 dead"), "{shown}");
    assert!(
        shown.contains("on_failure") && shown.contains("cancelled"),
        "{shown}"
    );
}

#[test]
fn a_workflow_file_runs_steps_after_their_dependencies() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "jobs"]);
    let file = db.path("diamond.json");
    std::fs::write(
        &file,
        r#"{"steps": [
            {"name": "a", "queue": "jobs", "body": "a"},
            {"name": "b", "queue": "jobs", "body": "b", "after": ["a"]},
            {"name": "c", "queue": "jobs", "body": "c", "after": ["a"]},
            {"name": "d", "queue": "jobs", "body": "d", "after": ["b", "c"]}
        ]}"#,
    )
    .unwrap();
    let created = db.json(&[
        "batch",
        "create",
        "--file",
        file.to_str().unwrap(),
        "--json",
    ]);
    let id = created["id"].as_str().unwrap().to_owned();
    let step = |name: &str| created["steps"][name].as_str().unwrap().to_owned();
    // Only a is deliverable; b and c wait for it, d for both.
    let recv = |n: &str| db.json(&["recv", "jobs", "-n", n, "--json"]);
    let got = recv("10");
    assert_eq!(got.as_array().unwrap().len(), 1, "{got}");
    let receipt = got[0]["receipt"].as_str().unwrap().to_owned();
    db.ok(&["ack", "jobs", &receipt, "--result", "a's output"]);
    let shown = db.ok(&["show", "jobs", &step("a")]);
    assert!(
        shown.contains("acked") && shown.contains("a's output"),
        "{shown}"
    );
    let got = recv("10");
    assert_eq!(got.as_array().unwrap().len(), 2, "b and c after a: {got}");
    let s = status(&db, &id);
    let d = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["step"] == "d")
        .unwrap()
        .clone();
    assert_eq!(d["state"], "waiting", "{s}");
    for m in got.as_array().unwrap() {
        db.ok(&["ack", "jobs", m["receipt"].as_str().unwrap()]);
    }
    let got = recv("10");
    assert_eq!(got[0]["body"], "d", "{got}");
    db.ok(&["ack", "jobs", got[0]["receipt"].as_str().unwrap()]);
    assert_eq!(status(&db, &id)["state"], "finished");
    // A cycle is refused, and so is a dependency on an unknown id.
    std::fs::write(
        &file,
        r#"{"steps": [{"name": "a", "queue": "jobs", "after": ["b"]},
                      {"name": "b", "queue": "jobs", "after": ["a"]}]}"#,
    )
    .unwrap();
    db.fails(
        &["batch", "create", "--file", file.to_str().unwrap()],
        1,
        "cycle",
    );
    db.fails(
        &[
            "send",
            "jobs",
            "x",
            "--depends-on",
            &sqlmq::MessageId::new().to_string(),
        ],
        1,
        "not found",
    );
    // send --depends-on a message still in line waits for its ack.
    let first = db.ok(&["send", "jobs", "first"]).trim().to_owned();
    let first = first.rsplit(' ').next().unwrap().to_owned();
    db.ok(&["send", "jobs", "second", "--depends-on", &first]);
    let got = recv("10");
    assert_eq!(got.as_array().unwrap().len(), 1, "{got}");
    assert_eq!(got[0]["body"], "first");
    db.ok(&["ack", "jobs", got[0]["receipt"].as_str().unwrap()]);
    let got = recv("10");
    assert_eq!(got[0]["body"], "second", "{got}");
}
