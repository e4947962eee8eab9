//! Batches, workflows and results through real HTTP against a real database: a diamond
//! workflow run by an HTTP consumer with results and callbacks, an open batch filled and
//! sealed, dependencies on the send route, every client mistake a 4xx JSON, and the
//! dashboard's batch page with its graph.

mod common;

use std::collections::BTreeMap;

use common::{TestServer, assert_error};
use serde_json::{Value, json};

/// Receive up to `max` from `queue`, waiting up to `wait_ms` for the first.
async fn receive(s: &TestServer, queue: &str, max: u32, wait_ms: u64) -> Vec<Value> {
    let (st, v) = s
        .post(
            &format!("/v1/queues/{queue}/receive"),
            json!({"max": max, "wait_ms": wait_ms}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    v["messages"].as_array().unwrap().clone()
}

/// Receive until `n` messages came (each receive waits up to a second).
async fn receive_n(s: &TestServer, queue: &str, n: usize) -> Vec<Value> {
    let mut got = Vec::new();
    for _ in 0..10 {
        got.extend(receive(s, queue, 10, 1000).await);
        if got.len() >= n {
            break;
        }
    }
    assert_eq!(got.len(), n, "{queue}: {got:?}");
    got
}

/// The ack's per-receipt results.
async fn ack(s: &TestServer, queue: &str, body: Value) -> Vec<Value> {
    let (st, v) = s.post(&format!("/v1/queues/{queue}/ack"), body).await;
    assert_eq!(st, 200, "{v}");
    v["results"].as_array().unwrap().clone()
}

/// GET a dashboard page: its status and HTML (redirects followed).
async fn page(s: &TestServer, path: String) -> (u16, String) {
    let r = s.http.get(s.url(&path)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn queue_counts(s: &TestServer, queue: &str) -> Value {
    let (st, q) = s.get(&format!("/v1/queues/{queue}")).await;
    assert_eq!(st, 200, "{q}");
    q
}

fn diamond(queue: &str) -> Value {
    json!([
        {"queue": queue, "step": "a", "body": "fetch"},
        {"queue": queue, "step": "b", "body": "left", "after": ["a"]},
        {"queue": queue, "step": "c", "body": "right", "after": ["a"]},
        {"queue": queue, "step": "d", "body": "join", "after": ["b", "c"]},
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diamond_workflow_runs_in_order_keeps_results_and_calls_back_once() {
    let s = TestServer::start().await;
    for q in ["jobs", "done", "audit", "failed"] {
        s.queue(q).await;
    }
    let (st, created) = s
        .post(
            "/v1/batches",
            json!({
                "members": diamond("jobs"),
                "on_success": {"queue": "done", "body": "all acked", "headers": {"k": "v"}},
                "on_complete": {"queue": "audit", "body": "finished"},
                "on_failure": {"queue": "failed", "body": "some failed"},
            }),
        )
        .await;
    assert_eq!(st, 201, "{created}");
    let batch = created["id"].as_str().unwrap().to_owned();
    let steps: BTreeMap<String, String> = serde_json::from_value(created["steps"].clone()).unwrap();
    assert_eq!(steps.keys().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    let members: Vec<String> = serde_json::from_value(created["members"].clone()).unwrap();
    assert_eq!(
        members,
        [&steps["a"], &steps["b"], &steps["c"], &steps["d"]].map(String::clone)
    );

    // Only the root is ready; the others and the callbacks wait.
    let q = queue_counts(&s, "jobs").await;
    assert_eq!(
        (q["ready"].as_u64(), q["waiting"].as_u64()),
        (Some(1), Some(3)),
        "{q}"
    );
    for cb in ["done", "audit", "failed"] {
        let q = queue_counts(&s, cb).await;
        assert_eq!(
            (q["ready"].as_u64(), q["waiting"].as_u64()),
            (Some(0), Some(1)),
            "{q}"
        );
    }
    let (st, status) = s.get(&format!("/v1/batches/{batch}")).await;
    assert_eq!(st, 200, "{status}");
    assert_eq!(status["state"], "sealed");
    assert_eq!(
        (status["members"].as_u64(), status["pending"].as_u64()),
        (Some(4), Some(4))
    );
    assert!(
        status["created_at"].as_str().unwrap().ends_with('Z'),
        "{status}"
    );
    assert_eq!(status["finished_at"], Value::Null);
    let by_id = |v: &Value, id: &str| {
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {v}"))
    };
    assert_eq!(by_id(&status, &steps["a"])["state"], "pending");
    let d = by_id(&status, &steps["d"]);
    assert_eq!(
        (&d["state"], &d["step"], &d["role"]),
        (&json!("waiting"), &json!("d"), &json!("member"))
    );
    assert_eq!(d["depends_on"], json!([steps["b"], steps["c"]]));
    assert_eq!(
        status["steps"].as_array().unwrap().len(),
        7,
        "4 members, 3 callbacks"
    );

    // a, with a result.
    let got = receive_n(&s, "jobs", 1).await;
    assert_eq!(got[0]["id"], steps["a"].as_str());
    let r = got[0]["receipt"].as_str().unwrap();
    let results = ack(
        &s,
        "jobs",
        json!({"receipts": [r], "results": {r: "{\"rows\":3}"}}),
    )
    .await;
    assert_eq!(results[0]["result"], "ok");
    let (st, res) = s.get(&format!("/v1/messages/{}/result", steps["a"])).await;
    assert_eq!((st, &res["result"]), (200, &json!("{\"rows\":3}")), "{res}");

    // b and c together: b with a result, c without, in one request.
    let got = receive_n(&s, "jobs", 2).await;
    let ids: Vec<&str> = got.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(
        ids.contains(&steps["b"].as_str()) && ids.contains(&steps["c"].as_str()),
        "{ids:?}"
    );
    let (st, deps) = s
        .get(&format!("/v1/messages/{}/dependencies", steps["b"]))
        .await;
    assert_eq!(st, 200, "{deps}");
    assert_eq!(
        deps["dependencies"],
        json!([{"id": steps["a"], "step": "a", "result": "{\"rows\":3}"}])
    );
    let receipt_of = |id: &str| {
        got.iter().find(|m| m["id"] == id).unwrap()["receipt"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (rb, rc) = (receipt_of(&steps["b"]), receipt_of(&steps["c"]));
    let results = ack(
        &s,
        "jobs",
        json!({"receipts": [rb, rc], "results": {rb.clone(): "B"}}),
    )
    .await;
    assert_eq!(
        results
            .iter()
            .map(|r| r["result"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["ok", "ok"]
    );
    // The same receipt again: its lease is gone, nothing happens.
    let results = ack(
        &s,
        "jobs",
        json!({"receipts": [rb], "results": {rb.clone(): "again"}}),
    )
    .await;
    assert_eq!(results[0]["result"], "lease_lost");
    assert_error(
        &s.get(&format!("/v1/messages/{}/result", steps["c"])).await,
        404,
        "not_found",
    );

    // d reads both, then finishes the batch.
    let got = receive_n(&s, "jobs", 1).await;
    assert_eq!(got[0]["id"], steps["d"].as_str());
    let (_, deps) = s
        .get(&format!("/v1/messages/{}/dependencies", steps["d"]))
        .await;
    let deps = deps["dependencies"].as_array().unwrap();
    assert_eq!(deps.len(), 2, "{deps:?}");
    let dep = |step: &str| deps.iter().find(|d| d["step"] == step).unwrap().clone();
    assert_eq!(dep("b")["result"], "B");
    assert_eq!(dep("c").get("result"), None, "c left no result");
    let r = got[0]["receipt"].as_str().unwrap();
    ack(&s, "jobs", json!({"receipts": [r], "results": {r: "D"}})).await;

    let (_, status) = s.get(&format!("/v1/batches/{batch}")).await;
    assert_eq!(status["state"], "finished", "{status}");
    let counts: Vec<u64> = ["members", "pending", "succeeded", "dead", "cancelled"]
        .iter()
        .map(|k| status[k].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [4, 0, 4, 0, 0], "{status}");
    assert!(status["finished_at"].as_str().is_some(), "{status}");
    let has_result: Vec<bool> = ["a", "b", "c", "d"]
        .iter()
        .map(|k| by_id(&status, &steps[*k])["has_result"].as_bool().unwrap())
        .collect();
    assert_eq!(has_result, [true, true, false, true]);
    let role_state = |role: &str| {
        let cb = status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["role"] == role)
            .unwrap();
        cb["state"].as_str().unwrap().to_owned()
    };
    assert_eq!(role_state("on_failure"), "cancelled");

    // Each callback that holds arrives exactly once, with the batch's id; on_failure never.
    for (queue, body) in [("done", "all acked"), ("audit", "finished")] {
        let got = receive(&s, queue, 10, 2000).await;
        assert_eq!(got.len(), 1, "{queue}: {got:?}");
        assert_eq!(got[0]["body"], body);
        assert_eq!(got[0]["headers"]["sqlmq-batch"], batch.as_str());
        let r = got[0]["receipt"].as_str().unwrap();
        ack(&s, queue, json!({"receipts": [r]})).await;
        assert!(
            receive(&s, queue, 10, 300).await.is_empty(),
            "{queue} again"
        );
        let q = queue_counts(&s, queue).await;
        assert_eq!(
            (q["ready"].as_u64(), q["waiting"].as_u64()),
            (Some(0), Some(0)),
            "{q}"
        );
    }
    assert!(receive(&s, "failed", 10, 300).await.is_empty());
    let q = queue_counts(&s, "failed").await;
    assert_eq!(
        (q["ready"].as_u64(), q["waiting"].as_u64()),
        (Some(0), Some(0)),
        "{q}"
    );
    let (_, status) = s.get(&format!("/v1/batches/{batch}")).await;
    let on_success = status["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["role"] == "on_success")
        .unwrap()
        .clone();
    assert_eq!(on_success["state"], "succeeded", "{status}");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_member_fires_on_failure_and_an_open_batch_takes_members_until_sealed() {
    let s = TestServer::start().await;
    assert_eq!(
        s.put("/v1/queues/fragile", json!({"max_attempts": 1}))
            .await
            .0,
        200
    );
    s.queue("failed").await;
    s.queue("jobs").await;

    // One member that dies: on_failure arrives, the batch counts it dead.
    let (st, created) = s
        .post(
            "/v1/batches",
            json!({"members": [{"queue": "fragile", "body": "x"}],
                   "on_failure": {"queue": "failed", "body": "failed"}}),
        )
        .await;
    assert_eq!(st, 201, "{created}");
    let got = receive_n(&s, "fragile", 1).await;
    let (st, v) = s
        .post(
            "/v1/queues/fragile/nack",
            json!({"receipts": [got[0]["receipt"]], "error": "boom"}),
        )
        .await;
    assert_eq!(
        (st, &v["results"][0]["outcome"]),
        (200, &json!("dead")),
        "{v}"
    );
    let cb = receive(&s, "failed", 10, 2000).await;
    assert_eq!(cb.len(), 1, "{cb:?}");
    assert_eq!(cb[0]["headers"]["sqlmq-batch"], created["id"]);
    let (_, status) = s
        .get(&format!("/v1/batches/{}", created["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        (&status["state"], &status["dead"], &status["succeeded"]),
        (&json!("finished"), &json!(1), &json!(0)),
        "{status}"
    );

    // An open batch: members added later, then sealed; a sealed batch takes no more.
    let (st, created) = s
        .post(
            "/v1/batches",
            json!({"members": [{"queue": "jobs", "body": "first"}], "open": true}),
        )
        .await;
    assert_eq!(st, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let (_, status) = s.get(&format!("/v1/batches/{id}")).await;
    assert_eq!(status["state"], "open");
    let (st, added) = s
        .post(
            &format!("/v1/batches/{id}/messages"),
            json!({"queue": "jobs", "messages": [{"body": "second"}, {"body": "third"}]}),
        )
        .await;
    assert_eq!(st, 200, "{added}");
    assert_eq!(added["messages"].as_array().unwrap().len(), 2);
    assert_eq!(
        s.post(&format!("/v1/batches/{id}/seal"), json!(null))
            .await
            .0,
        204
    );
    assert_eq!(
        s.post(&format!("/v1/batches/{id}/seal"), json!(null))
            .await
            .0,
        204,
        "sealing twice is a no-op"
    );
    assert_error(
        &s.post(
            &format!("/v1/batches/{id}/messages"),
            json!({"queue": "jobs", "messages": [{"body": "late"}]}),
        )
        .await,
        409,
        "batch_sealed",
    );
    let (_, status) = s.get(&format!("/v1/batches/{id}")).await;
    assert_eq!(
        (&status["state"], &status["members"], &status["pending"]),
        (&json!("sealed"), &json!(3), &json!(3)),
        "{status}"
    );
    s.finish().await;
}

/// `GET /v1/batches` and the dashboard's batches page: an operator finds batches without
/// knowing their ids — the unfinished first, then the latest finished, or one state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_listed_unfinished_first_over_http_and_on_the_dashboard() {
    let s = TestServer::start().await;
    s.queue("jobs").await;
    let (_, done) = s
        .post(
            "/v1/batches",
            json!({"members": [{"queue": "jobs", "body": "x"}]}),
        )
        .await;
    let got = receive_n(&s, "jobs", 1).await;
    ack(&s, "jobs", json!({"receipts": [got[0]["receipt"]]})).await;
    let (_, open) = s
        .post(
            "/v1/batches",
            json!({"members": [{"queue": "jobs", "body": "y"}], "open": true}),
        )
        .await;
    let (done, open) = (done["id"].as_str().unwrap(), open["id"].as_str().unwrap());
    let (st, list) = s.get("/v1/batches").await;
    assert_eq!(st, 200, "{list}");
    let listed: Vec<(&str, &str)> = list["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["id"].as_str().unwrap(), b["state"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [(open, "open"), (done, "finished")], "{list}");
    assert_eq!(list["batches"][1]["succeeded"], 1);
    assert_eq!(list["batches"][0]["steps"], json!([]));
    let (_, finished) = s.get("/v1/batches?state=finished&limit=5").await;
    assert_eq!(
        finished["batches"].as_array().unwrap().len(),
        1,
        "{finished}"
    );
    assert_eq!(finished["batches"][0]["id"], done);
    assert_error(
        &s.get("/v1/batches?state=lost").await,
        422,
        "invalid_argument",
    );
    assert_error(&s.get("/v1/batches?limit=0").await, 422, "invalid_argument");

    let (st, html) = page(&s, "/batches".to_owned()).await;
    assert_eq!(st, 200);
    assert!(html.contains("id=\"batches\""), "{html}");
    let (at_open, at_done) = (html.find(open).unwrap(), html.find(done).unwrap());
    assert!(at_open < at_done, "unfinished first");
    assert!(html.contains(&format!("href=\"/batches/{open}\"")));
    let (_, html) = page(&s, "/batches?state=finished".to_owned()).await;
    assert!(html.contains(done) && !html.contains(open), "{html}");
    let (_, html) = page(&s, "/".to_owned()).await;
    assert!(
        html.contains(open) && html.contains("All batches"),
        "the overview lists them"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depends_on_through_the_send_route() {
    let s = TestServer::start().await;
    s.queue("jobs").await;
    s.queue("later").await;
    let first = s.send("jobs", &["charge"]).await.remove(0);
    let (st, v) = s
        .post(
            "/v1/queues/later/messages",
            json!({"messages": [{"body": "ship", "depends_on": [first]}]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let ship = v["messages"][0]["id"].as_str().unwrap().to_owned();
    let q = queue_counts(&s, "later").await;
    assert_eq!(
        (q["ready"].as_u64(), q["waiting"].as_u64()),
        (Some(0), Some(1)),
        "{q}"
    );
    let (_, page) = s.get("/v1/queues/later/messages?state=waiting").await;
    assert_eq!(page["messages"][0]["id"], ship.as_str(), "{page}");
    assert!(receive(&s, "later", 10, 0).await.is_empty());
    let got = receive_n(&s, "jobs", 1).await;
    let r = got[0]["receipt"].as_str().unwrap();
    ack(&s, "jobs", json!({"receipts": [r], "results": {r: "paid"}})).await;
    let got = receive_n(&s, "later", 1).await;
    assert_eq!(got[0]["id"], ship.as_str());
    let (_, deps) = s.get(&format!("/v1/messages/{ship}/dependencies")).await;
    assert_eq!(
        deps["dependencies"],
        json!([{"id": first, "step": null, "result": "paid"}])
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_mistake_is_a_4xx_json() {
    let s = TestServer::start().await;
    s.queue("jobs").await;
    let unknown = "01a209cb-5b43-778c-a723-afcb3faf372d";

    assert_error(
        &s.get(&format!("/v1/batches/{unknown}")).await,
        404,
        "batch_not_found",
    );
    assert_error(
        &s.get("/v1/batches/not-a-uuid").await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post(&format!("/v1/batches/{unknown}/seal"), json!(null))
            .await,
        404,
        "batch_not_found",
    );
    assert_error(
        &s.post(
            &format!("/v1/batches/{unknown}/messages"),
            json!({"queue": "jobs", "messages": [{"body": "x"}]}),
        )
        .await,
        404,
        "batch_not_found",
    );
    assert_error(
        &s.post(
            &format!("/v1/batches/{unknown}/messages"),
            json!({"queue": "jobs", "messages": []}),
        )
        .await,
        422,
        "invalid_argument",
    );

    // Dependencies: unknown, malformed, itself.
    assert_error(
        &s.post(
            "/v1/queues/jobs/messages",
            json!({"messages": [{"body": "x", "depends_on": [unknown]}]}),
        )
        .await,
        422,
        "dependency_not_found",
    );
    assert_error(
        &s.post(
            "/v1/queues/jobs/messages",
            json!({"messages": [{"body": "x", "depends_on": ["soon"]}]}),
        )
        .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post(
            "/v1/queues/jobs/messages",
            json!({"messages": [{"body": "x", "id": unknown, "depends_on": [unknown]}]}),
        )
        .await,
        422,
        "invalid_argument",
    );
    // Nothing of those was sent.
    let q = queue_counts(&s, "jobs").await;
    assert_eq!(
        (q["ready"].as_u64(), q["waiting"].as_u64()),
        (Some(0), Some(0)),
        "{q}"
    );

    // Workflows: a cycle, an unknown step, a name twice, after without a name.
    let batch = |members: Value| json!({"members": members});
    for (members, what) in [
        (
            json!([{"queue": "jobs", "step": "a", "body": "x", "after": ["c"]},
                {"queue": "jobs", "step": "b", "body": "x", "after": ["a"]},
                {"queue": "jobs", "step": "c", "body": "x", "after": ["b"]}]),
            "cycle",
        ),
        (
            json!([{"queue": "jobs", "step": "a", "body": "x", "after": ["a"]}]),
            "itself",
        ),
        (
            json!([{"queue": "jobs", "step": "a", "body": "x", "after": ["zz"]}]),
            "not in the batch",
        ),
        (
            json!([{"queue": "jobs", "step": "a", "body": "x"}, {"queue": "jobs", "step": "a", "body": "y"}]),
            "twice",
        ),
        (
            json!([{"queue": "jobs", "body": "x", "after": ["a"]}]),
            "no step name",
        ),
        (
            json!([{"queue": "jobs", "step": "", "body": "x"}]),
            "step name",
        ),
        (json!([{"queue": "jobs"}]), "body"),
    ] {
        let got = s.post("/v1/batches", batch(members)).await;
        assert_error(&got, 422, "invalid_argument");
        let message = got.1["error"]["message"].as_str().unwrap();
        assert!(message.contains(what), "{what}: {message}");
    }
    assert_error(
        &s.post(
            "/v1/batches",
            batch(json!([{"queue": "nope", "body": "x"}])),
        )
        .await,
        404,
        "unknown_queue",
    );
    assert_error(
        &s.post(
            "/v1/batches",
            json!({"members": [], "on_success": {"queue": "nope", "body": "x"}}),
        )
        .await,
        404,
        "unknown_queue",
    );
    assert_error(
        &s.post("/v1/batches", json!({"members": [], "on_success": {"queue": "jobs", "body": "x", "depends_on": [unknown]}})).await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post(
            "/v1/batches",
            json!({"members": [{"queue": "jobs", "body": "x", "colour": "red"}]}),
        )
        .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post("/v1/batches", json!({"members": [], "open": "yes"}))
            .await,
        422,
        "invalid_argument",
    );
    // None of those left a message behind.
    let q = queue_counts(&s, "jobs").await;
    assert_eq!(
        (q["ready"].as_u64(), q["waiting"].as_u64()),
        (Some(0), Some(0)),
        "{q}"
    );

    // Results: for a receipt of the request only, within 64 KiB, for queues only.
    s.send("jobs", &["a"]).await;
    let got = receive_n(&s, "jobs", 1).await;
    let r = got[0]["receipt"].as_str().unwrap();
    let other = format!("{unknown}:1");
    assert_error(
        &s.post(
            "/v1/queues/jobs/ack",
            json!({"receipts": [r], "results": {other: "x"}}),
        )
        .await,
        422,
        "invalid_argument",
    );
    assert_error(
        &s.post(
            "/v1/queues/jobs/ack",
            json!({"receipts": [r], "results": {r: "x".repeat(65537)}}),
        )
        .await,
        413,
        "payload_too_large",
    );
    // Neither acked it.
    let results = ack(
        &s,
        "jobs",
        json!({"receipts": [r], "results": {r: "x".repeat(65536)}}),
    )
    .await;
    assert_eq!(results[0]["result"], "ok");
    assert_eq!(
        s.get(&format!(
            "/v1/messages/{}/result",
            got[0]["id"].as_str().unwrap()
        ))
        .await
        .1["result"]
            .as_str()
            .unwrap()
            .len(),
        65536
    );
    assert_error(
        &s.get(&format!("/v1/messages/{unknown}/result")).await,
        404,
        "not_found",
    );
    assert_error(
        &s.get("/v1/messages/nope/result").await,
        422,
        "invalid_argument",
    );

    assert_eq!(s.put("/v1/topics/t", json!({})).await.0, 200);
    assert_eq!(
        s.put(
            "/v1/topics/t/groups/g",
            json!({"mode": "cluster", "start": "earliest"})
        )
        .await
        .0,
        200
    );
    let (st, _) = s
        .post("/v1/topics/t/records", json!({"records": [{"body": "r"}]}))
        .await;
    assert_eq!(st, 200);
    let mut got = Vec::new();
    for _ in 0..10 {
        let (_, v) = s
            .post("/v1/topics/t/groups/g/receive", json!({"wait_ms": 1000}))
            .await;
        got = v["messages"].as_array().unwrap().clone();
        if !got.is_empty() {
            break;
        }
    }
    let r = got[0]["receipt"].as_str().unwrap();
    assert_error(
        &s.post(
            "/v1/topics/t/groups/g/ack",
            json!({"receipts": [r], "results": {r: "x"}}),
        )
        .await,
        422,
        "invalid_argument",
    );
    let (st, v) = s
        .post("/v1/topics/t/groups/g/ack", json!({"receipts": [r]}))
        .await;
    assert_eq!((st, &v["results"][0]["result"]), (200, &json!("ok")), "{v}");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_a_batch_with_its_workflow_graph() {
    let s = TestServer::start().await;
    s.queue("jobs").await;
    s.queue("done").await;
    let (st, created) = s
        .post(
            "/v1/batches",
            json!({
                "members": [
                    {"queue": "jobs", "step": "fetch & parse", "body": "x"},
                    {"queue": "jobs", "step": "<b>left</b>", "body": "x", "after": ["fetch & parse"]},
                    {"queue": "jobs", "step": "right", "body": "x", "after": ["fetch & parse"]},
                    {"queue": "jobs", "step": "join", "body": "x", "after": ["<b>left</b>", "right"]},
                ],
                "on_success": {"queue": "done", "body": "ok"},
            }),
        )
        .await;
    assert_eq!(st, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let got = receive_n(&s, "jobs", 1).await;
    let r = got[0]["receipt"].as_str().unwrap();
    ack(
        &s,
        "jobs",
        json!({"receipts": [r], "results": {r: "<i>parsed</i>"}}),
    )
    .await;

    let (st, html) = page(&s, format!("/batches/{id}")).await;
    assert_eq!(st, 200, "{html}");
    assert!(html.contains("<svg id=\"workflow\""), "{html}");
    assert_eq!(html.matches("<rect").count(), 4, "{html}");
    assert_eq!(html.matches("class=\"edge\"").count(), 4, "{html}");
    for name in [
        "fetch &amp; parse",
        "&lt;b&gt;left&lt;/b&gt;",
        "right",
        "join",
    ] {
        assert!(html.contains(name), "{name} in {html}");
    }
    assert!(
        !html.contains("<b>left</b>") && !html.contains("<i>parsed</i>"),
        "{html}"
    );
    assert!(
        html.contains("&lt;i&gt;parsed&lt;/i&gt;"),
        "the result is shown, escaped"
    );
    assert!(
        html.contains("data-state=\"succeeded\"")
            && html.contains("data-state=\"pending\"")
            && html.contains("data-state=\"waiting\""),
        "{html}"
    );
    assert!(
        html.contains("id=\"progress\"") && html.contains("1 of 4 members finished"),
        "{html}"
    );
    assert!(
        html.contains("id=\"callbacks\"") && html.contains("on success"),
        "{html}"
    );
    assert!(html.contains("sealed"), "{html}");

    // Looked up by id from the overview's form; unknown and malformed ids are error pages.
    let (_, overview) = page(&s, "/".to_owned()).await;
    assert!(overview.contains("id=\"batch-lookup\""), "{overview}");
    let (st, html) = page(&s, format!("/batches?id=%20{id}%20")).await;
    assert!(
        st == 200 && html.contains("<svg id=\"workflow\""),
        "{st} {html}"
    );
    let (st, _) = page(
        &s,
        "/batches/01a209cb-5b43-778c-a723-afcb3faf372d".to_owned(),
    )
    .await;
    assert_eq!(st, 404);
    let (st, _) = page(&s, "/batches/nope".to_owned()).await;
    assert_eq!(st, 422);
    // The queue page counts the waiting steps.
    let (_, queue) = page(&s, "/queues/jobs".to_owned()).await;
    assert!(queue.contains("id=\"count-waiting\""), "{queue}");

    // Sealing from the dashboard: an open batch gets the button, a sealed one does not.
    let (_, open) = s
        .post("/v1/batches", json!({"members": [], "open": true}))
        .await;
    let open_id = open["id"].as_str().unwrap();
    let (_, html) = page(&s, format!("/batches/{open_id}")).await;
    assert!(
        html.contains(&format!("/ui/batches/{open_id}/seal")),
        "{html}"
    );
    let r = s
        .http
        .post(s.url(&format!("/ui/batches/{open_id}/seal")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "redirected back to the page");
    let (_, status) = s.get(&format!("/v1/batches/{open_id}")).await;
    assert_eq!(
        status["state"], "finished",
        "an empty sealed batch finishes: {status}"
    );
    s.finish().await;
}
