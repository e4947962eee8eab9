//! The OpenAPI document as a team without Rust adopts it: a standard validator accepts it, and
//! clients generated from it by the usual generators — Python (openapi-python-client) and
//! TypeScript (openapi-typescript types with openapi-fetch) — contain every operation and drive
//! a queue and a topic end to end against a live server (send, long-poll receive, ack, nack to
//! a dead letter, dead letters listed and redriven, messages browsed, publish, records read,
//! a group's receive and ack, a schedule created, paused, listed and deleted). The scripts they run are in `tests/clients/`. `.ci/run` installs
//! the tools (PyPI: openapi-spec-validator, openapi-python-client; the TypeScript packages come
//! from `tests/clients/typescript/package-lock.json` through `npm ci`); without them these tests
//! fail and say how to install them.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{TestServer, require_tool, test_config};

/// A scratch directory of this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("sqlmq-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server (long polls capped at 5 s) and its document written to `dir/openapi.json`.
async fn server_and_document(dir: &Path) -> (TestServer, PathBuf) {
    let s = TestServer::with(test_config().max_wait(Duration::from_secs(5))).await;
    let text = s
        .http
        .get(s.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let path = dir.join("openapi.json");
    std::fs::write(&path, text).unwrap();
    (s, path)
}

/// Every operation id of the document.
fn operation_ids() -> Vec<String> {
    let doc = sqlmq_serve::openapi();
    let mut ids: Vec<String> = doc
        .paths
        .paths
        .values()
        .flat_map(|i| [&i.get, &i.put, &i.post, &i.delete])
        .flatten()
        .map(|op| op.operation_id.clone().expect("every operation has an id"))
        .collect();
    ids.sort();
    ids
}

/// Run `command` (in `dir`, with `env`) to its end within `limit`; its output, or a failure
/// that shows it.
async fn run(
    what: &str,
    command: &str,
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
    limit: Duration,
) -> String {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).current_dir(dir).kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(limit, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} finishes within {limit:?}"))
        .unwrap_or_else(|e| panic!("{what} runs ({command}): {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_valid_openapi() {
    let validator = require_tool(
        "openapi-spec-validator",
        "SQLMQ_OPENAPI_SPEC_VALIDATOR",
        "pip install openapi-spec-validator (bash .ci/run does it)",
    );
    let dir = Scratch::new("openapi-validator");
    let (s, doc) = server_and_document(&dir.0).await;
    let out = run(
        "openapi-spec-validator",
        &validator,
        &[doc.to_str().unwrap()],
        &dir.0,
        &[],
        Duration::from_secs(120),
    )
    .await;
    assert!(out.contains(": OK"), "{out}");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_python_client_has_every_operation_and_drives_the_server() {
    let generator = require_tool(
        "openapi-python-client",
        "SQLMQ_OPENAPI_PYTHON_CLIENT",
        "pip install openapi-python-client (bash .ci/run does it)",
    );
    let python = require_tool("python3", "SQLMQ_PYTHON", "install Python 3");
    let dir = Scratch::new("python-client");
    let (s, doc) = server_and_document(&dir.0).await;
    let out = run(
        "openapi-python-client",
        &generator,
        &[
            "generate",
            "--path",
            doc.to_str().unwrap(),
            "--output-path",
            "sqlmq_client",
            "--meta",
            "none",
        ],
        &dir.0,
        &[],
        Duration::from_secs(300),
    )
    .await;
    // The generator drops what it cannot express, with a warning, and still succeeds.
    assert!(
        !out.contains("will not be generated") && !out.contains("Warning"),
        "the generator dropped or doubted something:\n{out}"
    );
    let mut generated = Vec::new();
    for tag in std::fs::read_dir(dir.0.join("sqlmq_client/api")).unwrap() {
        let tag = tag.unwrap().path();
        if tag.is_dir() {
            for f in std::fs::read_dir(&tag).unwrap() {
                let name = f.unwrap().file_name().to_string_lossy().into_owned();
                if let Some(op) = name.strip_suffix(".py").filter(|n| *n != "__init__") {
                    generated.push(op.to_owned());
                }
            }
        }
    }
    generated.sort();
    assert_eq!(generated, operation_ids(), "one module per operation");

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/python/drive.py");
    let out = run(
        "the Python client's drive",
        &python,
        &[script.to_str().unwrap()],
        &dir.0,
        &[
            ("SQLMQ_URL", &s.base),
            ("PYTHONPATH", dir.0.to_str().unwrap()),
        ],
        Duration::from_secs(120),
    )
    .await;
    assert!(out.contains("every step passed"), "{out}");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_typescript_client_has_every_operation_and_drives_the_server() {
    let npm = require_tool("npm", "SQLMQ_NPM", "install Node.js 18+ with npm");
    let node = require_tool("node", "SQLMQ_NODE", "install Node.js 18+");
    let dir = Scratch::new("typescript-client");
    // The project (pinned by its lock file) is copied out so that node_modules and generated
    // files never land in the repository.
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/typescript");
    for f in [
        "package.json",
        "package-lock.json",
        "tsconfig.json",
        "drive.ts",
    ] {
        std::fs::copy(project.join(f), dir.0.join(f)).unwrap();
    }
    let (s, doc) = server_and_document(&dir.0).await;
    let limit = Duration::from_secs(300);
    run(
        "npm ci",
        &npm,
        &["ci", "--no-audit", "--no-fund"],
        &dir.0,
        &[],
        limit,
    )
    .await;
    let bin = |name: &str| dir.0.join("node_modules/.bin").join(name);
    let out = run(
        "openapi-typescript",
        bin("openapi-typescript").to_str().unwrap(),
        &[doc.to_str().unwrap(), "-o", "schema.d.ts"],
        &dir.0,
        &[],
        limit,
    )
    .await;
    assert!(!out.to_lowercase().contains("warn"), "{out}");
    let schema = std::fs::read_to_string(dir.0.join("schema.d.ts")).unwrap();
    let operations = schema
        .split_once("export interface operations {")
        .expect("the generated types have an operations interface")
        .1;
    for id in operation_ids() {
        assert!(
            operations.contains(&format!("\n    {id}: {{")),
            "operation {id} is in the generated types"
        );
    }
    // Type-checks every call of drive.ts against the generated types, then compiles it.
    run(
        "tsc",
        bin("tsc").to_str().unwrap(),
        &["-p", "."],
        &dir.0,
        &[],
        limit,
    )
    .await;
    let out = run(
        "the TypeScript client's drive",
        &node,
        &["dist/drive.js"],
        &dir.0,
        &[("SQLMQ_URL", &s.base)],
        Duration::from_secs(120),
    )
    .await;
    assert!(out.contains("every step passed"), "{out}");
    s.finish().await;
}
