//! Queue routes through real HTTP against a real database: every route's success and error
//! paths, long polls, lease expiry, dead letters.

mod common;

use std::time::{Duration, Instant};

use common::{TestServer, assert_error};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_admin_routes() {
    let s = TestServer::start().await;
    // Create with settings, then update one field: the others are kept.
    let (st, q) = s
        .put(
            "/v1/queues/emails",
            json!({"max_attempts": 3, "backoff": "1s,10s", "dedup_window_ms": 60000}),
        )
        .await;
    assert_eq!(st, 200, "{q}");
    assert_eq!(q["config"]["max_attempts"], 3);
    assert_eq!(q["config"]["backoff"], "1s,10s");
    let (_, q) = s.put("/v1/queues/emails", json!({"max_attempts": 4})).await;
    assert_eq!(q["config"]["max_attempts"], 4);
    assert_eq!(q["config"]["backoff"], "1s,10s");
    assert_eq!(q["config"]["dedup_window_ms"], 60000);

    let (st, list) = s.get("/v1/queues").await;
    assert_eq!(st, 200);
    assert_eq!(list["queues"][0]["name"], "emails");

    s.send("emails", &["a", "b"]).await;
    let (_, q) = s.get("/v1/queues/emails").await;
    assert_eq!(q["ready"], 2);

    // Pause: receives get nothing; resume: they get messages again.
    assert_eq!(s.post("/v1/queues/emails/pause", json!(null)).await.0, 204);
    let (_, q) = s.get("/v1/queues/emails").await;
    assert_eq!(q["paused"], true);
    let (_, r) = s.post("/v1/queues/emails/receive", json!({"max": 5})).await;
    assert_eq!(r["messages"].as_array().unwrap().len(), 0);
    assert_eq!(s.post("/v1/queues/emails/resume", json!(null)).await.0, 204);
    let (_, r) = s.post("/v1/queues/emails/receive", json!({"max": 1})).await;
    assert_eq!(r["messages"].as_array().unwrap().len(), 1);

    // Purge counts everything but dead letters, the in-flight one included.
    let (st, n) = s.post("/v1/queues/emails/purge", json!(null)).await;
    assert_eq!((st, n["count"].as_u64()), (200, Some(2)));

    // Errors: unknown, invalid name, invalid values, malformed bodies.
    assert_error(&s.get("/v1/queues/nope").await, 404, "unknown_queue");
    assert_error(
        &s.post("/v1/queues/nope/pause", json!(null)).await,
        404,
        "unknown_queue",
    );
    assert_error(
        &s.put("/v1/queues/bad%20name", json!({})).await,
        422,
        "invalid_name",
    );
    assert_error(
        &s.put("/v1/queues/x", json!({"max_attempts": 0})).await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.put("/v1/queues/x", json!({"backoff": "soon"})).await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.put("/v1/queues/x", json!({"colour": "red"})).await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.put("/v1/queues/x", json!({"max_attempts": "three"}))
            .await,
        422,
        "invalid_argument",
    );
    let raw = s
        .http
        .put(s.url("/v1/queues/x"))
        .header("content-type", "application/json")
        .body("{\"max_attempts\":")
        .send()
        .await
        .unwrap();
    assert_error(&common::split(raw).await, 400, "bad_request");
    let raw = s
        .http
        .put(s.url("/v1/queues/x"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_error(&common::split(raw).await, 415, "unsupported_media_type");
    assert_error(&s.get("/v1/nothing-here").await, 404, "not_found");
    assert_error(&s.delete("/v1/queues").await, 405, "method_not_allowed");

    // Delete, then it is unknown.
    assert_eq!(s.delete("/v1/queues/emails").await.0, 204);
    assert_error(&s.get("/v1/queues/emails").await, 404, "unknown_queue");
    assert_error(&s.delete("/v1/queues/emails").await, 404, "unknown_queue");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_limits_set_shown_removed_and_validated() {
    let s = TestServer::start().await;
    // Set both; GET and the list show them.
    let (st, q) = s
        .put(
            "/v1/queues/limited",
            json!({"max_in_flight": 2, "rate_limit": "100/1m"}),
        )
        .await;
    assert_eq!(st, 200, "{q}");
    assert_eq!(q["config"]["max_in_flight"], 2);
    assert_eq!(q["config"]["rate_limit"], "100/1m");
    let (_, q) = s.get("/v1/queues/limited").await;
    assert_eq!(q["config"]["max_in_flight"], 2);
    assert_eq!(q["config"]["rate_limit"], "100/1m");
    let (_, list) = s.get("/v1/queues").await;
    assert_eq!(list["queues"][0]["config"]["rate_limit"], "100/1m");
    // Another field changed: the limits are kept. A window of 90 s is printed without spaces
    // and is accepted back as printed.
    let (_, q) = s
        .put(
            "/v1/queues/limited",
            json!({"max_attempts": 7, "rate_limit": "5/90s"}),
        )
        .await;
    assert_eq!(q["config"]["max_in_flight"], 2);
    assert_eq!(q["config"]["rate_limit"], "5/1m30s");
    let (st, q) = s
        .put("/v1/queues/limited", json!({"rate_limit": "5/1m30s"}))
        .await;
    assert_eq!((st, &q["config"]["rate_limit"]), (200, &json!("5/1m30s")));

    // 0 and "none" remove them: null again.
    let (st, q) = s
        .put(
            "/v1/queues/limited",
            json!({"max_in_flight": 0, "rate_limit": "none"}),
        )
        .await;
    assert_eq!(st, 200, "{q}");
    assert_eq!(q["config"]["max_in_flight"], Value::Null);
    assert_eq!(q["config"]["rate_limit"], Value::Null);
    let (_, q) = s.get("/v1/queues/limited").await;
    assert_eq!(q["config"]["max_in_flight"], Value::Null);
    assert_eq!(q["config"]["rate_limit"], Value::Null);
    // A new queue has none.
    let (_, q) = s.put("/v1/queues/plain", json!({})).await;
    assert_eq!(q["config"]["max_in_flight"], Value::Null);
    assert_eq!(q["config"]["rate_limit"], Value::Null);

    // Bad values: 422 JSON errors, and the queue is left as it was.
    for bad in [
        json!({"rate_limit": "0/1s"}),
        json!({"rate_limit": "fast"}),
        json!({"rate_limit": "5/1ms"}),
        json!({"rate_limit": "5/2d"}),
        json!({"rate_limit": ""}),
        json!({"max_in_flight": 2000000}),
        json!({"max_in_flight": 2, "rate_limit": "fast"}),
    ] {
        assert_error(
            &s.put("/v1/queues/limited", bad.clone()).await,
            422,
            "invalid_argument",
        );
    }
    for bad in [json!({"max_in_flight": -1}), json!({"max_in_flight": "2"})] {
        assert_error(
            &s.put("/v1/queues/limited", bad).await,
            422,
            "invalid_argument",
        );
    }
    let (_, q) = s.get("/v1/queues/limited").await;
    assert_eq!(q["config"]["max_in_flight"], Value::Null);
    assert_eq!(q["config"]["rate_limit"], Value::Null);
    // A bad value creates no queue either.
    assert_error(
        &s.put("/v1/queues/never", json!({"rate_limit": "fast"}))
            .await,
        422,
        "invalid_argument",
    );
    assert_error(&s.get("/v1/queues/never").await, 404, "unknown_queue");

    // The document says so: the output's fields are nullable, the request's bounded.
    let doc = serde_json::to_value(sqlmq_serve::openapi()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let out = &schemas["QueueConfigOut"]["properties"];
    assert_eq!(out["max_in_flight"]["type"], json!(["integer", "null"]));
    assert_eq!(out["max_in_flight"]["minimum"], 1);
    assert_eq!(out["rate_limit"]["type"], json!(["string", "null"]));
    let req = &schemas["QueueConfigRequest"]["properties"];
    assert_eq!(req["max_in_flight"]["minimum"], 0);
    assert_eq!(req["max_in_flight"]["maximum"], 1_000_000);
    assert_eq!(req["rate_limit"]["type"], json!(["string", "null"]));
    s.finish().await;
}

/// The messages of a receive.
fn received(v: &Value) -> Vec<Value> {
    v["messages"].as_array().expect("messages").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_queue_hands_out_no_more_than_its_limits() {
    let s = TestServer::start().await;
    // At most 2 in flight: a receive of 5 gets 2, the next gets none until an ack frees a slot.
    let (st, _) = s
        .put("/v1/queues/narrow", json!({"max_in_flight": 2}))
        .await;
    assert_eq!(st, 200);
    s.send("narrow", &["a", "b", "c", "d", "e"]).await;
    let receive = json!({"max": 5, "lease_ms": 60000});
    let (st, got) = s.post("/v1/queues/narrow/receive", receive.clone()).await;
    assert_eq!(st, 200, "{got}");
    let first = received(&got);
    assert_eq!(first.len(), 2, "{got}");
    let (_, got) = s.post("/v1/queues/narrow/receive", receive.clone()).await;
    assert_eq!(received(&got).len(), 0, "{got}");
    let (_, q) = s.get("/v1/queues/narrow").await;
    assert_eq!(
        (q["in_flight"].as_u64(), q["ready"].as_u64()),
        (Some(2), Some(3))
    );
    let (_, ack) = s
        .post(
            "/v1/queues/narrow/ack",
            json!({"receipts": [first[0]["receipt"]]}),
        )
        .await;
    assert_eq!(ack["results"][0]["result"], "ok", "{ack}");
    // The freed slot: one message, even to a long poll asking for 5.
    let (_, got) = s
        .post(
            "/v1/queues/narrow/receive",
            json!({"max": 5, "lease_ms": 60000, "wait_ms": 3000}),
        )
        .await;
    assert_eq!(received(&got).len(), 1, "{got}");
    let (_, got) = s.post("/v1/queues/narrow/receive", receive.clone()).await;
    assert_eq!(received(&got).len(), 0, "{got}");
    // Limit removed: the rest at once (this server's handle does not wait for a refresh).
    let (st, _) = s
        .put("/v1/queues/narrow", json!({"max_in_flight": 0}))
        .await;
    assert_eq!(st, 200);
    let (_, got) = s.post("/v1/queues/narrow/receive", receive.clone()).await;
    assert_eq!(received(&got).len(), 2, "{got}");

    // 2 deliveries a minute: acking does not give the window back.
    let (st, _) = s
        .put("/v1/queues/slow", json!({"rate_limit": "2/1m"}))
        .await;
    assert_eq!(st, 200);
    s.send("slow", &["a", "b", "c", "d", "e"]).await;
    let (_, got) = s.post("/v1/queues/slow/receive", receive.clone()).await;
    let first = received(&got);
    assert_eq!(first.len(), 2, "{got}");
    let receipts: Vec<Value> = first.iter().map(|m| m["receipt"].clone()).collect();
    let (_, ack) = s
        .post("/v1/queues/slow/ack", json!({"receipts": receipts}))
        .await;
    assert_eq!(ack["results"][1]["result"], "ok", "{ack}");
    let (_, got) = s.post("/v1/queues/slow/receive", receive).await;
    assert_eq!(received(&got).len(), 0, "{got}");
    let (_, q) = s.get("/v1/queues/slow").await;
    assert_eq!(q["ready"], 3);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_receive_ack_nack_extend() {
    let s = TestServer::start().await;
    s.queue("jobs").await;
    // Every option, text and binary bodies; an idempotent resend is a duplicate.
    let (st, sent) = s
        .post(
            "/v1/queues/jobs/messages",
            json!({"messages": [
                {"body": "text", "headers": {"h": "v"}, "priority": -1, "ordering_key": "k1",
                 "idempotency_key": "once"},
                {"body_base64": "AP8=", "priority": 5},
                {"body": "later", "delay_ms": 60000},
            ]}),
        )
        .await;
    assert_eq!(st, 200, "{sent}");
    assert_eq!(sent["messages"].as_array().unwrap().len(), 3);
    let (_, dup) = s
        .post(
            "/v1/queues/jobs/messages",
            json!({"messages": [{"body": "x", "idempotency_key": "once"}]}),
        )
        .await;
    assert_eq!(dup["messages"][0]["duplicate"], true);
    assert_eq!(dup["messages"][0]["id"], sent["messages"][0]["id"]);

    let (_, got) = s
        .post(
            "/v1/queues/jobs/receive",
            json!({"max": 10, "lease_ms": 60000}),
        )
        .await;
    let msgs = got["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "the delayed one is not ready: {got}");
    assert_eq!(msgs[0]["body"], "text");
    assert_eq!(msgs[0]["headers"]["h"], "v");
    assert_eq!(msgs[0]["ordering_key"], "k1");
    assert_eq!(msgs[0]["attempt"], 1);
    assert_eq!(msgs[1]["body_base64"], "AP8=");
    assert!(msgs[1].get("body").is_none());
    let r0 = msgs[0]["receipt"].as_str().unwrap().to_owned();
    let r1 = msgs[1]["receipt"].as_str().unwrap().to_owned();

    // Extend, then ack: ok; a second ack of the same receipt: lease_lost.
    let (_, ext) = s
        .post(
            "/v1/queues/jobs/extend",
            json!({"receipts": [r0], "lease_ms": 120000}),
        )
        .await;
    assert_eq!(ext["results"][0]["result"], "ok");
    let (_, ack) = s
        .post("/v1/queues/jobs/ack", json!({"receipts": [r0]}))
        .await;
    assert_eq!(ack["results"][0]["result"], "ok");
    let (_, ack) = s
        .post("/v1/queues/jobs/ack", json!({"receipts": [r0]}))
        .await;
    assert_eq!(ack["results"][0]["result"], "lease_lost");
    let (_, ext) = s
        .post(
            "/v1/queues/jobs/extend",
            json!({"receipts": [r0], "lease_ms": 1000}),
        )
        .await;
    assert_eq!(ext["results"][0]["result"], "lease_lost");

    // Nack with an explicit delay: retry; the error is kept for the dead-letter history.
    let (_, nack) = s
        .post(
            "/v1/queues/jobs/nack",
            json!({"receipts": [r1], "error": "boom", "retry_in_ms": 0}),
        )
        .await;
    assert_eq!(nack["results"][0]["result"], "ok", "{nack}");
    assert_eq!(nack["results"][0]["outcome"], "retry");
    let (_, again) = s.post("/v1/queues/jobs/receive", json!({"max": 1})).await;
    assert_eq!(again["messages"][0]["attempt"], 2);

    // Cancel: a waiting message goes; an in-flight one is a conflict; then it is unknown.
    let later = sent["messages"][2]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        s.delete(&format!("/v1/queues/jobs/messages/{later}"))
            .await
            .0,
        204
    );
    assert_error(
        &s.delete(&format!("/v1/queues/jobs/messages/{later}")).await,
        404,
        "message_not_found",
    );
    // An in-flight message: its progress shows with it; cancelled where it runs (202), its
    // receipt then holds nothing.
    let held = again["messages"][0]["id"].as_str().unwrap().to_owned();
    let receipt = again["messages"][0]["receipt"].as_str().unwrap().to_owned();
    let (status, _) = s
        .post(
            "/v1/queues/jobs/progress",
            json!({"receipt": receipt, "value": {"done": 3, "of": 4}}),
        )
        .await;
    assert_eq!(status, 204);
    let (_, shown) = s.get(&format!("/v1/queues/jobs/messages/{held}")).await;
    assert_eq!(shown["progress"], json!({"done": 3, "of": 4}), "{shown}");
    assert_eq!(
        s.delete(&format!("/v1/queues/jobs/messages/{held}"))
            .await
            .0,
        202
    );
    let (_, shown) = s.get(&format!("/v1/queues/jobs/messages/{held}")).await;
    assert_eq!(shown["state"], "cancelling", "{shown}");
    assert_error(
        &s.post(
            "/v1/queues/jobs/progress",
            json!({"receipt": receipt, "value": 4}),
        )
        .await,
        409,
        "cancelled",
    );
    assert_error(
        &s.delete("/v1/queues/jobs/messages/zzz").await,
        422,
        "invalid_argument",
    );

    // Errors: (path, body, status, code); nothing is claimed, acked or sent by any of them.
    let q = "/v1/queues/jobs";
    let cases = [
        ("receive", json!({"max": 0}), 422, "invalid_argument"),
        ("receive", json!({"max": 1001}), 422, "invalid_argument"),
        ("receive", json!({"lease_ms": 0}), 422, "invalid_argument"),
        (
            "receive",
            json!({"wait_ms": 20001}),
            422,
            "invalid_argument",
        ),
        ("receive", json!({"max": -1}), 422, "invalid_argument"),
        ("ack", json!({"receipts": []}), 422, "invalid_argument"),
        (
            "ack",
            json!({"receipts": ["nope"]}),
            422,
            "invalid_argument",
        ),
        (
            "nack",
            json!({"receipts": [r1], "retry_in_ms": u64::MAX}),
            422,
            "invalid_argument",
        ),
        ("extend", json!({"receipts": [r1]}), 422, "invalid_argument"),
        ("messages", json!({"messages": []}), 422, "invalid_argument"),
        (
            "messages",
            json!({"messages": [{}]}),
            422,
            "invalid_argument",
        ),
        (
            "messages",
            json!({"messages": [{"body": "a", "body_base64": "YQ=="}]}),
            422,
            "invalid_argument",
        ),
        (
            "messages",
            json!({"messages": [{"body_base64": "***"}]}),
            422,
            "invalid_argument",
        ),
        (
            "messages",
            json!({"messages": [{"body": "a", "priority": 99999}]}),
            422,
            "invalid_argument",
        ),
        (
            "messages",
            json!({"messages": [{"body": "a", "delay_ms": u64::MAX}]}),
            422,
            "invalid_argument",
        ),
        (
            "messages",
            json!({"messages": [{"body": "a", "ordering_key": ""}]}),
            422,
            "invalid_argument",
        ),
    ];
    for (action, body, status, code) in cases {
        assert_error(&s.post(&format!("{q}/{action}"), body).await, status, code);
    }
    assert_error(
        &s.post(
            "/v1/queues/nope/messages",
            json!({"messages": [{"body": "a"}]}),
        )
        .await,
        404,
        "unknown_queue",
    );
    // One message over the 1 MiB payload limit: 413, and nothing of its batch is written.
    let big = "x".repeat(1024 * 1024 + 1);
    let before = s.get("/v1/queues/jobs").await.1;
    assert_error(
        &s.post(
            "/v1/queues/jobs/messages",
            json!({"messages": [{"body": "ok"}, {"body": big}]}),
        )
        .await,
        413,
        "payload_too_large",
    );
    let after = s.get("/v1/queues/jobs").await.1;
    assert_eq!(before["ready"], after["ready"]);
    assert_eq!(before["scheduled"], after["scheduled"]);
    s.finish().await;
}

/// A send of the one message `bad` to `queue`: 422 `invalid_argument`.
async fn refused(s: &TestServer, queue: &str, bad: Value) {
    let path = format!("/v1/queues/{queue}/messages");
    let answer = s.post(&path, json!({ "messages": [bad] })).await;
    assert_error(&answer, 422, "invalid_argument");
}

/// Deadlines over HTTP: a message sent past its deadline is dead-lettered by the receive that
/// finds it, never handed out; one on time is delivered with its deadline and run timeout, and
/// shown with them (in UTC, whatever offset it was sent with); bad values are 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_are_sent_shown_and_kept() {
    let s = TestServer::start().await;
    s.queue("jobs").await;
    let (st, sent) = s
        .post(
            "/v1/queues/jobs/messages",
            json!({"messages": [
                {"body": "late", "deadline": "2020-01-01T00:00:00Z"},
                {"body": "on time", "deadline": "2031-01-01T01:00:00+01:00", "run_timeout_ms": 30000},
            ]}),
        )
        .await;
    assert_eq!(st, 200, "{sent}");
    let on_time = sent["messages"][1]["id"].as_str().unwrap().to_owned();
    let (_, shown) = s.get(&format!("/v1/queues/jobs/messages/{on_time}")).await;
    assert_eq!(shown["deadline"], "2031-01-01T00:00:00.000Z", "{shown}");
    assert_eq!(shown["run_timeout_ms"], 30000, "{shown}");
    let (_, got) = s.post("/v1/queues/jobs/receive", json!({"max": 10})).await;
    let msgs = got["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{got}");
    assert_eq!(msgs[0]["body"], "on time");
    assert_eq!(msgs[0]["deadline"], "2031-01-01T00:00:00.000Z");
    assert_eq!(msgs[0]["run_timeout_ms"], 30000);
    let (_, dead) = s.get("/v1/queues/jobs/dead?limit=10").await;
    let list = dead["dead_letters"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{dead}");
    assert_eq!(list[0]["errors"][0]["error"], "deadline passed");
    for bad in [
        json!({"body": "a", "deadline": "tomorrow"}),
        json!({"body": "a", "deadline": "2999-01-01T00:00:00Z"}),
        json!({"body": "a", "run_timeout_ms": 0}),
        json!({"body": "a", "run_timeout_ms": u64::MAX}),
    ] {
        refused(&s, "jobs", bad).await;
    }
}

/// `replace_key` and `debounce_ms`: a replacing send takes its key's waiting message's place;
/// a debounced one waits; bad combinations are 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_and_debounced_sends() {
    let s = TestServer::start().await;
    s.queue("jobs").await;
    let send = |body: Value| {
        let s = &s;
        async move {
            let (st, v) = s
                .post("/v1/queues/jobs/messages", json!({ "messages": [body] }))
                .await;
            assert_eq!(st, 200, "{v}");
            v["messages"][0].clone()
        }
    };
    let first = send(json!({"body": "1", "replace_key": "k"})).await;
    assert_eq!(first["replaced"], false);
    let second = send(json!({"body": "2", "replace_key": "k"})).await;
    assert_eq!(
        (&second["id"], &second["replaced"]),
        (&first["id"], &json!(true))
    );
    let later = send(json!({"body": "d", "replace_key": "d", "debounce_ms": 3600000})).await;
    assert_eq!(later["replaced"], false);
    let (_, q) = s.get("/v1/queues/jobs").await;
    assert_eq!(
        (q["ready"].as_u64(), q["scheduled"].as_u64()),
        (Some(1), Some(1))
    );
    let (_, got) = s.post("/v1/queues/jobs/receive", json!({"max": 10})).await;
    assert_eq!(got["messages"].as_array().unwrap().len(), 1, "{got}");
    assert_eq!(got["messages"][0]["body"], "2");
    for bad in [
        json!({"body": "a", "replace_key": "k", "idempotency_key": "k"}),
        json!({"body": "a", "debounce_ms": 10}),
        json!({"body": "a", "replace_key": "k", "debounce_ms": 10, "delay_ms": 10}),
        json!({"body": "a", "replace_key": "k", "ordering_key": "o"}),
    ] {
        refused(&s, "jobs", bad).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_request_body_is_413() {
    let s = TestServer::with(common::test_config().max_body_bytes(64 * 1024)).await;
    s.queue("q").await;
    let big = "y".repeat(100 * 1024);
    assert_error(
        &s.post(
            "/v1/queues/q/messages",
            json!({"messages": [{"body": big}]}),
        )
        .await,
        413,
        "payload_too_large",
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_wakes_at_once_on_a_send_through_the_server() {
    // Polls 10 s apart: after the first empty poll, only the wakeup can answer within the
    // bound below, however slow the machine (the bound leaves room for a loaded CI host).
    let poll = Duration::from_secs(10);
    let s = TestServer::with(common::test_config().poll_interval(poll, poll)).await;
    s.queue("q").await;
    for round in 0..3 {
        let http = s.http.clone();
        let url = s.url("/v1/queues/q/receive");
        let waiter = tokio::spawn(async move {
            let r = http
                .post(url)
                .json(&json!({"wait_ms": 10000, "max": 1}))
                .send()
                .await
                .unwrap();
            (Instant::now(), common::split(r).await.1)
        });
        // Let the request reach its wait (it polls, finds nothing, backs off).
        tokio::time::sleep(Duration::from_millis(400)).await;
        s.send("q", &[&format!("m{round}")]).await;
        let sent_at = Instant::now();
        let (woke_at, got) = waiter.await.unwrap();
        assert_eq!(got["messages"][0]["body"], format!("m{round}"));
        let latency = woke_at.saturating_duration_since(sent_at);
        assert!(
            latency < Duration::from_secs(2),
            "round {round}: woke {latency:?} after the send: not by the wakeup"
        );
        let receipt = got["messages"][0]["receipt"].as_str().unwrap().to_owned();
        s.post("/v1/queues/q/ack", json!({"receipts": [receipt]}))
            .await;
    }
    // An empty long poll ends at its deadline, empty (not at its next poll).
    let start = Instant::now();
    let (st, got) = s
        .post("/v1/queues/q/receive", json!({"wait_ms": 300}))
        .await;
    assert_eq!(st, 200);
    assert!(got["messages"].as_array().unwrap().is_empty());
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_waiting_long_polls_each_get_one_of_fifty_messages() {
    // A probe too slow to matter: the sends' in-process call, passed from each poll that got a
    // full batch to the next in line, must answer every one.
    let poll = Duration::from_secs(30);
    let s = TestServer::with(common::test_config().poll_interval(poll, poll)).await;
    s.queue("q").await;
    let mut waiters = Vec::new();
    for _ in 0..50 {
        let (http, url) = (s.http.clone(), s.url("/v1/queues/q/receive"));
        waiters.push(tokio::spawn(async move {
            let r = http
                .post(url)
                .json(&json!({"wait_ms": 20000, "max": 1}))
                .send()
                .await
                .unwrap();
            common::split(r).await.1
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let bodies: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    s.send("q", &refs).await;
    let mut got = Vec::new();
    for w in waiters {
        let answer = tokio::time::timeout(Duration::from_secs(15), w)
            .await
            .expect("answered by the calls, not the 30 s probe")
            .unwrap();
        let messages = answer["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1, "{answer}");
        got.push(messages[0]["body"].as_str().unwrap().to_owned());
    }
    got.sort();
    let mut want = bodies.clone();
    want.sort();
    assert_eq!(got, want, "each message to exactly one poll");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_mid_wait_claims_nothing() {
    let s = TestServer::start().await;
    s.queue("q").await;
    // A long poll whose client goes away.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let r = http
        .post(s.url("/v1/queues/q/receive"))
        .json(&json!({"wait_ms": 10000}))
        .send()
        .await;
    assert!(r.is_err(), "the client gave up");
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.send("q", &["for someone else"]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, q) = s.get("/v1/queues/q").await;
    assert_eq!(
        q["ready"], 1,
        "nothing was claimed for the closed connection: {q}"
    );
    assert_eq!(q["in_flight"], 0);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_never_acked_comes_back_after_its_lease() {
    let s = TestServer::start().await;
    s.queue("q").await;
    let ids = s.send("q", &["work"]).await;
    let (_, first) = s
        .post("/v1/queues/q/receive", json!({"lease_ms": 300}))
        .await;
    assert_eq!(first["messages"][0]["id"], ids[0].as_str());
    let stale = first["messages"][0]["receipt"].as_str().unwrap().to_owned();
    // Nothing else to claim while the lease holds.
    let (_, none) = s.post("/v1/queues/q/receive", json!({})).await;
    assert!(none["messages"].as_array().unwrap().is_empty());
    // A long poll gets it back once the lease has ended, with a new receipt.
    let (_, again) = s
        .post("/v1/queues/q/receive", json!({"wait_ms": 5000}))
        .await;
    assert_eq!(again["messages"][0]["id"], ids[0].as_str(), "{again}");
    assert_eq!(again["messages"][0]["attempt"], 2);
    let fresh = again["messages"][0]["receipt"].as_str().unwrap().to_owned();
    assert_ne!(fresh, stale);
    // The stale receipt is fenced off; the fresh one acks.
    let (_, ack) = s
        .post("/v1/queues/q/ack", json!({"receipts": [stale, fresh]}))
        .await;
    assert_eq!(ack["results"][0]["result"], "lease_lost");
    assert_eq!(ack["results"][1]["result"], "ok");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_list_redrive_purge() {
    let s = TestServer::start().await;
    let (st, _) = s.put("/v1/queues/q", json!({"max_attempts": 1})).await;
    assert_eq!(st, 200);
    s.send("q", &["a", "b", "c"]).await;
    let (_, got) = s.post("/v1/queues/q/receive", json!({"max": 3})).await;
    let receipts: Vec<Value> = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["receipt"].clone())
        .collect();
    let (_, nack) = s
        .post(
            "/v1/queues/q/nack",
            json!({"receipts": receipts, "error": "bad input"}),
        )
        .await;
    assert!(
        nack["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "dead"),
        "{nack}"
    );

    let (st, dead) = s.get("/v1/queues/q/dead?limit=10").await;
    assert_eq!(st, 200);
    let list = dead["dead_letters"].as_array().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["errors"][0]["error"], "bad input");
    assert_eq!(list[0]["attempts"], 1);
    let first = list[0]["id"].clone();

    let (_, n) = s
        .post("/v1/queues/q/dead/redrive", json!({"ids": [first]}))
        .await;
    assert_eq!(n["count"], 1);
    let (_, q) = s.get("/v1/queues/q").await;
    assert_eq!(
        (q["ready"].as_u64(), q["dead"].as_u64()),
        (Some(1), Some(2))
    );
    let (_, n) = s
        .post("/v1/queues/q/dead/redrive", json!({"all": true}))
        .await;
    assert_eq!(n["count"], 2);
    // Make them dead again, then purge.
    let (_, got) = s.post("/v1/queues/q/receive", json!({"max": 3})).await;
    let receipts: Vec<Value> = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["receipt"].clone())
        .collect();
    s.post("/v1/queues/q/nack", json!({"receipts": receipts}))
        .await;
    let (st, n) = s.delete("/v1/queues/q/dead").await;
    assert_eq!((st, n["count"].as_u64()), (200, Some(3)));

    assert_error(
        &s.post("/v1/queues/q/dead/redrive", json!({})).await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post("/v1/queues/q/dead/redrive", json!({"ids": ["x"]}))
            .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post("/v1/queues/q/dead/redrive", json!({"ids": [], "all": true}))
            .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.get("/v1/queues/q/dead?limit=0").await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.get("/v1/queues/q/dead?limit=abc").await,
        400,
        "bad_request",
    );
    assert_error(&s.get("/v1/queues/nope/dead").await, 404, "unknown_queue");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_long_polls_at_once() {
    let s = TestServer::start().await;
    s.queue("q").await;
    let http = s.http.clone();
    let url = s.url("/v1/queues/q/receive");
    let waiter = tokio::spawn(async move {
        let r = http
            .post(url)
            .json(&json!({"wait_ms": 20000}))
            .send()
            .await
            .unwrap();
        common::split(r).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    s.stop.cancel();
    let (st, got) = waiter.await.unwrap();
    assert_eq!(st, 200);
    assert!(got["messages"].as_array().unwrap().is_empty());
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_limit_holds_each_key_and_keys_are_shown() {
    let s = TestServer::start().await;
    let (st, q) = s
        .put("/v1/queues/syncs", json!({"concurrency_limit": 1}))
        .await;
    assert_eq!(
        (st, &q["config"]["concurrency_limit"]),
        (200, &json!(1)),
        "{q}"
    );
    let msgs: Vec<Value> = ["a", "a", "b"]
        .iter()
        .map(|k| json!({"body": format!("sync {k}"), "concurrency_key": k}))
        .collect();
    let (st, sent) = s
        .post("/v1/queues/syncs/messages", json!({"messages": msgs}))
        .await;
    assert_eq!(st, 200, "{sent}");
    let receive = json!({"max": 5, "lease_ms": 60000});
    let (_, got) = s.post("/v1/queues/syncs/receive", receive.clone()).await;
    let got = received(&got);
    let mut keys: Vec<&str> = got
        .iter()
        .map(|m| m["concurrency_key"].as_str().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, ["a", "b"], "one of each key: {got:?}");
    let (_, q) = s.get("/v1/queues/syncs").await;
    assert_eq!(q["blocked"].as_u64(), Some(1), "{q}");
    let (_, page) = s.get("/v1/queues/syncs/messages?state=blocked").await;
    assert_eq!(page["messages"][0]["concurrency_key"], "a", "{page}");
    let a = got.iter().find(|m| m["concurrency_key"] == "a").unwrap();
    s.post("/v1/queues/syncs/ack", json!({"receipts": [a["receipt"]]}))
        .await;
    let (_, next) = s.post("/v1/queues/syncs/receive", receive).await;
    assert_eq!(received(&next).len(), 1, "{next}");

    // Bad keys and limits: 422, nothing sent or changed.
    for bad in [
        json!({"body": "x", "concurrency_key": "k", "ordering_key": "k"}),
        json!({"body": "x", "concurrency_key": "k".repeat(128)}),
        json!({"body": "x", "concurrency_key": ""}),
    ] {
        assert_error(
            &s.post("/v1/queues/syncs/messages", json!({"messages": [bad]}))
                .await,
            422,
            "invalid_argument",
        );
    }
    assert_error(
        &s.put("/v1/queues/syncs", json!({"concurrency_limit": 2000000}))
            .await,
        422,
        "invalid_argument",
    );
    let (_, q) = s
        .put("/v1/queues/syncs", json!({"rate_limit_per_key": "10/1s"}))
        .await;
    assert_eq!(q["config"]["rate_limit_per_key"], "10/1s");
    assert_eq!(q["config"]["concurrency_limit"], 1, "kept");
    assert_error(
        &s.put("/v1/queues/syncs", json!({"rate_limit_per_key": "fast"}))
            .await,
        422,
        "invalid_argument",
    );
    let (_, q) = s
        .put(
            "/v1/queues/syncs",
            json!({"concurrency_limit": 0, "rate_limit_per_key": "none"}),
        )
        .await;
    assert_eq!(q["config"]["concurrency_limit"], Value::Null);
    assert_eq!(q["config"]["rate_limit_per_key"], Value::Null);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_queue_shares_deliveries_and_shows_its_keys() {
    let s = TestServer::start().await;
    let (st, q) = s.put("/v1/queues/tenants", json!({"fair": true})).await;
    assert_eq!((st, &q["config"]["fair"]), (200, &json!(true)), "{q}");
    let (st, _) = s
        .put(
            "/v1/queues/tenants/weights",
            json!({"key": "small", "weight": 2}),
        )
        .await;
    assert_eq!(st, 204);
    let big: Vec<Value> = (0..200)
        .map(|i| json!({"body": format!("big {i}"), "fairness_key": "big"}))
        .collect();
    let small: Vec<Value> = (0..20)
        .map(|i| json!({"body": format!("small {i}"), "fairness_key": "small"}))
        .collect();
    for messages in [big, small] {
        let (st, v) = s
            .post("/v1/queues/tenants/messages", json!({"messages": messages}))
            .await;
        assert_eq!(st, 200, "{v}");
    }
    let (st, keys) = s.get("/v1/queues/tenants/keys?limit=5").await;
    assert_eq!(st, 200, "{keys}");
    assert_eq!(keys["keys"][0]["key"], "big", "{keys}");
    assert_eq!(keys["keys"][0]["ready"], 200, "{keys}");
    assert_eq!(
        (&keys["keys"][1]["key"], &keys["keys"][1]["weight"]),
        (&json!("small"), &json!(2)),
        "{keys}"
    );
    // The small tenant, sent after the big one's 200 and weighted 2, gets two thirds of the
    // first deliveries.
    let (_, got) = s
        .post(
            "/v1/queues/tenants/receive",
            json!({"max": 15, "lease_ms": 60000}),
        )
        .await;
    let small = received(&got)
        .iter()
        .filter(|m| m["body"].as_str().unwrap().starts_with("small"))
        .count();
    assert!((8..=12).contains(&small), "{small} of 15: {got}");
    // Leased and not settled: in flight under their keys.
    let (_, keys) = s.get("/v1/queues/tenants/keys").await;
    let in_flight = |key: &str| {
        keys["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["key"] == key)
            .map(|k| k["in_flight"].clone())
    };
    assert_eq!(in_flight("small"), Some(json!(small)), "{keys}");
    assert_eq!(in_flight("big"), Some(json!(15 - small)), "{keys}");
    assert_eq!(
        (&keys["keys"][0]["arrived"], &keys["keys"][0]["settled"]),
        (&json!(200), &json!(0)),
        "{keys}"
    );
    // Bad weights and keys: 422, nothing changed.
    for bad in [
        json!({"key": "small", "weight": 0}),
        json!({"key": "small", "weight": 10001}),
        json!({"key": "k".repeat(129), "weight": 1}),
    ] {
        assert_error(
            &s.put("/v1/queues/tenants/weights", bad).await,
            422,
            "invalid_argument",
        );
    }
    assert_error(
        &s.post(
            "/v1/queues/tenants/messages",
            json!({"messages": [{"body": "x", "fairness_key": ""}]}),
        )
        .await,
        422,
        "invalid_argument",
    );
    assert_error(&s.get("/v1/queues/nope/keys").await, 404, "unknown_queue");
    let (_, q) = s.put("/v1/queues/tenants", json!({"fair": false})).await;
    assert_eq!(q["config"]["fair"], false);
    s.finish().await;
}
