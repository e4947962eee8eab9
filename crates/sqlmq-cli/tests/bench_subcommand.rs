//! `sqlmq bench` with and without the `bench` feature. `--list` and the refusal answer before
//! connecting; with the feature, a tiny run on a SQLite file checks that the subcommand runs
//! on the backend the URL names.

use std::process::{Command, Output};

/// `sqlmq ARGS` with no configuration inherited that could get in the way.
fn sqlmq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sqlmq"))
        .args(args)
        .env_remove("SQLMQ_CONFIG")
        .output()
        .unwrap()
}

/// Without the feature, `sqlmq bench` takes any arguments and refuses with exit code 2, saying
/// how to run the benchmark.
#[cfg(not(feature = "bench"))]
#[test]
fn without_the_feature_bench_says_where_the_benchmark_is() {
    for args in [
        &["bench"][..],
        &[
            "bench",
            "--quick",
            "queue.drain",
            "--json",
            "--out",
            "x.json",
        ],
        &["bench", "--scale", "0.01", "--unknown-flag", "-x"],
    ] {
        let out = sqlmq(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "sqlmq {args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(
            stderr.contains("cargo run --release -p sqlmq-bench")
                && stderr.contains("--features bench"),
            "sqlmq {args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty());
    }
}

/// With the feature, `sqlmq bench` is the benchmark (its arguments, its scenario list).
#[cfg(feature = "bench")]
#[test]
fn with_the_feature_bench_is_the_benchmark() {
    let out = sqlmq(&["bench", "--list"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("queue.drain") && stdout.contains("peer.redis"),
        "{stdout}"
    );
    let out = sqlmq(&["bench", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// With the feature, `sqlmq bench` runs on the backend the database URL names: on a SQLite URL,
/// SQLite's own raw baselines and sqlmq's figures against them, in a scratch file that is gone
/// afterwards; the configured file is never created.
#[cfg(feature = "bench")]
#[test]
fn with_the_feature_bench_runs_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("sqlmq-cli-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}/app.db", dir.display());
    let out = sqlmq(&[
        "--database-url",
        &url,
        "bench",
        "queue.produce",
        "--scale",
        "0.01",
        "--json",
    ]);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["server"]["flavor"], "SQLite", "{}", report["server"]);
    assert_eq!(report["scratch"]["kind"], "file");
    let figures: Vec<&serde_json::Value> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["figures"].as_array().unwrap())
        .collect();
    let ratio = |key: &str| {
        let f = figures.iter().find(|f| f["key"] == key).unwrap();
        f["ratio"].as_f64()
    };
    assert!(figures.iter().any(|f| f["key"] == "raw.insert.16"));
    assert!(ratio("queue.send.16").is_some_and(|r| r > 0.0));
    assert!(left.is_empty(), "left behind: {left:?}");
}
