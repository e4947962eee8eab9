//! Schemathesis (from PyPI) fuzzes every operation of `/openapi.json` against a live server:
//! zero 5xx, and every answer (errors included) matches its documented status, content type
//! and schema. Its stateful phase follows the document's links (a sent message looked up and
//! cancelled by the id the send returned, a published record traced, a created queue, topic or
//! group described). `.ci/run` installs schemathesis; without it this test fails and says how to
//! install it.

mod common;

use std::time::Duration;

use common::{TestServer, require_tool, test_config};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_conforms_and_never_answers_5xx() {
    let st = require_tool(
        "schemathesis",
        "SQLMQ_SCHEMATHESIS",
        "pip install schemathesis (bash .ci/run does it)",
    );
    // Long polls are capped so that generated wait_ms values do not stretch the run.
    let s = TestServer::with(test_config().max_wait(Duration::from_millis(100))).await;
    // The objects the document's examples name, so that examples reach real resources.
    s.queue("jobs").await;
    s.send("jobs", &["one", "two"]).await;
    assert_eq!(
        s.put("/v1/topics/orders", json!({"partitions": 2})).await.0,
        200
    );
    assert_eq!(
        s.put(
            "/v1/topics/orders/groups/billing",
            json!({"start": "earliest"})
        )
        .await
        .0,
        200
    );
    s.post(
        "/v1/topics/orders/records",
        json!({"records": [{"body": "r", "key": "k"}]}),
    )
    .await;
    assert_eq!(
        s.put(
            "/v1/schedules/nightly",
            json!({"cron": "0 3 * * *", "queue": "jobs"})
        )
        .await
        .0,
        201
    );

    let out = tokio::process::Command::new(&st)
        .args([
            "run",
            &s.url("/openapi.json"),
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            "20",
            "--seed",
            "1",
            "--no-color",
        ])
        .env("SCHEMATHESIS_TELEMETRY", "false")
        // Its example cache goes to the working directory: keep it out of the repository.
        .current_dir(std::env::temp_dir())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(600), out)
        .await
        .expect("schemathesis finishes within 10 minutes")
        .expect("schemathesis runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "schemathesis found problems:\n{text}");
    let operations: usize = sqlmq_serve::openapi()
        .paths
        .paths
        .values()
        .map(|i| {
            [&i.get, &i.put, &i.post, &i.delete]
                .iter()
                .filter(|o| o.is_some())
                .count()
        })
        .sum();
    assert!(
        text.contains(&format!("Tested: {operations}")),
        "every one of the {operations} operations was tested:\n{text}"
    );
    assert!(
        text.contains(" passed") && !text.contains(" failed"),
        "{text}"
    );
    assert!(
        text.contains("✅ Stateful"),
        "the stateful phase followed the document's links:\n{text}"
    );
    s.finish().await;
}
