//! Shared test harness: every test gets its own database on the server at
//! `SQLMQ_TEST_DATABASE_URL` (default: `SQLMQ_DATABASE_URL`, else
//! `mysql://root@127.0.0.1:3306/test`), made by `sqlmq-testkit` and dropped by `TestDb::drop`
//! (databases left behind by failed tests are swept after two hours), and a real
//! `sqlmq serve` started in-process on `127.0.0.1:0`.
#![allow(dead_code)]

pub mod webdriver;

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlmq::Client;
use sqlmq_serve::{ServeConfig, Server};
use tokio_util::sync::CancellationToken;

/// A database of its own (from `sqlmq-testkit`): the server under test connects as its runtime
/// user, which may run data statements only.
pub type TestDb = sqlmq_testkit::TestDb<sqlmq::MySql>;

/// A running server on its own database, and an HTTP client for it.
pub struct TestServer {
    pub db: TestDb,
    pub client: Client,
    pub addr: SocketAddr,
    pub base: String,
    pub http: reqwest::Client,
    pub stop: CancellationToken,
    pub state: sqlmq_serve::AppState,
    task: tokio::task::JoinHandle<Result<(), sqlmq_serve::ServeError>>,
}

/// The config every test server starts from: a free loopback port, fast gauges.
pub fn test_config() -> ServeConfig {
    ServeConfig::default()
        .listen("127.0.0.1:0".parse().unwrap())
        .metrics_refresh(Duration::from_millis(200))
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::with(test_config()).await
    }

    pub async fn with(config: ServeConfig) -> TestServer {
        let db = TestDb::new().await;
        let client = db.client().await;
        Self::on(db, client, config).await
    }

    /// Serve `client` (already on `db`).
    pub async fn on(db: TestDb, client: Client, config: ServeConfig) -> TestServer {
        let server = Server::bind(client.clone(), config).await.expect("bind");
        let addr = server.local_addr();
        let state = server.state().clone();
        let stop = CancellationToken::new();
        let task = tokio::spawn(server.run(stop.clone()));
        TestServer {
            db,
            client,
            addr,
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
            stop,
            state,
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// POST JSON, return (status, body as JSON or Null).
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        split(r).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .put(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        split(r).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.url(path)).send().await.unwrap();
        split(r).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        let r = self.http.delete(self.url(path)).send().await.unwrap();
        split(r).await
    }

    /// PUT a queue with defaults.
    pub async fn queue(&self, name: &str) {
        let (s, _) = self.put(&format!("/v1/queues/{name}"), json!({})).await;
        assert_eq!(s, 200);
    }

    /// Send text bodies; their ids.
    pub async fn send(&self, queue: &str, bodies: &[&str]) -> Vec<String> {
        let messages: Vec<Value> = bodies.iter().map(|b| json!({"body": b})).collect();
        let (s, v) = self
            .post(
                &format!("/v1/queues/{queue}/messages"),
                json!({"messages": messages}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Stop the server (graceful) and drop the database.
    pub async fn finish(self) {
        self.stop.cancel();
        let result = tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the server stops within 30 s");
        result.unwrap().expect("the server ran without error");
        self.db.drop().await;
    }
}

pub async fn split(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Assert the error shape and code.
pub fn assert_error(got: &(u16, Value), status: u16, code: &str) {
    assert_eq!(got.0, status, "{}", got.1);
    assert_eq!(got.1["error"]["code"], code, "{}", got.1);
    assert!(
        got.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

/// Poll `check` until it returns `Some`, failing after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An external tool the test needs: its path, or a clear failure (never a silent skip).
pub fn require_tool(name: &str, env: &str, install: &str) -> String {
    if let Ok(path) = std::env::var(env) {
        return path;
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let candidate = std::path::Path::new(dir).join(name);
        if candidate.is_file() {
            return candidate.to_string_lossy().into_owned();
        }
    }
    // A console script of a pip-installed package: beside the interpreter that installed it
    // (pyenv's shims may not be on PATH).
    let beside_python = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, os; print(os.path.dirname(os.path.realpath(sys.executable)))",
        ])
        .output()
        .ok()
        .map(|o| std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join(name))
        .filter(|p| p.is_file());
    if let Some(path) = beside_python {
        return path.to_string_lossy().into_owned();
    }
    panic!("{name} is required by this test and was not found on PATH (or ${env}): {install}");
}

/// The workspace root (for docs/ paths).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}
