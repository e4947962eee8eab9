//! Topic, record, trace, group and broadcast routes through real HTTP.

mod common;

use std::time::Duration;

use common::{TestServer, assert_error, eventually};
use serde_json::{Value, json};

async fn publish(s: &TestServer, topic: &str, records: Value) -> Value {
    let (st, v) = s
        .post(
            &format!("/v1/topics/{topic}/records"),
            json!({"records": records}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_records_and_trace() {
    let s = TestServer::start().await;
    let (st, t) = s
        .put(
            "/v1/topics/orders",
            json!({"partitions": 2, "retention_ms": 3600000, "strict_order": false}),
        )
        .await;
    assert_eq!(st, 200, "{t}");
    assert_eq!(t["config"]["partitions"], 2);
    assert_eq!(t["config"]["retention_ms"], 3600000);
    assert_eq!(t["partitions"].as_array().unwrap().len(), 2);
    // Partitions only grow; retention 0 removes the limit.
    let (_, t) = s
        .put(
            "/v1/topics/orders",
            json!({"partitions": 3, "retention_ms": 0}),
        )
        .await;
    assert_eq!(t["config"]["partitions"], 3);
    assert!(t["config"]["retention_ms"].is_null());
    assert_error(
        &s.put("/v1/topics/orders", json!({"partitions": 0})).await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.put("/v1/topics/orders", json!({"partitions": 9999}))
            .await,
        422,
        "invalid_argument",
    );

    let published = publish(
        &s,
        "orders",
        json!([
            {"key": "c1", "body": "one", "headers": {"h": "1"}},
            {"key": "c1", "body": "two"},
            {"body_base64": "AP8=", "partition": 2},
        ]),
    )
    .await;
    let id = published["records"][0]["id"].as_str().unwrap().to_owned();
    let p = published["records"][0]["partition"].as_u64().unwrap();
    assert_eq!(published["records"][2]["partition"], 2);

    // Query by key, by partition and offset, by time.
    let by_key = eventually(Duration::from_secs(5), "records sequenced", || async {
        let (_, v) = s.get("/v1/topics/orders/records?key=c1").await;
        (v["records"].as_array()?.len() == 2).then_some(v)
    })
    .await;
    assert_eq!(by_key["records"][0]["body"], "one");
    assert_eq!(by_key["records"][0]["headers"]["h"], "1");
    let (_, by_offset) = s
        .get(&format!(
            "/v1/topics/orders/records?partition={p}&offset=1&limit=5"
        ))
        .await;
    assert_eq!(by_offset["records"][0]["body"], "two");
    assert_eq!(by_offset["records"][0]["offset"], 1);
    let (_, by_time) = s.get("/v1/topics/orders/records?since=10m").await;
    assert_eq!(by_time["records"].as_array().unwrap().len(), 3);
    let (_, bin) = s.get("/v1/topics/orders/records?partition=2").await;
    let bin = bin["records"].as_array().unwrap();
    assert!(
        bin.iter()
            .any(|r| r["body_base64"] == "AP8=" && r.get("body").is_none()),
        "{bin:?}"
    );

    let (st, list) = s.get("/v1/topics").await;
    assert_eq!(st, 200);
    assert_eq!(list["topics"][0]["name"], "orders");
    assert_eq!(list["topics"][0]["total"], 3);

    // Trace: a group sees it, acks it.
    s.put(
        "/v1/topics/orders/groups/billing",
        json!({"start": "earliest"}),
    )
    .await;
    let (_, got) = s
        .post(
            "/v1/topics/orders/groups/billing/receive",
            json!({"max": 10}),
        )
        .await;
    let receipt = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id.as_str())
        .expect("the traced record was delivered")["receipt"]
        .clone();
    s.post(
        "/v1/topics/orders/groups/billing/ack",
        json!({"receipts": [receipt]}),
    )
    .await;
    let (st, trace) = s
        .get(&format!("/v1/topics/orders/records/{id}/trace"))
        .await;
    assert_eq!(st, 200, "{trace}");
    assert_eq!(trace["offset"], 0);
    assert_eq!(trace["record"]["body"], "one");
    assert_eq!(trace["groups"][0]["group"], "billing");
    assert_eq!(trace["groups"][0]["state"], "acked");

    // Errors.
    let unknown = "01a209cb-5b43-778c-a723-afcb3faf372d";
    assert_error(
        &s.get(&format!("/v1/topics/orders/records/{unknown}/trace"))
            .await,
        404,
        "message_not_found",
    );
    assert_error(
        &s.get("/v1/topics/orders/records/zzz/trace").await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.get("/v1/topics/orders/records?key=a&since=1m").await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.get("/v1/topics/orders/records?key=a&partition=1").await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.get("/v1/topics/orders/records?since=yesterday").await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.get("/v1/topics/orders/records?partition=5000").await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.get("/v1/topics/orders/records?offset=-1").await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.get("/v1/topics/orders/records?bogus=1").await,
        400,
        "bad_request",
    );
    assert_error(&s.get("/v1/topics/nope").await, 404, "unknown_topic");
    assert_error(
        &s.get("/v1/topics/nope/records").await,
        404,
        "unknown_topic",
    );
    assert_error(
        &s.post(
            "/v1/topics/nope/records",
            json!({"records": [{"body": "x"}]}),
        )
        .await,
        404,
        "unknown_topic",
    );
    assert_error(
        &s.post("/v1/topics/orders/records", json!({"records": []}))
            .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post(
            "/v1/topics/orders/records",
            json!({"records": [{"body": "x", "partition": 7}]}),
        )
        .await,
        422,
        "invalid_argument",
    );

    assert_eq!(s.delete("/v1/topics/orders").await.0, 204);
    assert_error(&s.get("/v1/topics/orders").await, 404, "unknown_topic");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_groups() {
    let s = TestServer::start().await;
    s.put("/v1/topics/t", json!({})).await;
    let (st, g) = s
        .put("/v1/topics/t/groups/g", json!({"mode": "cluster", "start": "earliest", "max_attempts": 2, "backoff": "1s", "consume_timeout_ms": 60000}))
        .await;
    assert_eq!(st, 200, "{g}");
    assert_eq!(g["config"]["max_attempts"], 2);
    assert_eq!(g["config"]["consume_timeout_ms"], 60000);
    assert_error(
        &s.put("/v1/topics/t/groups/g", json!({"mode": "broadcast"}))
            .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.put("/v1/topics/t/groups/h", json!({"mode": "fanout"}))
            .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.put("/v1/topics/t/groups/h", json!({"start": "soon"}))
            .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.put("/v1/topics/nope/groups/h", json!({})).await,
        404,
        "unknown_topic",
    );
    // A rate limit: set, shown, kept when other settings change, removed; refused on a
    // broadcast group and when malformed.
    let (st, g) = s
        .put("/v1/topics/t/groups/g", json!({"rate_limit": "50/1s"}))
        .await;
    assert_eq!(
        (st, &g["config"]["rate_limit"]),
        (200, &json!("50/1s")),
        "{g}"
    );
    let (_, g) = s
        .put(
            "/v1/topics/t/groups/g",
            json!({"consume_timeout_ms": 60000}),
        )
        .await;
    assert_eq!(g["config"]["rate_limit"], "50/1s");
    for bad in [json!({"rate_limit": "fast"}), json!({"rate_limit": "0/1s"})] {
        assert_error(
            &s.put("/v1/topics/t/groups/g", bad).await,
            422,
            "invalid_argument",
        );
    }
    assert_error(
        &s.put(
            "/v1/topics/t/groups/b",
            json!({"mode": "broadcast", "rate_limit": "5/1s"}),
        )
        .await,
        422,
        "invalid_argument",
    );
    let (_, g) = s
        .put("/v1/topics/t/groups/g", json!({"rate_limit": "none"}))
        .await;
    assert_eq!(g["config"]["rate_limit"], Value::Null);

    publish(
        &s,
        "t",
        json!([{"body": "r0"}, {"body": "r1"}, {"body": "r2"}]),
    )
    .await;
    // Long poll until sequenced; lag reflects it.
    let (_, got) = s
        .post(
            "/v1/topics/t/groups/g/receive",
            json!({"max": 3, "wait_ms": 5000, "lease_ms": 60000}),
        )
        .await;
    let msgs = got["messages"].as_array().unwrap().clone();
    assert!(!msgs.is_empty(), "{got}");
    let mut all = msgs;
    while all.len() < 3 {
        let (_, more) = s
            .post(
                "/v1/topics/t/groups/g/receive",
                json!({"max": 3, "wait_ms": 2000}),
            )
            .await;
        all.extend(more["messages"].as_array().unwrap().iter().cloned());
    }
    let receipt = |i: usize| all[i]["receipt"].clone();
    assert_eq!(all[0]["partition"], 0);
    let (_, lag) = s.get("/v1/topics/t/groups/g").await;
    assert_eq!(lag["in_flight"], 3, "{lag}");
    assert_eq!(lag["partitions"][0]["end"], 3);

    let (_, ack) = s
        .post(
            "/v1/topics/t/groups/g/ack",
            json!({"receipts": [receipt(0)]}),
        )
        .await;
    assert_eq!(ack["results"][0]["result"], "ok");
    let (_, ext) = s
        .post(
            "/v1/topics/t/groups/g/extend",
            json!({"receipts": [receipt(1)], "lease_ms": 60000}),
        )
        .await;
    assert_eq!(ext["results"][0]["result"], "ok");
    // Nack on the ladder: waits as a retry; retry now makes it due.
    let (_, nack) = s
        .post(
            "/v1/topics/t/groups/g/nack",
            json!({"receipts": [receipt(1)], "error": "e1"}),
        )
        .await;
    assert_eq!(nack["results"][0]["outcome"], "retry", "{nack}");
    let (_, retries) = s.get("/v1/topics/t/groups/g/retries").await;
    assert_eq!(retries["retries"].as_array().unwrap().len(), 1);
    let (_, n) = s
        .post(
            "/v1/topics/t/groups/g/retries/retry-now",
            json!({"all": true}),
        )
        .await;
    assert_eq!(n["count"], 1);
    let (_, again) = s
        .post("/v1/topics/t/groups/g/receive", json!({"wait_ms": 3000}))
        .await;
    assert_eq!(again["messages"][0]["attempt"], 2, "{again}");
    // Second failure: dead (max_attempts 2).
    let (_, nack) = s
        .post(
            "/v1/topics/t/groups/g/nack",
            json!({"receipts": [again["messages"][0]["receipt"]], "error": "e2"}),
        )
        .await;
    assert_eq!(nack["results"][0]["outcome"], "dead");
    let (_, dead) = s.get("/v1/topics/t/groups/g/dead").await;
    assert_eq!(
        dead["dead_letters"][0]["errors"][1]["error"], "e2",
        "{dead}"
    );
    let (_, n) = s
        .post("/v1/topics/t/groups/g/dead/redrive", json!({"all": true}))
        .await;
    assert_eq!(n["count"], 1);
    let (_, again) = s
        .post("/v1/topics/t/groups/g/receive", json!({"wait_ms": 3000}))
        .await;
    let r = again["messages"][0]["receipt"].clone();
    s.post(
        "/v1/topics/t/groups/g/nack",
        json!({"receipts": [r], "retry_in_ms": 0}),
    )
    .await;
    let (_, again) = s
        .post("/v1/topics/t/groups/g/receive", json!({"wait_ms": 3000}))
        .await;
    s.post(
        "/v1/topics/t/groups/g/nack",
        json!({"receipts": [again["messages"][0]["receipt"]]}),
    )
    .await;
    let (st, n) = s.delete("/v1/topics/t/groups/g/dead").await;
    assert_eq!((st, n["count"].as_u64()), (200, Some(1)));

    // Reset and replay.
    let (st, pos) = s
        .post("/v1/topics/t/groups/g/reset", json!({"to": "latest"}))
        .await;
    assert_eq!(st, 200, "{pos}");
    assert_eq!(pos["positions"][0]["offset"], 3);
    let (st, n) = s
        .post(
            "/v1/topics/t/groups/g/replay",
            json!({"from": "0", "to": "1"}),
        )
        .await;
    assert_eq!(st, 200, "{n}");
    assert_eq!(n["count"], 1);
    assert_error(
        &s.post("/v1/topics/t/groups/g/reset", json!({"to": "never"}))
            .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post("/v1/topics/t/groups/g/reset", json!({})).await,
        422,
        "invalid_argument",
    );

    // Error paths of the group routes.
    let g = "/v1/topics/t/groups/g";
    for (path, body, status, code) in [
        (
            "replay",
            json!({"from": "x", "to": "1"}),
            422,
            "invalid_argument",
        ),
        ("replay", json!({"from": "0"}), 422, "invalid_argument"),
        ("retries/retry-now", json!({}), 422, "invalid_argument"),
        (
            "dead/redrive",
            json!({"ids": ["nope"]}),
            422,
            "invalid_argument",
        ),
        ("ack", json!({"receipts": ["x:1"]}), 422, "invalid_argument"),
        ("nack", json!({"receipts": []}), 422, "invalid_argument"),
        (
            "extend",
            json!({"receipts": [receipt(2)], "lease_ms": 0}),
            422,
            "invalid_argument",
        ),
        ("receive", json!({"max": 5000}), 422, "invalid_argument"),
        ("members/m/poll", json!({}), 422, "invalid_argument"),
    ] {
        assert_error(&s.post(&format!("{g}/{path}"), body).await, status, code);
    }
    assert_error(
        &s.get(&format!("{g}/retries?limit=0")).await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.get(&format!("{g}/dead?limit=x")).await,
        400,
        "bad_request",
    );
    assert_error(
        &s.post("/v1/topics/t/groups/nope/members/m/checkpoint", json!(null))
            .await,
        404,
        "unknown_group",
    );
    assert_error(
        &s.post("/v1/topics/nope/groups/g/reset", json!({"to": "earliest"}))
            .await,
        404,
        "unknown_topic",
    );
    assert_error(
        &s.delete("/v1/topics/t/groups/nope").await,
        404,
        "unknown_group",
    );
    assert_error(&s.delete("/v1/topics/nope").await, 404, "unknown_topic");
    assert_error(
        &s.put("/v1/topics/bad%20name", json!({})).await,
        422,
        "invalid_name",
    );
    assert_error(
        &s.put("/v1/topics/t/groups/bad%20name", json!({})).await,
        422,
        "invalid_name",
    );

    let (_, groups) = s.get("/v1/topics/t/groups").await;
    assert_eq!(groups["groups"][0]["name"], "g");
    assert_error(
        &s.get("/v1/topics/t/groups/nope").await,
        404,
        "unknown_group",
    );
    assert_error(
        &s.post("/v1/topics/t/groups/nope/receive", json!({})).await,
        404,
        "unknown_group",
    );
    assert_eq!(s.delete("/v1/topics/t/groups/g").await.0, 204);
    assert_error(&s.get("/v1/topics/t/groups/g").await, 404, "unknown_group");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_members_poll_and_checkpoint() {
    let s = TestServer::start().await;
    s.put("/v1/topics/t", json!({"partitions": 2})).await;
    let (st, _) = s
        .put(
            "/v1/topics/t/groups/b",
            json!({"mode": "broadcast", "start": "earliest"}),
        )
        .await;
    assert_eq!(st, 200);
    publish(
        &s,
        "t",
        json!([{"body": "a", "partition": 0}, {"body": "b", "partition": 1}]),
    )
    .await;

    let mut seen = Vec::new();
    for member in ["m1", "m2"] {
        let (st, got) = s
            .post(
                &format!("/v1/topics/t/groups/b/members/{member}/poll"),
                json!({"max": 10, "wait_ms": 5000}),
            )
            .await;
        assert_eq!(st, 200, "{got}");
        let mut bodies: Vec<String> = got["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["body"].as_str().unwrap().to_owned())
            .collect();
        while bodies.len() < 2 {
            let (_, more) = s
                .post(
                    &format!("/v1/topics/t/groups/b/members/{member}/poll"),
                    json!({"wait_ms": 2000, "checkpoint": true}),
                )
                .await;
            bodies.extend(
                more["records"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["body"].as_str().unwrap().to_owned()),
            );
        }
        bodies.sort();
        seen.push(bodies);
    }
    assert_eq!(seen[0], vec!["a", "b"], "every member reads everything");
    assert_eq!(seen[1], vec!["a", "b"]);
    let (st, pos) = s
        .post("/v1/topics/t/groups/b/members/m1/checkpoint", json!(null))
        .await;
    assert_eq!(st, 200);
    assert_eq!(pos["positions"].as_array().unwrap().len(), 2);
    let (_, lag) = s.get("/v1/topics/t/groups/b").await;
    assert!(
        lag["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["member"] == "m1"),
        "{lag}"
    );
    // A broadcast group cannot be received from like a cluster group.
    assert_error(
        &s.post("/v1/topics/t/groups/b/receive", json!({})).await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post("/v1/topics/t/groups/b/members/m1/poll", json!({"max": 0}))
            .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post("/v1/topics/t/groups/b/members/bad%20name/poll", json!({}))
            .await,
        422,
        "invalid_name",
    );
    assert_eq!(s.delete("/v1/topics/t/groups/b/members/m1").await.0, 204);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_and_probes() {
    let s = TestServer::start().await;
    let (st, h) = s.get("/healthz").await;
    assert_eq!((st, h["status"].as_str()), (200, Some("ok")));
    let (st, r) = s.get("/readyz").await;
    assert_eq!((st, r["status"].as_str()), (200, Some("ready")));
    assert!(r["schema_version"].as_i64().unwrap() > 0);
    let (st, p) = s.get("/v1/processes").await;
    assert_eq!(st, 200);
    assert!(p["processes"].as_array().unwrap().is_empty());
    // A worker process registers; it is listed with its heartbeat.
    s.queue("q").await;
    let stop = sqlmq::worker::CancellationToken::new();
    let worker = sqlmq::Worker::builder(&s.client)
        .queue_raw("q", |_d: sqlmq::Delivery, _ctx| async {
            Ok::<_, String>(sqlmq::Outcome::Done)
        })
        .run(stop.clone());
    let running = tokio::spawn(worker);
    let listed = eventually(Duration::from_secs(10), "the worker registered", || async {
        let (_, p) = s.get("/v1/processes").await;
        let first = p["processes"].as_array()?.first()?.clone();
        Some(first)
    })
    .await;
    assert_eq!(listed["pid"], std::process::id());
    assert!(listed["heartbeat_age_ms"].as_u64().unwrap() < 10_000);
    stop.cancel();
    running.await.unwrap().unwrap();
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    s.finish().await;
}
