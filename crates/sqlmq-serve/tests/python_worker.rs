//! `docs/examples/worker.py` (Python, standard library only) against a live server: it
//! long-polls, acks what it processed and nacks what failed.

mod common;

use std::time::Duration;

use common::{TestServer, require_tool, test_config, workspace_root};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_worker_acks_and_nacks() {
    let python = require_tool("python3", "SQLMQ_PYTHON", "install Python 3");
    let s = TestServer::with(
        test_config()
            .token("py-token")
            .max_wait(Duration::from_millis(500)),
    )
    .await;
    let put = s
        .http
        .put(s.url("/v1/queues/jobs"))
        .bearer_auth("py-token")
        .json(&json!({"max_attempts": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let messages: Vec<_> = (0..5)
        .map(|i| json!({"body": json!({"n": i, "fail": i == 3}).to_string()}))
        .collect();
    let sent = s
        .http
        .post(s.url("/v1/queues/jobs/messages"))
        .bearer_auth("py-token")
        .json(&json!({"messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);

    let out = tokio::process::Command::new(python)
        .arg(workspace_root().join("docs/examples/worker.py"))
        .env("SQLMQ_URL", &s.base)
        .env("SQLMQ_QUEUE", "jobs")
        .env("SQLMQ_API_TOKEN", "py-token")
        .env("SQLMQ_STOP_WHEN_IDLE", "1")
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("the worker stops once the queue is idle")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("processed").count(), 4, "{stdout}");

    let stats = s.client.queue("jobs").await.unwrap().stats().await.unwrap();
    assert_eq!(
        (stats.pending(), stats.dead),
        (0, 1),
        "four acked, the failing one nacked"
    );
    let dead = s
        .client
        .queue("jobs")
        .await
        .unwrap()
        .dead_letters(10)
        .await
        .unwrap();
    assert!(
        dead[0].errors[0].error.contains("cannot process"),
        "{:?}",
        dead[0].errors
    );
    s.finish().await;
}
