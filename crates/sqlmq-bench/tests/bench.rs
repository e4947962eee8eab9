//! `sqlmq-bench`: smoke tests of the benchmark itself, on MySQL/MariaDB and on SQLite. They run
//! the binary tiny (hidden `--scale`) and check its report and its clean-up; none asserts a
//! speed.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use sqlmq_testkit::{TestDatabase, admin, eventually};

/// Every scenario `sqlmq bench` has; the report must list each one.
const SCENARIOS: &[&str] = &[
    "raw.insert",
    "raw.multirow",
    "raw.lifecycle",
    "raw.queue",
    "raw.head",
    "queue.produce",
    "queue.batch",
    "queue.drain",
    "queue.limits",
    "queue.keys",
    "queue.mixed",
    "queue.latency",
    "queue.claim",
    "queue.idle",
    "queue.budget",
    "worker.e2e",
    "worker.limits",
    "worker.latency",
    "worker.idle",
    "worker.durable",
    "worker.running",
    "worker.fleet",
    "topic.publish",
    "topic.group",
    "serve.send",
    "serve.drain",
    "serve.wait",
    "schema.migrate",
    "peer.postgres",
    "peer.rabbitmq",
    "peer.redis",
];

/// Figures of consumer scenarios, and of topic publishes (each record exactly one offset,
/// offsets dense): each must report its duplicates and losses.
const CHECKED: &[&str] = &[
    "queue.drain.8",
    "queue.drain.lock_held.8",
    "queue.drain.take.8",
    "queue.limits.drain.8",
    "queue.keys.drain.8",
    "worker.limits",
    "queue.mixed.take.consume",
    "queue.mixed.clients.consume",
    "raw.queue.drain.8",
    "raw.queue.mixed.consume",
    "raw.queue.lease.drain.8",
    "raw.queue.lease.mixed.consume",
    "raw.queue.keyed.drain.8",
    "raw.queue.keyed.mixed.consume",
    "raw.queue.keyed.lease.drain.8",
    "raw.queue.keyed.lease.mixed.consume",
    "raw.queue.keyed.inflight.drain.8",
    "raw.queue.keyed.inflight.mixed.consume",
    "raw.queue.stated.drain.8",
    "raw.queue.stated.mixed.consume",
    "raw.queue.stated.take.drain.8",
    "raw.queue.stated.take.mixed.consume",
    "raw.queue.clustered.loose.drain.8",
    "raw.queue.clustered.loose.mixed.consume",
    "raw.queue.clustered.take.drain.8",
    "raw.queue.clustered.take.mixed.consume",
    "raw.queue.clustered.drain.8",
    "raw.queue.clustered.mixed.consume",
    "raw.queue.single.drain.8",
    "raw.queue.single.mixed.consume",
    "queue.mixed.consume",
    "queue.latency.busy",
    "queue.latency.idle",
    "topic.publish.1p.single.1",
    "topic.publish.1p.single.16",
    "topic.publish.1p.batch100.1",
    "topic.publish.1p.batch100.16",
    "topic.publish.8p.single.1",
    "topic.publish.8p.single.16",
    "topic.publish.8p.batch100.1",
    "topic.publish.8p.batch100.16",
    "topic.publish.1p.sequencer",
    "topic.group.8",
];

/// Raw baselines: every ratio of a run divides by one of them.
const BASELINES: &[&str] = &[
    "raw.insert.1",
    "raw.insert.16",
    "raw.multirow",
    "raw.lifecycle.16",
    "raw.queue.drain.8",
    "raw.queue.mixed.consume",
];

/// `sqlmq-bench ARGS` on `db`.
fn bench(db: &TestDatabase, args: &[&str]) -> Command {
    let mut cmd = db.command(env!("CARGO_BIN_EXE_sqlmq-bench"));
    // The bench makes scratch databases and raw tables: an admin's tool, not the application's.
    cmd.env("SQLMQ_DATABASE_URL", &db.admin_url).args(args);
    cmd
}

/// Run `sqlmq-bench ARGS` on `db`, require success, parse stdout as JSON.
fn bench_json(db: &TestDatabase, args: &[&str]) -> Value {
    let out = bench(db, args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sqlmq-bench {args:?}: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("sqlmq-bench {args:?}: {e}"))
}

/// `db` migrated by the library, as an application using sqlmq would have it.
fn migrate(db: &TestDatabase) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = sqlmq::Client::connect(&db.admin_url).await.unwrap();
        client.migrate().await.unwrap();
        client.pool().close().await;
    });
}

fn schema_exists(name: &str) -> bool {
    !admin(&format!(
        "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata WHERE schema_name = '{name}'"
    ))
    .is_empty()
}

fn scenario<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("scenario {id} missing from the report"))
}

/// The checks every tiny quick run passes, on any backend: every scenario listed; sqlmq and
/// baseline scenarios ran with positive figures (but those in `unavailable`, which report why
/// they mean nothing on this backend, and the figures in `unavailable_figures`, listed likewise
/// in their scenario); peers ran or were skipped with a reason; the raw baselines are there and
/// every figure compared with one has its ratio; consumer scenarios observed zero duplicates and
/// zero losses.
fn check_figures(report: &Value, unavailable: &[&str], unavailable_figures: &[&str]) {
    let mut figures = Vec::new();
    let mut not_available = Vec::new();
    for id in SCENARIOS {
        let s = scenario(report, id);
        let status = s["status"].as_str().unwrap();
        if unavailable.contains(id) {
            assert_eq!(status, "not_available", "{s}");
            assert!(s["figures"].as_array().unwrap().is_empty(), "{s}");
            assert!(not_available_reason(&s["reason"]), "{s}");
            continue;
        }
        if id.starts_with("peer.") && status == "skipped" {
            assert!(s["reason"].as_str().is_some_and(|r| !r.is_empty()), "{s}");
            continue;
        }
        assert_eq!(status, "ok", "{s}");
        if id.starts_with("peer.") {
            assert!(s["peer"]["durable"].is_boolean(), "{s}");
        }
        let list = s["figures"].as_array().unwrap();
        assert!(!list.is_empty(), "{s}");
        figures.extend(list.iter().cloned());
        for u in s["not_available"].as_array().into_iter().flatten() {
            assert!(not_available_reason(&u["reason"]), "{u}");
            not_available.push(u["key"].as_str().unwrap().to_owned());
        }
    }
    not_available.sort();
    let mut expected: Vec<&str> = unavailable_figures.to_vec();
    expected.sort();
    assert_eq!(not_available, expected, "figures reported as not available");
    for key in BASELINES {
        let f = figures
            .iter()
            .find(|f| f["key"] == *key)
            .unwrap_or_else(|| panic!("baseline {key} missing"));
        assert!(
            f["baseline"].is_null(),
            "a baseline is compared with nothing: {f}"
        );
    }
    for f in &figures {
        let value = f["value"].as_f64().unwrap();
        // Memory held above a level measured before is zero when the allocator reuses pages
        // that earlier scenarios freed: a measurement, not a failure.
        let held_memory =
            f["unit"] == "MiB" && f["key"].as_str().is_some_and(|k| !k.ends_with(".peak"));
        assert!(
            value.is_finite() && (value > 0.0 || (held_memory && value == 0.0)),
            "positive figure: {f}"
        );
        if !f["baseline"].is_null() {
            assert!(f["ratio"].as_f64().is_some_and(|r| r > 0.0), "ratio: {f}");
        }
        if !f["duplicates"].is_null() || !f["losses"].is_null() {
            assert_eq!(f["duplicates"], 0, "duplicates: {f}");
            assert_eq!(f["losses"], 0, "losses: {f}");
        }
        if f["unit"] == "ms" {
            assert!(
                f["latency"]["p99_ms"].as_f64().unwrap()
                    >= f["latency"]["p50_ms"].as_f64().unwrap()
            );
        }
    }
    for key in CHECKED.iter().filter(|k| !unavailable_figures.contains(k)) {
        let f = figures
            .iter()
            .find(|f| f["key"] == *key)
            .unwrap_or_else(|| panic!("figure {key} missing"));
        assert!(f["duplicates"].is_u64() && f["losses"].is_u64(), "{f}");
    }
    for peer in ["postgres", "rabbitmq", "redis"] {
        let s = scenario(report, &format!("peer.{peer}"));
        if s["status"] == "ok" {
            let drain = &s["figures"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["key"].as_str().unwrap().ends_with(".drain.8"));
            assert!(drain.is_some_and(|f| f["losses"] == 0), "{s}");
        }
    }
    let postgres = scenario(report, "peer.postgres");
    if postgres["status"] == "ok" {
        let mixed = postgres["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["key"] == "peer.postgres.mixed.consume");
        assert!(
            mixed.is_some_and(|f| f["losses"] == 0 && f["duplicates"] == 0),
            "{postgres}"
        );
    }
}

/// A reason that says what is not available where: "not available on SQLite: …".
fn not_available_reason(reason: &Value) -> bool {
    reason
        .as_str()
        .is_some_and(|r| r.starts_with("not available on ") && r.len() > 30)
}

/// A tiny quick run lists every scenario; sqlmq and baseline scenarios ran with positive
/// figures; peers ran or were skipped with a reason; consumer scenarios observed zero
/// duplicates and zero losses; `--out` holds the same document; the scratch database is gone.
#[test]
fn a_tiny_quick_run_reports_every_scenario_and_cleans_up() {
    let db = TestDatabase::create();
    let out = std::env::temp_dir().join(format!("{}.json", db.name));
    let report = bench_json(
        &db,
        &[
            "--quick",
            "--scale",
            "0.01",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert_eq!(
        written, report,
        "--out writes the document printed with --json"
    );

    assert_eq!(report["mode"], "quick");
    assert!(
        report["sqlmq_version"]
            .as_str()
            .is_some_and(|v| !v.is_empty())
    );
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(report["machine"]["memory_bytes"].as_u64().unwrap() > 0);
    let server = &report["server"];
    assert!(server["version"].as_str().is_some_and(|v| !v.is_empty()));
    for key in [
        "innodb_flush_log_at_trx_commit",
        "sync_binlog",
        "log_bin",
        "binlog_format",
    ] {
        assert!(!server[key].is_null(), "server.{key} in {server}");
    }

    check_figures(&report, &[], &[]);

    assert_eq!(report["scratch"]["kind"], "database");
    let scratch = report["scratch"]["name"].as_str().unwrap();
    assert!(scratch.starts_with("sqlmq_bench_"));
    assert!(
        !schema_exists(scratch),
        "the scratch database {scratch} was dropped"
    );
}

/// A fresh directory under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let name = format!(
            "sqlmq-bench-test-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }

    /// Names of the files in it.
    fn files(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// On SQLite, a tiny quick run measures SQLite's own raw baselines in a scratch file beside the
/// configured one, every sqlmq figure compared with them has its ratio, nothing is lost or
/// delivered twice; what means nothing on SQLite (statement counters, the topic sequencer) is
/// reported as not available, and the facts are SQLite's version and settings. The scratch
/// file goes, with its `-wal` and `-shm` files, and the configured file is never created.
#[test]
fn on_sqlite_a_tiny_quick_run_measures_against_sqlite_and_removes_its_file() {
    let dir = TempDir::new();
    let url = format!("sqlite://{}/app.db", dir.0.display());
    let out = Command::new(env!("CARGO_BIN_EXE_sqlmq-bench"))
        .args([
            "--database-url",
            &url,
            "--quick",
            "--scale",
            "0.01",
            "--json",
        ])
        .env_remove("SQLMQ_CONFIG")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("in scratch file "), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();

    let server = &report["server"];
    assert_eq!(server["flavor"], "SQLite", "{server}");
    assert!(
        server["version"]
            .as_str()
            .is_some_and(|v| v.starts_with('3'))
    );
    assert_eq!(server["journal_mode"], "wal", "{server}");
    assert_eq!(server["synchronous"], "FULL", "{server}");
    assert!(server["busy_timeout_ms"].as_i64().unwrap() > 0, "{server}");
    assert!(not_available_reason(&server["variables"]), "{server}");
    assert!(server.get("innodb_flush_log_at_trx_commit").is_none());

    check_figures(
        &report,
        &["queue.idle", "queue.budget"],
        &[
            "topic.publish.1p.sequencer",
            "queue.mixed.clients.produce",
            "queue.mixed.clients.consume",
            "worker.idle.queries",
            "worker.idle.250ms.queries",
            "worker.fleet.queries",
            "serve.wait.queries.10",
            "serve.wait.queries.100",
        ],
    );

    assert_eq!(report["scratch"]["kind"], "file", "{}", report["scratch"]);
    let scratch = PathBuf::from(report["scratch"]["path"].as_str().unwrap());
    assert_eq!(scratch.parent(), Some(dir.0.as_path()));
    assert_eq!(dir.files(), Vec::<String>::new(), "nothing left behind");
}

/// Without the right to create databases the bench works in the given database under a
/// scratch table prefix, drops every table under it, and leaves the user's tables alone.
#[test]
fn without_create_database_it_uses_a_table_prefix_and_drops_its_tables() {
    let db = TestDatabase::create();
    migrate(&db);
    let user = format!("sqlmq_bt_{:08x}", rand::random::<u32>());
    let created = std::panic::catch_unwind(|| {
        admin(&format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"));
    });
    if created.is_err() {
        eprintln!("skipped: cannot create a user on the test server");
        return;
    }
    struct DropUser(String);
    impl Drop for DropUser {
        fn drop(&mut self) {
            admin(&format!("DROP USER IF EXISTS '{}'@'%'", self.0));
        }
    }
    let _guard = DropUser(user.clone());
    admin(&format!(
        "GRANT ALL PRIVILEGES ON `{}`.* TO '{user}'@'%'",
        db.name
    ));
    let before = admin(&format!(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = '{}' ORDER BY 1",
        db.name
    ));
    assert!(!before.is_empty(), "migrated tables");

    let (scheme, rest) = db.url.split_once("://").unwrap();
    let host_and_db = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let url = format!("{scheme}://{user}:pw@{host_and_db}");
    let out = bench(
        &db,
        &["raw.insert", "queue.drain", "--scale", "0.01", "--json"],
    )
    .env("SQLMQ_DATABASE_URL", &url)
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cannot create a scratch database"),
        "{stderr}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["scratch"]["kind"], "table_prefix",
        "{}",
        report["scratch"]
    );
    assert_eq!(scenario(&report, "queue.drain")["status"], "ok");
    let after = admin(&format!(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = '{}' ORDER BY 1",
        db.name
    ));
    assert_eq!(after, before, "only the bench's own tables came and went");
}

/// Ctrl-C in the middle of a scenario stops the run and drops the scratch database.
#[test]
fn ctrl_c_drops_the_scratch_database() {
    let db = TestDatabase::create();
    let mut child = bench(&db, &["queue.idle"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let scratch = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| {
            let at = line.find("in scratch database ")?;
            Some(line[at..].split_whitespace().nth(3)?.to_owned())
        })
        .expect("the bench names its scratch database on stderr");
    eventually(Duration::from_secs(20), "the scenario's tables", || {
        let tables = admin(&format!(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = '{scratch}'"
        ));
        (!tables.is_empty()).then_some(())
    });
    // SAFETY: kill(2) on our own child, not yet reaped.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let status = eventually(Duration::from_secs(60), "the bench to exit", || {
        child.try_wait().unwrap()
    });
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(!status.success());
    assert!(
        rest.iter().any(|l| l.contains("interrupted by Ctrl-C")),
        "{rest:?}"
    );
    assert!(!schema_exists(&scratch), "{scratch} dropped");
}

/// A one-minute soak: mixed traffic with retries and dead letters, every figure measured in a
/// start and an end window with a verdict, and every message accounted for (handled or
/// dead-lettered, none lost, none handled twice).
#[test]
fn a_short_soak_compares_start_with_end_and_accounts_for_every_message() {
    let db = TestDatabase::create();
    let report = bench_json(&db, &["soak", "--minutes", "1", "--rate", "50", "--json"]);
    let figures = report["figures"].as_array().unwrap();
    let named = |what: &str| {
        figures
            .iter()
            .find(|f| f["what"].as_str().unwrap().starts_with(what))
            .unwrap_or_else(|| panic!("{what} missing: {report}"))
    };
    for what in ["process memory", "pickup latency p50", "handled"] {
        let f = named(what);
        assert!(f["start"].as_f64().unwrap() > 0.0, "{f}");
        assert!(f["end"].as_f64().unwrap() > 0.0, "{f}");
        assert!(["FLAT", "GREW", "FELL"].contains(&f["verdict"].as_str().unwrap()));
    }
    // The root user of the test server may read InnoDB's metrics.
    assert!(named("InnoDB history").get("end").is_some());
    let sent = report["sent"].as_u64().unwrap();
    assert!(sent > 2000, "{report}");
    assert_eq!(report["lost"], 0, "{report}");
    assert_eq!(report["duplicates"], 0, "{report}");
    let dead = report["dead"].as_u64().unwrap();
    assert!(
        dead > 0 && report["retried"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert_eq!(report["handled"].as_u64().unwrap() + dead, sent);
}
