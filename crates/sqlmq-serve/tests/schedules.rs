//! Schedule routes through real HTTP against a real database: create, replace, describe, list,
//! the server firing them (`sqlmq serve` runs the library's `run_schedules`), pause, resume,
//! delete, and every kind of bad request.

mod common;

use std::time::{Duration, SystemTime};

use common::{TestServer, assert_error, eventually};
use serde_json::{Value, json};

/// The schedule's fired count.
async fn fired(s: &TestServer, name: &str) -> u64 {
    let (st, v) = s.get(&format!("/v1/schedules/{name}")).await;
    assert_eq!(st, 200, "{v}");
    v["fired"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interval_schedule_fires_through_the_server_pauses_resumes_and_is_deleted() {
    let s = TestServer::start().await;
    s.queue("reports").await;

    // Created (201), then replaced (200): what it fired and its next fire time are kept.
    let request = json!({
        "every": "1s", "queue": "reports", "body": "tick",
        "headers": {"kind": "heartbeat"}, "priority": -2,
    });
    let (st, created) = s.put("/v1/schedules/tick", request.clone()).await;
    assert_eq!(st, 201, "{created}");
    assert_eq!(created["name"], "tick");
    assert_eq!(created["every_ms"], 1000);
    assert_eq!(created["queue"], "reports");
    assert_eq!(created["body"], "tick");
    assert_eq!(created["headers"], json!({"kind": "heartbeat"}));
    assert_eq!(created["priority"], -2);
    assert_eq!(created["key"], Value::Null);
    assert_eq!(created["catch_up"], "skip");
    assert_eq!(created["catch_up_limit"], 100);
    assert_eq!(created["paused"], false);
    assert_eq!(created["last_fired"], Value::Null);
    for absent in ["cron", "time_zone", "topic", "body_base64"] {
        assert!(created.get(absent).is_none(), "{absent} in {created}");
    }
    let next: SystemTime = humantime::parse_rfc3339(created["next_fire"].as_str().unwrap())
        .expect("next_fire is RFC 3339");
    assert!(
        next > SystemTime::now() - Duration::from_secs(5),
        "{created}"
    );
    for time in ["created_at", "updated_at"] {
        humantime::parse_rfc3339(created[time].as_str().unwrap()).expect("RFC 3339");
    }
    let (st, replaced) = s.put("/v1/schedules/tick", request).await;
    assert_eq!(st, 200, "{replaced}");
    assert_eq!(replaced["created_at"], created["created_at"]);

    let (st, one) = s.get("/v1/schedules/tick").await;
    assert_eq!(st, 200);
    assert_eq!(one["every_ms"], 1000);
    let (st, list) = s.get("/v1/schedules").await;
    assert_eq!(st, 200);
    let names: Vec<&str> = list["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["tick"]);

    // The server fires it: its messages carry the schedule's name and fire time.
    let message = eventually(Duration::from_secs(20), "a fired message", || async {
        let (_, r) = s
            .post(
                "/v1/queues/reports/receive",
                json!({"max": 1, "wait_ms": 1000}),
            )
            .await;
        r["messages"].as_array()?.first().cloned()
    })
    .await;
    assert_eq!(message["body"], "tick", "{message}");
    assert_eq!(message["priority"], -2, "{message}");
    let headers = &message["headers"];
    assert_eq!(headers["sqlmq-schedule"], "tick", "{message}");
    assert_eq!(headers["kind"], "heartbeat", "{message}");
    let fire_time = headers["sqlmq-fire-time"].as_str().expect("a fire time");
    humantime::parse_rfc3339(fire_time).expect("the fire time is RFC 3339");
    let (_, after) = s.get("/v1/schedules/tick").await;
    assert!(after["fired"].as_u64().unwrap() >= 1, "{after}");
    assert!(after["last_fired"].is_string(), "{after}");

    // Paused: nothing more fires.
    let (st, paused) = s.post("/v1/schedules/tick/pause", json!(null)).await;
    assert_eq!(st, 200, "{paused}");
    assert_eq!(paused["paused"], true);
    let count = fired(&s, "tick").await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(fired(&s, "tick").await, count, "a paused schedule fired");

    // Resumed: it fires again.
    let (st, resumed) = s.post("/v1/schedules/tick/resume", json!(null)).await;
    assert_eq!(st, 200, "{resumed}");
    assert_eq!(resumed["paused"], false);
    eventually(Duration::from_secs(20), "a fire after resuming", || async {
        (fired(&s, "tick").await > count).then_some(())
    })
    .await;

    // Deleted: then unknown.
    assert_eq!(s.delete("/v1/schedules/tick").await.0, 204);
    assert_error(&s.get("/v1/schedules/tick").await, 404, "unknown_schedule");
    assert_error(
        &s.delete("/v1/schedules/tick").await,
        404,
        "unknown_schedule",
    );
    assert_error(
        &s.post("/v1/schedules/tick/pause", json!(null)).await,
        404,
        "unknown_schedule",
    );
    assert_error(
        &s.post("/v1/schedules/tick/resume", json!(null)).await,
        404,
        "unknown_schedule",
    );
    let (_, list) = s.get("/v1/schedules").await;
    assert_eq!(list["schedules"], json!([]));
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_schedule_to_a_topic_shows_its_zone_and_binary_body() {
    let s = TestServer::start().await;
    assert_eq!(s.put("/v1/topics/events", json!({})).await.0, 200);
    let (st, v) = s
        .put(
            "/v1/schedules/nightly",
            json!({
                "cron": "0 3 * * *", "time_zone": "Europe/Paris", "topic": "events",
                "body_base64": "/w==", "key": "report", "catch_up": "all", "catch_up_limit": 5,
            }),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["cron"], "0 3 * * *");
    assert_eq!(v["time_zone"], "Europe/Paris");
    assert_eq!(v["topic"], "events");
    assert_eq!(v["body_base64"], "/w==");
    assert_eq!(v["key"], "report");
    assert_eq!(v["catch_up"], "all");
    assert_eq!(v["catch_up_limit"], 5);
    for absent in ["every_ms", "queue", "body"] {
        assert!(v.get(absent).is_none(), "{absent} in {v}");
    }
    // 03:00 in Paris is 01:00 or 02:00 UTC, within a day from now.
    let next = v["next_fire"].as_str().unwrap();
    assert!(
        next.contains("T01:00:00.000Z") || next.contains("T02:00:00.000Z"),
        "{next}"
    );
    let at = humantime::parse_rfc3339(next).unwrap();
    let ahead = at.duration_since(SystemTime::now()).unwrap();
    assert!(ahead <= Duration::from_secs(25 * 3600), "{next}");

    // The time zone defaults to UTC.
    let (st, v) = s
        .put(
            "/v1/schedules/hourly",
            json!({"cron": "0 * * * *", "topic": "events"}),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["time_zone"], "UTC");
    assert!(
        v["next_fire"].as_str().unwrap().ends_with(":00:00.000Z"),
        "{v}"
    );
    // A schedule with no future fire time has none.
    let (st, v) = s
        .put(
            "/v1/schedules/never",
            json!({"cron": "0 0 30 2 *", "topic": "events"}),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["next_fire"], Value::Null, "{v}");
    let (_, list) = s.get("/v1/schedules").await;
    assert_eq!(list["schedules"].as_array().unwrap().len(), 3);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_schedules_are_4xx_json() {
    let s = TestServer::start().await;
    s.queue("reports").await;
    let put = |body: Value| {
        let s = &s;
        async move { s.put("/v1/schedules/bad", body).await }
    };
    for (body, what) in [
        (
            json!({"cron": "* * * * *", "every": "1m", "queue": "reports"}),
            "both cron and every",
        ),
        (json!({"queue": "reports"}), "neither cron nor every"),
        (
            json!({"every": "1m", "queue": "reports", "topic": "events"}),
            "both queue and topic",
        ),
        (json!({"every": "1m"}), "neither queue nor topic"),
        (
            json!({"cron": "61 * * * *", "queue": "reports"}),
            "bad cron",
        ),
        (json!({"cron": "* * *", "queue": "reports"}), "short cron"),
        (
            json!({"cron": "* * * * *", "time_zone": "Mars/Olympus", "queue": "reports"}),
            "unknown time zone",
        ),
        (
            json!({"every": "1m", "time_zone": "UTC", "queue": "reports"}),
            "a time zone with every",
        ),
        (json!({"every": "10ms", "queue": "reports"}), "too short"),
        (
            json!({"every": "1s 500us", "queue": "reports"}),
            "not whole ms",
        ),
        (
            json!({"every": "soon", "queue": "reports"}),
            "not a duration",
        ),
        (
            json!({"every": "1m", "queue": "reports", "catch_up": "some"}),
            "unknown catch-up",
        ),
        (
            json!({"every": "1m", "queue": "reports", "catch_up_limit": 0}),
            "zero catch-up limit",
        ),
        (
            json!({"every": "1m", "queue": "reports", "priority": 40000}),
            "priority out of range",
        ),
        (
            json!({"every": "1m", "queue": "reports", "body": "a", "body_base64": "YQ=="}),
            "both bodies",
        ),
        (
            json!({"every": "1m", "queue": "reports", "body_base64": "%%"}),
            "bad base64",
        ),
        (
            json!({"every": "1m", "queue": "reports", "colour": "red"}),
            "unknown field",
        ),
        (
            json!({"every": 60, "queue": "reports"}),
            "every as a number",
        ),
    ] {
        let got = put(body).await;
        assert_eq!(got.0, 422, "{what}: {}", got.1);
        assert_eq!(
            got.1["error"]["code"], "invalid_argument",
            "{what}: {}",
            got.1
        );
    }
    assert_error(
        &put(json!({"every": "1m", "queue": "bad name"})).await,
        422,
        "invalid_name",
    );
    assert_error(
        &s.put(
            "/v1/schedules/bad%20name",
            json!({"every": "1m", "queue": "reports"}),
        )
        .await,
        422,
        "invalid_name",
    );
    assert_error(
        &put(json!({"every": "1m", "queue": "nope"})).await,
        404,
        "unknown_queue",
    );
    assert_error(
        &put(json!({"every": "1m", "topic": "nope"})).await,
        404,
        "unknown_topic",
    );
    let raw = s
        .http
        .put(s.url("/v1/schedules/bad"))
        .header("content-type", "application/json")
        .body("{\"every\":")
        .send()
        .await
        .unwrap();
    assert_error(&common::split(raw).await, 400, "bad_request");
    // Nothing was created by any of them.
    assert_error(&s.get("/v1/schedules/bad").await, 404, "unknown_schedule");
    assert_eq!(s.get("/v1/schedules").await.1["schedules"], json!([]));
    s.finish().await;
}
