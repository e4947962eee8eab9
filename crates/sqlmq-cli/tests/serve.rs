//! `sqlmq serve` as an operator runs it: refuses an open address without a token, serves,
//! and on SIGTERM ends long polls, finishes requests and exits 0.

mod common;

use std::time::{Duration, Instant};

use common::{TestDb, eventually, free_port, http};

#[test]
fn refuses_a_non_loopback_address_without_a_token() {
    let db = TestDb::new();
    let err = db.fails(&["serve", "--listen", "0.0.0.0:0"], 2, "without a token");
    assert!(err.contains("--token"), "{err}");
}

#[test]
fn serves_then_stops_gracefully_on_sigterm() {
    let db = TestDb::new();
    db.ok(&["migrate"]);
    db.ok(&["queue", "create", "q"]);
    let port = free_port();
    let server = db.spawn(&["serve", "--listen", &format!("127.0.0.1:{port}")]);
    eventually(Duration::from_secs(20), "the server answers", || {
        http(port, "GET", "/readyz", "")
            .ok()
            .filter(|r| r.starts_with("HTTP/1.1 200"))
    });
    let sent = http(
        port,
        "POST",
        "/v1/queues/q/messages",
        r#"{"messages":[{"body":"hi"}]}"#,
    )
    .unwrap();
    assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");
    // A long poll in progress when SIGTERM comes answers at once, empty.
    let poll = std::thread::spawn(move || {
        http(
            port,
            "POST",
            "/v1/queues/q/receive",
            r#"{"max":1,"wait_ms":1}"#,
        )
        .unwrap();
        http(port, "POST", "/v1/queues/q/receive", r#"{"wait_ms":20000}"#).unwrap()
    });
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    server.signal(libc::SIGTERM);
    let answer = poll.join().unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains(r#"{"messages":[]}"#),
        "{answer}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let out = server.wait(Duration::from_secs(10));
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
