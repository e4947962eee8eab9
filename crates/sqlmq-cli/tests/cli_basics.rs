//! The plain commands end to end: a round trip (send, recv, ack) seen through `queues --json`,
//! and malformed input rejected with a clear error, the right exit code and nothing written
//! (the bad input guarantee of the guide (docs/guide/src/guarantees.md)).

mod common;

use common::{Stats, TestDb};

/// Guarantee: what `send` writes, `recv` hands out with its body, headers and a receipt that
/// `ack` accepts; the counts in `queues --json` follow each step; a stale receipt is refused.
#[test]
fn send_recv_ack_round_trip_shows_in_queue_counts() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "q"]);
    let id = db.ok(&["send", "q", "hello", "--header", "trace-id=abc"]);
    let id = id.trim();
    assert_eq!(
        db.stats("q"),
        Stats {
            ready: 1,
            ..Stats::default()
        }
    );
    let all = db.json(&["queues", "--json"]);
    assert_eq!(all[0]["name"], "q");
    assert_eq!(all[0]["paused"], false);
    assert!(all[0]["oldest_ready_age_ms"].is_u64(), "{all}");

    let got = db.json(&["recv", "q", "--json", "--lease", "1m"]);
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(m["id"], id);
    assert_eq!(m["body"], "hello");
    assert_eq!(m["attempt"], 1);
    assert_eq!(m["headers"]["trace-id"], "abc");
    let receipt = m["receipt"].as_str().unwrap().to_owned();
    assert_eq!(receipt, format!("{id}:{}", m["token"]));
    assert_eq!(
        db.stats("q"),
        Stats {
            in_flight: 1,
            ..Stats::default()
        }
    );

    let acked = db.ok(&["ack", "q", &receipt]);
    assert!(acked.contains("acked 1 of 1"), "{acked}");
    assert_eq!(db.stats("q"), Stats::default());
    // The same receipt again: its lease is gone, exit 1, the receipt named.
    db.fails(&["ack", "q", &receipt], 1, &receipt);
}

/// Guarantee: bodies are kept byte for byte (stdin, non-UTF-8 shown as base64), and
/// `recv --ack` settles what it printed.
/// `send --replace KEY` takes the key's waiting message's place; `--debounce` delays it.
#[test]
fn a_replacing_send_takes_the_waiting_messages_place() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "q"]);
    let first = db
        .ok(&["send", "q", "1", "--replace", "k"])
        .trim()
        .to_owned();
    let second = db.ok(&["send", "q", "2", "--replace", "k"]);
    assert_eq!(second.trim(), format!("{first} (replaced)"));
    let sent = db.json(&[
        "send",
        "q",
        "d",
        "--replace",
        "d",
        "--debounce",
        "1h",
        "--json",
    ]);
    assert_eq!(sent[0]["replaced"], false, "{sent}");
    let stats = db.stats("q");
    assert_eq!((stats.ready, stats.scheduled), (1, 1));
    let got = db.json(&["recv", "q", "-n", "10", "--json"]);
    assert_eq!(got.as_array().unwrap().len(), 1, "{got}");
    assert_eq!(
        (&got[0]["id"], &got[0]["body"]),
        (&serde_json::json!(first), &serde_json::json!("2"))
    );
    db.fails(&["send", "q", "x", "--debounce", "1s"], 2, "--replace");
}

#[test]
fn a_fair_queue_shares_deliveries_and_lists_its_keys() {
    let db = TestDb::new();
    let created = db.ok(&["queue", "create", "q", "--fair"]);
    assert!(created.contains("fair across fairness keys"), "{created}");
    let big: Vec<String> = (0..30).map(|i| format!("big {i}")).collect();
    db.ok_with_stdin(
        &["send", "q", "--batch", "--fairness-key", "big"],
        big.join("\n").as_bytes(),
    );
    db.ok_with_stdin(
        &["send", "q", "--batch", "--fairness-key", "small"],
        b"small 0\nsmall 1\nsmall 2",
    );
    let set = db.ok(&["queue", "weight", "q", "small", "2"]);
    assert!(set.contains("weight 2"), "{set}");
    let keys = db.json(&["queue", "keys", "q", "--json"]);
    assert_eq!(
        (&keys[0]["key"], &keys[0]["ready"]),
        (&serde_json::json!("big"), &serde_json::json!(30)),
        "{keys}"
    );
    assert_eq!(
        (&keys[1]["weight"], &keys[1]["arrived"]),
        (&serde_json::json!(2), &serde_json::json!(3)),
        "{keys}"
    );
    let table = db.ok(&["queue", "keys", "q"]);
    assert!(
        table.contains("IN-FLIGHT") && table.contains("\"small\""),
        "{table}"
    );
    // Sent after big's 30, the small ones come in the first claim.
    let got = db.json(&["recv", "q", "-n", "6", "--json"]);
    let small = got
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["body"].as_str().unwrap().starts_with("small"))
        .count();
    assert_eq!(small, 3, "{got}");
    db.fails(&["queue", "weight", "q", "small", "0"], 1, "weight 0");
    db.fails(&["queue", "keys", "nope"], 1, "unknown queue \"nope\"");
    let plain = db.ok(&["queue", "create", "q", "--fair", "false"]);
    assert!(!plain.contains("fair"), "{plain}");
}

#[test]
fn binary_bodies_from_stdin_and_recv_ack() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "bin"]);
    db.ok_with_stdin(&["send", "bin"], &[0xff, 0x00, 0x01]);
    db.ok_with_stdin(&["send", "bin", "--priority", "-5"], b"line 1\nline 2\n");
    let got = db.json(&["recv", "bin", "-n", "10", "--ack", "--json"]);
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), 2);
    // Priority -5 is delivered first (lower first).
    assert_eq!(got[0]["body"], "line 1\nline 2\n");
    assert_eq!(got[0]["priority"], -5);
    assert_eq!(got[1]["body_base64"], "/wAB");
    assert!(got[1].get("body").is_none());
    assert_eq!(db.stats("bin"), Stats::default());
    let human = db.run(&["recv", "bin"]);
    assert!(human.status.success());
    assert!(String::from_utf8_lossy(&human.stderr).contains("no message ready"));
}

/// Guarantee: malformed input gets a non-zero exit (2 for usage, 1 for runtime), a clear
/// `error:` line on stderr, and writes nothing.
#[test]
fn malformed_input_is_rejected_and_writes_nothing() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "q"]);

    // Invalid queue names: refused by the library's validation (runtime error, exit 1).
    db.fails(&["send", "bad name!", "x"], 1, "invalid queue name");
    db.fails(
        &["queue", "create", &"x".repeat(129)],
        1,
        "invalid queue name",
    );
    // Unknown queue.
    db.fails(&["send", "nope", "x"], 1, "unknown queue \"nope\"");
    db.fails(&["recv", "nope"], 1, "unknown queue");
    // Oversized payload, from the argument and from stdin.
    db.fails(
        &["--max-payload-bytes", "10", "send", "q", "eleven bytes"],
        1,
        "exceeds the limit of 10 bytes",
    );
    db.fails_with_stdin(
        &["send", "q", "--max-payload-bytes", "10"],
        b"0123456789AB",
        1,
        "payload of 12 bytes",
    );
    // Bad receipts: malformed (usage) and well-formed but not holding a lease (runtime).
    db.fails(&["ack", "q", "not-a-receipt"], 2, "invalid receipt");
    db.fails(
        &["ack", "q", "01a204ca-9864-70ad-9b80-bf7238019630:x"],
        2,
        "invalid receipt",
    );
    db.fails(&["nack", "q", "1234"], 2, "invalid receipt");
    db.fails(
        &["ack", "q", "01a204ca-9864-70ad-9b80-bf7238019630:7"],
        1,
        "lease lost",
    );
    // Bad durations.
    db.fails(&["send", "q", "x", "--delay", "5 parsecs"], 2, "--delay");
    db.fails(&["recv", "q", "--lease", "soon"], 2, "--lease");
    db.fails(
        &["queue", "create", "q2", "--backoff", "1s,never"],
        2,
        "--backoff",
    );
    // Invalid priorities: out of the i16 range or not a number. (Negative priorities are
    // valid: lower values are delivered first.)
    db.fails(&["send", "q", "x", "--priority", "40000"], 2, "--priority");
    db.fails(&["send", "q", "x", "--priority", "-40000"], 2, "--priority");
    db.fails(&["send", "q", "x", "--priority", "high"], 2, "--priority");
    // --batch with --id (an idempotency key cannot be shared by many messages).
    db.fails_with_stdin(
        &["send", "q", "--batch", "--id", "k"],
        b"a\nb\n",
        2,
        "cannot be used with",
    );
    // Bad headers, keys, counts.
    db.fails(&["send", "q", "x", "--header", "novalue"], 2, "KEY=VALUE");
    db.fails(
        &["send", "q", "x", "--key", &"k".repeat(200)],
        1,
        "ordering key",
    );
    db.fails(&["recv", "q", "-n", "0"], 1, "n must be");
    // Destructive commands need --yes.
    db.fails(&["purge", "q"], 2, "--yes");
    db.fails(&["queue", "delete", "q"], 2, "--yes");
    db.fails(&["dlq", "purge", "q"], 2, "--yes");

    assert_eq!(db.stats("q"), Stats::default(), "nothing was written");
    let all = db.json(&["queues", "--json"]);
    assert_eq!(
        all.as_array().unwrap().len(),
        1,
        "no queue was created: {all}"
    );
}

/// Guarantee: settings come from a TOML file, overridden by flags; a broken file is an error.
#[test]
fn config_file_and_its_overrides() {
    let db = TestDb::new();
    let config = db.path("sqlmq.toml");
    std::fs::write(
        &config,
        format!("database_url = \"{}\"\nmax_payload_bytes = 4\n", db.url),
    )
    .unwrap();
    let cfg = config.to_str().unwrap();
    db.ok(&["queue", "create", "c"]);
    // The file's limit applies (the env URL is removed so that the file's URL is used)...
    let out = db
        .cmd(&["--config", cfg, "send", "c", "too long"])
        .env_remove("SQLMQ_DATABASE_URL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("limit of 4 bytes"));
    // ...unless a flag overrides it.
    let out = db
        .cmd(&[
            "send",
            "c",
            "too long",
            "--config",
            cfg,
            "--max-payload-bytes",
            "100",
        ])
        .env_remove("SQLMQ_DATABASE_URL")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(db.stats("c").ready, 1);
    std::fs::write(&config, "max_payload = 4\n").unwrap();
    db.fails(&["--config", cfg, "queues"], 1, "invalid config file");
}

/// Guarantee: an unreachable server fails fast (not after the pool's 30 s timeout) with the
/// real cause, and the password is not printed.
#[test]
fn an_unreachable_server_is_reported_at_once() {
    let started = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sqlmq"))
        .args([
            "queues",
            "--database-url",
            "mysql://app:hunter2@127.0.0.1:1/x",
        ])
        .env_remove("SQLMQ_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot reach the database server at 127.0.0.1:1"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
