//! Looking at a queue through the CLI: `peek` lists a state a page at a time (the cursor it
//! prints leads to the next page) or the messages of a key, `show` one message in any state;
//! neither takes a lease.

mod common;

use common::TestDb;
use serde_json::Value;

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn peek_pages_through_each_state_and_show_finds_any_message() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "p", "--max-attempts", "1"]);
    let sent: Vec<String> = (0..5)
        .map(|i| db.ok(&["send", "p", &format!("m{i}")]).trim().to_owned())
        .collect();
    let later = db
        .ok(&["send", "p", "later", "--delay", "1h"])
        .trim()
        .to_owned();
    let head = db
        .ok(&["send", "p", "k1", "--key", "cust"])
        .trim()
        .to_owned();
    let behind = db
        .ok(&["send", "p", "k2", "--key", "cust"])
        .trim()
        .to_owned();

    // Ready, two at a time: the printed cursor leads on, nothing skipped or repeated.
    let out = db
        .cmd(&["peek", "p", "-n", "2", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut seen = ids(&serde_json::from_slice(&out.stdout).unwrap());
    let mut hint = String::from_utf8_lossy(&out.stderr).into_owned();
    while let Some(cursor) = hint.split("--after ").nth(1).map(|c| c.trim().to_owned()) {
        let out = db
            .cmd(&["peek", "p", "-n", "2", "--json", "--after", &cursor])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        seen.extend(ids(&serde_json::from_slice(&out.stdout).unwrap()));
        hint = String::from_utf8_lossy(&out.stderr).into_owned();
    }
    let mut ready = sent.clone();
    ready.push(head.clone());
    assert_eq!(seen, ready);

    assert_eq!(
        ids(&db.json(&["peek", "p", "--state", "scheduled", "--json"])),
        std::slice::from_ref(&later)
    );
    assert_eq!(
        ids(&db.json(&["peek", "p", "--state", "blocked", "--json"])),
        std::slice::from_ref(&behind)
    );
    assert_eq!(
        ids(&db.json(&["peek", "p", "--key", "cust", "--json"])),
        [head, behind]
    );
    let table = db.ok(&["peek", "p", "--state", "scheduled"]);
    assert!(
        table.contains("scheduled") && table.contains("later"),
        "{table}"
    );

    // Peeking took nothing: a receive gets the first ready message on its first attempt.
    let got = db.json(&["recv", "p", "--json"]);
    assert_eq!(got[0]["id"], sent[0].as_str());
    assert_eq!(got[0]["attempt"], 1);
    let shown = db.json(&["show", "p", &sent[0], "--json"]);
    assert_eq!(shown["state"], "in_flight");
    assert_eq!(shown["body"], "m0");
    assert!(shown["lease_until"].is_string());
    let text = db.ok(&["show", "p", &later]);
    assert!(
        text.contains("scheduled") && text.contains("later"),
        "{text}"
    );

    db.fails(
        &["show", "p", "01a21a06-b961-7630-8c5f-2f9c0855c489"],
        1,
        "has no message",
    );
    db.fails(&["peek", "p", "--state", "dead"], 2, "sqlmq dlq list");
    db.fails(&["peek", "p", "--after", "garbage"], 2, "not a cursor");
    db.fails(&["peek", "nosuch"], 1, "nosuch");
}
