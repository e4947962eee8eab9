//! `sqlmq bench` with and without the `bench` feature. Neither build needs a database here:
//! `--list` and the refusal both answer before connecting.

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
