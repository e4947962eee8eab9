//! Topics through the CLI: `topic create|list|describe`, `publish`, `subscribe` (printing and
//! `--exec`), `groups`, `lag`, `reset`, `replay`, `query`, `trace`, and `dlq --group`.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{TestDb, lines};
use serde_json::Value;

/// Run `sqlmq subscribe ...` (which must end on its own, with `-n`), require success within
/// 30 s; returns stdout and stderr.
fn subscribe(db: &TestDb, args: &[&str]) -> (String, String) {
    let mut all = vec!["subscribe"];
    all.extend_from_slice(args);
    let out = db.spawn(&all).wait(Duration::from_secs(30));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sqlmq {all:?} failed:\n{stderr}");
    (stdout, stderr)
}

/// The JSON lines of `subscribe --json`.
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The `groups --json` entry of `topic/group`.
fn group(db: &TestDb, topic: &str, name: &str) -> Value {
    let all = db.json(&["groups", topic, "--json"]);
    all.as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("group {name} not in {all}"))
}

/// The ids printed by `publish` (one per line).
fn ids(stdout: &str) -> Vec<String> {
    stdout.lines().map(str::to_owned).collect()
}

/// Guarantee: what `publish` (single and `--batch`) writes, `subscribe -n` prints with its
/// key, headers, partition and offset; `topic list`, `topic describe`, `groups` and `lag`
/// count it, before and after consumption.
#[test]
fn publish_subscribe_and_counts() {
    let db = TestDb::new();
    let out = db.ok(&["topic", "create", "orders", "--partitions", "2"]);
    assert_eq!(
        out.trim(),
        "created topic orders: 2 partition(s), keep everything, parallel within partitions"
    );
    let one = db.ok(&[
        "publish",
        "orders",
        "paid 1",
        "--key",
        "c-7",
        "--header",
        "trace-id=t1",
        "--partition",
        "1",
    ]);
    let one = one.trim().to_owned();
    let batch = db.ok_with_stdin(&["publish", "orders", "--batch", "--json"], b"a\n\nb\nc\n");
    let batch: Value = serde_json::from_str(&batch).unwrap();
    let batch = batch.as_array().unwrap();
    assert_eq!(batch.len(), 3, "empty lines are skipped: {batch:?}");
    for p in batch {
        assert!(p["partition"].as_u64().unwrap() < 2, "{p}");
        assert_eq!(p["duplicate"], false);
    }

    // The same id again: a duplicate, nothing written.
    let again = db.ok(&["publish", "orders", "paid 1", "--id", &one]);
    assert_eq!(again.trim(), format!("{one} (duplicate)"));

    let list = db.json(&["topic", "list", "--json"]);
    assert_eq!(list[0]["name"], "orders");
    assert_eq!(list[0]["partitions"], 2);
    assert_eq!(list[0]["records"], 4);
    assert_eq!(list[0]["groups"], 0);

    let (stdout, stderr) = subscribe(
        &db,
        &[
            "orders", "--group", "g", "--from", "earliest", "-n", "4", "--json",
        ],
    );
    assert!(
        stderr.contains("created cluster group orders/g, starting at earliest"),
        "{stderr}"
    );
    let got = json_lines(&stdout);
    let bodies: BTreeSet<&str> = got.iter().map(|r| r["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, BTreeSet::from(["paid 1", "a", "b", "c"]));
    let keyed = got.iter().find(|r| r["body"] == "paid 1").unwrap();
    assert_eq!(keyed["id"], one.as_str());
    assert_eq!(keyed["key"], "c-7");
    assert_eq!(keyed["headers"]["trace-id"], "t1");
    assert_eq!(keyed["partition"], 1);
    assert_eq!(keyed["attempt"], 1);
    let batch_ids: BTreeSet<&str> = batch.iter().map(|p| p["id"].as_str().unwrap()).collect();
    let got_ids: BTreeSet<&str> = got
        .iter()
        .filter(|r| r["body"] != "paid 1")
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(got_ids, batch_ids);

    let g = group(&db, "orders", "g");
    assert_eq!(g["mode"], "cluster");
    assert_eq!(g["unconsumed"], 0, "printed records are acked: {g}");
    assert_eq!(g["dead"], 0);

    // Two more: the group lags by two, in partition 0.
    db.ok(&["publish", "orders", "x", "--partition", "0"]);
    db.ok(&["publish", "orders", "y", "--partition", "0"]);
    let g = group(&db, "orders", "g");
    assert_eq!(g["unconsumed"], 2, "{g}");
    assert_eq!(g["backlog"], 2, "{g}");
    assert!(g["oldest_unconsumed_age_ms"].is_u64(), "{g}");
    let lag = db.json(&["lag", "orders", "--json"]);
    let parts = lag[0]["partitions"].as_array().unwrap();
    let backlog: Vec<(u64, u64)> = parts
        .iter()
        .map(|p| {
            (
                p["partition"].as_u64().unwrap(),
                p["backlog"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(backlog, [(0, 2), (1, 0)]);
    let ends: u64 = parts.iter().map(|p| p["end"].as_u64().unwrap()).sum();
    assert_eq!(ends, 6);
    let end0 = parts[0]["end"].as_i64().unwrap();
    let table = db.ok(&["lag", "orders"]);
    let cells: Vec<&str> = table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells[..3] == ["orders", "g", "0"])
        .unwrap_or_else(|| panic!("{table}"));
    // TOPIC GROUP PARTITION END POSITION BACKLOG ...
    assert_eq!(
        cells[3..6],
        [&end0.to_string(), &(end0 - 2).to_string(), "2"],
        "{table}"
    );
    let table = db.ok(&["groups"]);
    assert!(table.starts_with("TOPIC"), "{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..4], ["orders", "g", "cluster", "2"], "{table}");

    let described = db.json(&["topic", "describe", "orders", "--json"]);
    assert_eq!(described["config"]["partitions"], 2);
    assert_eq!(described["records"], 6);
    assert_eq!(described["groups"][0]["group"], "g");
    assert_eq!(described["groups"][0]["unconsumed"], 2);
    let text = db.ok(&["topic", "describe", "orders"]);
    assert!(text.contains("6 record(s) retained"), "{text}");

    let (stdout, _) = subscribe(&db, &["orders", "--group", "g", "-n", "2"]);
    let printed: Vec<&str> = stdout.lines().collect();
    assert_eq!(printed.len(), 2, "{stdout}");
    let (x_at, y_at) = (format!("0:{}  ", end0 - 2), format!("0:{}  ", end0 - 1));
    assert!(
        printed[0].starts_with(&x_at) && printed[0].ends_with("  x"),
        "{stdout}"
    );
    assert!(
        printed[1].starts_with(&y_at) && printed[1].ends_with("  y"),
        "{stdout}"
    );
    assert_eq!(group(&db, "orders", "g")["unconsumed"], 0);
}

/// Guarantee: `reset` moves a group back (consumed records are handed out again) or forward,
/// and `replay` delivers a range again; a broadcast member resumes from its checkpoint.
#[test]
fn reset_replay_and_broadcast_checkpoints() {
    let db = TestDb::new();
    db.ok(&["topic", "create", "r"]);
    db.ok_with_stdin(&["publish", "r", "--batch"], b"a\nb\nc\n");
    let bodies = |stdout: &str| -> Vec<String> {
        json_lines(stdout)
            .iter()
            .map(|r| r["body"].as_str().unwrap().to_owned())
            .collect()
    };
    let (out, _) = subscribe(
        &db,
        &[
            "r", "--group", "g", "--from", "earliest", "-n", "3", "--json",
        ],
    );
    assert_eq!(bodies(&out), ["a", "b", "c"]);

    let moved = db.json(&["reset", "r", "--group", "g", "--to", "earliest", "--json"]);
    assert_eq!(moved, serde_json::json!([{"partition": 0, "position": 0}]));
    assert_eq!(group(&db, "r", "g")["unconsumed"], 3);
    let (out, _) = subscribe(&db, &["r", "--group", "g", "-n", "3", "--json"]);
    assert_eq!(bodies(&out), ["a", "b", "c"], "redelivered after the reset");

    let out = db.ok(&["reset", "r", "--group", "g", "--to", "2"]);
    assert!(out.contains("reset group r/g"), "{out}");
    let (out, _) = subscribe(&db, &["r", "--group", "g", "-n", "1", "--json"]);
    assert_eq!(bodies(&out), ["c"]);
    assert_eq!(group(&db, "r", "g")["unconsumed"], 0);

    let out = db.ok(&["replay", "r", "--group", "g", "--from", "1", "--to", "2"]);
    assert_eq!(out.trim(), "queued 1 record(s) of r/g for delivery again");
    assert_eq!(group(&db, "r", "g")["unconsumed"], 1);
    let (out, _) = subscribe(&db, &["r", "--group", "g", "-n", "1", "--json"]);
    assert_eq!(bodies(&out), ["b"]);
    assert_eq!(json_lines(&out)[0]["offset"], 1);

    // Broadcast: a member reads two, then resumes at the third from its checkpoint.
    let (out, err) = subscribe(
        &db,
        &[
            "r",
            "--group",
            "fan",
            "--mode",
            "broadcast",
            "--from",
            "earliest",
            "--member",
            "m1",
            "-n",
            "2",
            "--json",
        ],
    );
    assert!(err.contains("created broadcast group r/fan"), "{err}");
    assert_eq!(bodies(&out), ["a", "b"]);
    let (out, _) = subscribe(&db, &["r", "--group", "fan", "--member", "m1", "-n", "1"]);
    assert!(out.trim_end().ends_with("  c"), "{out}");
    let lag = db.json(&["lag", "r", "--group", "fan", "--json"]);
    assert_eq!(lag[0]["mode"], "broadcast");
    assert_eq!(lag[0]["members"][0]["member"], "m1");
    assert_eq!(lag[0]["members"][0]["behind"], 0);
    // `replay` is for cluster groups.
    db.fails(
        &["replay", "r", "--group", "fan", "--from", "earliest"],
        1,
        "broadcast group",
    );
}

/// Guarantee: `query` finds records by key, by partition and offset, and by time; `trace`
/// shows each group's state, attempts and deliveries.
#[test]
fn query_and_trace() {
    let db = TestDb::new();
    db.ok(&["topic", "create", "q"]);
    db.ok(&["publish", "q", "x1", "--key", "k1"]);
    let y = db
        .ok(&["publish", "q", "y", "--key", "k2"])
        .trim()
        .to_owned();
    db.ok(&["publish", "q", "x2", "--key", "k1"]);

    let by_key = db.json(&["query", "q", "--key", "k1", "--json"]);
    let found: Vec<(&str, i64)> = by_key
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["body"].as_str().unwrap(), r["offset"].as_i64().unwrap()))
        .collect();
    assert_eq!(found, [("x1", 0), ("x2", 2)]);
    let at = db.json(&[
        "query",
        "q",
        "--partition",
        "0",
        "--offset",
        "1",
        "--limit",
        "1",
        "--json",
    ]);
    assert_eq!(at.as_array().unwrap().len(), 1);
    assert_eq!(at[0]["id"], y.as_str());
    assert_eq!(at[0]["key"], "k2");
    let recent = db.json(&["query", "q", "--since", "1h", "--json"]);
    assert_eq!(recent.as_array().unwrap().len(), 3);
    let none = db.json(&["query", "q", "--since", "1h", "--until", "30m", "--json"]);
    assert_eq!(none, serde_json::json!([]));
    let table = db.ok(&["query", "q", "--key", "k2"]);
    assert!(table.contains(&y) && table.contains("k2"), "{table}");

    let before = db.json(&["trace", "q", &y, "--json"]);
    assert_eq!(before["offset"], 1);
    assert_eq!(before["groups"], serde_json::json!([]));

    subscribe(&db, &["q", "--group", "g", "--from", "earliest", "-n", "3"]);
    let trace = db.json(&["trace", "q", &y, "--json"]);
    let groups = trace["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{trace}");
    let g = groups.iter().find(|g| g["group"] == "g").unwrap();
    assert_eq!(g["mode"], "cluster");
    assert_eq!(g["state"], "acked");
    assert_eq!(g["attempts"], 1);
    assert_eq!(g["events"][0]["outcome"], "acked");
    assert!(g["events"][0]["member"].is_string(), "{g}");
    let text = db.ok(&["trace", "q", &y]);
    assert!(
        text.contains("acked") && text.contains("g deliveries:"),
        "{text}"
    );
}

/// Writes one line per record: body|SQLMQ_TOPIC|SQLMQ_GROUP|SQLMQ_PARTITION|SQLMQ_OFFSET|
/// SQLMQ_MESSAGE_ID|SQLMQ_ATTEMPT; fails (exit 3, with a message on stderr) for bodies
/// starting with "fail".
const RECORDING_CMD: &str = r#"body=$(cat); printf '%s|%s|%s|%s|%s|%s|%s\n' "$body" "$SQLMQ_TOPIC" "$SQLMQ_GROUP" "$SQLMQ_PARTITION" "$SQLMQ_OFFSET" "$SQLMQ_MESSAGE_ID" "$SQLMQ_ATTEMPT" >> "seen-$SQLMQ_GROUP"; case "$body" in fail*) echo "it broke: $body" >&2; exit 3;; esac"#;

/// Guarantee: `subscribe --exec` runs the command once per record with the body on stdin and
/// the record's facts in SQLMQ_*; exit 0 acks; a failure is retried on the group's ladder
/// (`groups` counts it, `trace` shows the error) or, on its last attempt, dead-lettered
/// (`dlq list --group` shows it with the command's stderr; `dlq redrive --group` brings it back).
#[test]
fn subscribe_exec_acks_retries_and_dead_letters() {
    let db = TestDb::new();
    db.ok(&["topic", "create", "e"]);
    let ids = ids(&db.ok_with_stdin(&["publish", "e", "--batch"], b"ok 1\nok 2\nfail 3\n"));

    let (_, stderr) = subscribe(
        &db,
        &[
            "e",
            "--group",
            "d",
            "--from",
            "earliest",
            "--max-attempts",
            "1",
            "-n",
            "3",
            "--exec",
            RECORDING_CMD,
        ],
    );
    assert!(
        stderr.contains("sqlmq subscribe e/d: 3 processed")
            && stderr.contains("2 acked, 1 nacked (1 dead-lettered)"),
        "summary: {stderr}"
    );
    let mut seen = lines(&db.path("seen-d"));
    seen.sort();
    let expected: Vec<String> = ["ok 1", "ok 2", "fail 3"]
        .iter()
        .enumerate()
        .map(|(offset, body)| format!("{body}|e|d|0|{offset}|{}|1", ids[offset]))
        .collect();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(seen, expected_sorted);

    let d = group(&db, "e", "d");
    assert_eq!(
        (d["unconsumed"].as_u64(), d["dead"].as_u64()),
        (Some(0), Some(1)),
        "{d}"
    );
    let dead = db.json(&["dlq", "list", "e", "--group", "d", "--json"]);
    let dead = dead.as_array().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["id"], ids[2].as_str());
    assert_eq!(dead[0]["offset"], 2);
    assert_eq!(dead[0]["body"], "fail 3");
    assert_eq!(
        dead[0]["errors"][0]["error"],
        "it broke: fail 3\nexit status 3"
    );
    let table = db.ok(&["dlq", "list", "e", "--group", "d"]);
    assert!(
        table.contains(&ids[2]) && table.contains("0:2") && table.contains("it broke: fail 3"),
        "{table}"
    );

    // Default attempts (16): the failure waits for its retry.
    let (_, stderr) = subscribe(
        &db,
        &[
            "e",
            "--group",
            "r",
            "--from",
            "earliest",
            "-n",
            "3",
            "--exec",
            RECORDING_CMD,
        ],
    );
    assert!(
        stderr.contains("2 acked, 1 nacked (0 dead-lettered)"),
        "{stderr}"
    );
    let r = group(&db, "e", "r");
    assert_eq!(r["retrying"], 1, "{r}");
    assert_eq!(r["dead"], 0, "{r}");
    assert_eq!(r["unconsumed"], 1, "{r}");
    let trace = db.json(&["trace", "e", &ids[2], "--json"]);
    let by_group = |name: &str| -> Value {
        trace["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == name)
            .cloned()
            .unwrap()
    };
    let tr = by_group("r");
    assert_eq!(tr["state"], "waiting_retry", "{tr}");
    assert_eq!(tr["attempts"], 1);
    assert_eq!(tr["events"][0]["outcome"], "failed");
    assert_eq!(tr["events"][0]["error"], "it broke: fail 3\nexit status 3");
    assert_eq!(by_group("d")["state"], "dead");
    // The waiting retry is listed, made due now, and then handed out at once.
    let waiting = db.json(&["retries", "e", "--group", "r", "--json"]);
    let waiting = waiting.as_array().unwrap();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(
        (
            &waiting[0]["id"],
            &waiting[0]["offset"],
            &waiting[0]["attempts"]
        ),
        (
            &Value::from(ids[2].as_str()),
            &Value::from(2),
            &Value::from(1)
        )
    );
    assert!(db.ok(&["retries", "e", "--group", "r"]).contains("0:2"));
    db.fails(&["retries", "e", "--group", "r", "--all"], 2, "--now");
    db.fails(&["retries", "e", "--group", "r", "--now"], 2, "--all");
    let out = db.ok(&["retries", "e", "--group", "r", "--now", "--all"]);
    assert_eq!(out.trim(), "1 retry of e/r due now");
    let (printed, _) = subscribe(&db, &["e", "--group", "r", "-n", "1", "--json"]);
    assert!(printed.contains("fail 3"), "{printed}");
    assert!(
        db.json(&["retries", "e", "--group", "r", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    let ok = db.json(&["trace", "e", &ids[0], "--json"]);
    assert!(
        ok["groups"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["state"] == "acked"),
        "{ok}"
    );

    // Redrive the dead letter of d, then purge what is dead (nothing left).
    let out = db.ok(&["dlq", "redrive", "e", "--group", "d", "--all"]);
    assert_eq!(out.trim(), "redrove 1 dead letter(s) into e/d");
    let d = group(&db, "e", "d");
    assert_eq!(
        (d["unconsumed"].as_u64(), d["dead"].as_u64()),
        (Some(1), Some(0)),
        "{d}"
    );
    let out = db.ok(&["dlq", "purge", "e", "--group", "d", "--yes"]);
    assert_eq!(out.trim(), "deleted 0 dead letter(s) of e/d");
    // The queue form still works beside it.
    db.ok(&["queue", "create", "plain"]);
    let out = db.ok(&["dlq", "purge", "plain", "--yes"]);
    assert_eq!(out.trim(), "deleted 0 dead letter(s) of plain");
}

/// Guarantee: bad input (unknown topic or group, malformed --from, --exec on a broadcast
/// group, a missing query selector, ...) fails with a clear `error:` line and the right exit
/// code (2 for usage, 1 otherwise), and writes nothing.
#[test]
fn bad_input_is_rejected_and_writes_nothing() {
    let db = TestDb::new();
    db.fails(&["publish", "nope", "x"], 1, "unknown topic \"nope\"");
    db.fails(&["subscribe", "nope", "--group", "g"], 1, "unknown topic");
    db.fails(&["topic", "describe", "nope"], 1, "unknown topic");
    db.fails(&["groups", "nope"], 1, "unknown topic");
    db.fails(&["topic", "create", "bad name!"], 1, "invalid topic name");
    db.fails(
        &["topic", "create", "t0", "--partitions", "0"],
        1,
        "partitions",
    );
    db.fails(
        &["topic", "create", "t0", "--retention", "forever"],
        2,
        "--retention",
    );

    db.ok(&["topic", "create", "t"]);
    db.fails(
        &["subscribe", "t", "--group", "g", "--from", "soon"],
        2,
        "--from",
    );
    db.fails(
        &["subscribe", "t", "--group", "g", "--from", "-3"],
        2,
        "--from",
    );
    db.fails(
        &["subscribe", "t", "--group", "g", "--mode", "fanout"],
        2,
        "--mode",
    );
    db.fails(
        &["subscribe", "t", "--group", "g", "--group", "h"],
        2,
        "printing reads one group",
    );
    db.fails(
        &[
            "subscribe",
            "t",
            "--group",
            "g",
            "--exec",
            "true",
            "--checkpoint-every",
            "0",
        ],
        2,
        "--checkpoint-every",
    );
    db.fails(&["subscribe", "t", "--group", "g", "-n", "0"], 2, "-n");
    db.fails(&["subscribe", "t"], 2, "--group");
    db.fails(
        &["reset", "t", "--group", "g", "--to", "earliest"],
        1,
        "unknown consumer group",
    );
    db.fails(&["reset", "t", "--group", "g", "--to", "never"], 2, "--to");
    db.fails(&["replay", "t", "--group", "g", "--from", "x"], 2, "--from");
    db.fails(
        &["dlq", "list", "t", "--group", "g"],
        1,
        "unknown consumer group",
    );
    db.fails(&["dlq", "purge", "t", "--group", "g"], 2, "--yes");
    db.fails(&["query", "t"], 2, "required");
    db.fails(&["query", "t", "--partition", "0"], 2, "--offset");
    db.fails(&["query", "t", "--key", "k", "--limit", "0"], 2, "--limit");
    db.fails(&["query", "t", "--since", "last week"], 2, "--since");
    db.fails(
        &["query", "t", "--partition", "3", "--offset", "0"],
        1,
        "no partition 3",
    );
    db.fails(&["trace", "t", "not-an-id"], 2, "ID");
    db.fails(
        &["trace", "t", "01a204ca-9864-70ad-9b80-bf7238019630"],
        1,
        "has no record",
    );
    db.fails(
        &["publish", "t", "x", "--partition", "5"],
        1,
        "partition 5 does not exist",
    );
    db.fails(&["publish", "t", "x", "--id", "42"], 2, "--id");
    db.fails_with_stdin(
        &[
            "publish",
            "t",
            "--batch",
            "--id",
            "01a204ca-9864-70ad-9b80-bf7238019630",
        ],
        b"a\n",
        2,
        "cannot be used with",
    );
    db.fails(
        &["publish", "t", "x", "--header", "novalue"],
        2,
        "KEY=VALUE",
    );
    db.fails(
        &["--max-payload-bytes", "3", "publish", "t", "four"],
        1,
        "exceeds the limit of 3 bytes",
    );
    db.fails_with_stdin(
        &["--max-payload-bytes", "3", "publish", "t", "--batch"],
        b"ok\ntoo long\n",
        1,
        "line 2 of stdin is too large",
    );

    // An existing broadcast group refuses a mode change.
    db.ok(&["publish", "t", "one"]);
    subscribe(
        &db,
        &[
            "t",
            "--group",
            "b",
            "--mode",
            "broadcast",
            "--from",
            "earliest",
            "-n",
            "1",
        ],
    );
    db.fails(
        &["subscribe", "t", "--group", "b", "--mode", "cluster"],
        2,
        "exists as a broadcast group",
    );

    let list = db.json(&["topic", "list", "--json"]);
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "only t was created: {list}"
    );
    assert_eq!(list[0]["records"], 1, "only `one` was published: {list}");
    let groups = db.json(&["groups", "--json"]);
    let names: Vec<&str> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["b"], "no other group was created");
}

#[test]
fn describe_shows_partition_ranges_and_delete_asks_then_removes_everything() {
    let db = TestDb::new();
    db.ok(&["topic", "create", "old", "--partitions", "2"]);
    db.ok_with_stdin(
        &["publish", "old", "--batch", "--partition", "1"],
        b"a\nb\nc\n",
    );
    db.ok(&[
        "subscribe",
        "old",
        "--group",
        "g",
        "--from",
        "earliest",
        "-n",
        "1",
    ]);
    let described = db.json(&["topic", "describe", "old", "--json"]);
    let parts = described["partitions"].as_array().unwrap();
    let ranges: Vec<(i64, i64, i64)> = parts
        .iter()
        .map(|p| {
            (
                p["partition"].as_i64().unwrap(),
                p["start"].as_i64().unwrap(),
                p["end"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ranges, vec![(0, 0, 0), (1, 0, 3)]);

    db.fails(&["topic", "delete", "old"], 2, "--yes");
    assert_eq!(
        db.json(&["topic", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    db.ok(&["topic", "delete", "old", "--yes"]);
    db.fails(&["topic", "describe", "old"], 1, "unknown topic");
    assert!(
        db.json(&["topic", "list", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        db.json(&["groups", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    db.fails(&["topic", "delete", "old", "--yes"], 1, "unknown topic");
}
