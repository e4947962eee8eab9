//! The CLI on SQLite with nothing configured: the default database is `sqlmq.db` in the
//! current directory, shared by separate producer and consumer processes.

mod common;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::run_with_input;
use sqlmq_testkit::eventually;

/// An empty scratch directory, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!(
            "sqlmq-cli-{tag}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    /// `sqlmq` in this directory, with no database configured anywhere.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sqlmq"));
        cmd.args(args)
            .current_dir(&self.0)
            .env_remove("SQLMQ_DATABASE_URL")
            .env_remove("SQLMQ_CONFIG")
            .env_remove("SQLMQ_TABLE_PREFIX")
            .env_remove("SQLMQ_MAX_PAYLOAD_BYTES")
            .env_remove("RUST_LOG");
        cmd
    }

    fn run(&self, args: &[&str], stdin: &[u8]) -> Output {
        let out = run_with_input(self.cmd(args), stdin);
        assert!(
            out.status.success(),
            "sqlmq {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The bodies a consumer command appended to `file`, one per line. A command of the killed
/// consumer may outlive it and find no body on its stdin (its parent died before writing
/// it): its empty line is not a body.
fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The queue's counts by state (`sqlmq queues --json`).
fn counts(dir: &Dir) -> serde_json::Value {
    let out = dir.run(&["queues", "--json"], b"");
    let queues: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    queues[0].clone()
}

/// Whether nothing is left to process: no message ready, scheduled or in flight.
fn drained(q: &serde_json::Value) -> bool {
    ["ready", "scheduled", "in_flight", "blocked"]
        .iter()
        .all(|state| q[state] == 0)
}

/// Guarantee: with no database configured, `sqlmq demo` runs on `sqlite://sqlmq.db` in the
/// current directory, says so once on stderr, and leaves the file.
#[test]
fn the_demo_runs_on_a_sqlite_file_with_nothing_configured() {
    let dir = Dir::new("demo");
    let out = dir.run(&["demo"], b"");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("processed 2001"), "{stdout}");
    assert!(stdout.contains("2 members acked 400 records"), "{stdout}");
    assert_eq!(
        stderr.matches("using sqlite://sqlmq.db").count(),
        1,
        "{stderr}"
    );
    assert!(dir.path("sqlmq.db").exists());
}

/// Guarantee: a producer process and three `sqlmq consume` processes on one SQLite file
/// process every message, none twice while no process dies; a consumer killed with SIGKILL
/// mid-run loses nothing (its claims come back to the survivors); "database is locked" never
/// reaches a user.
#[test]
fn three_consumer_processes_share_one_file_and_a_sigkill_loses_nothing() {
    const MESSAGES: usize = 2000;
    let dir = Dir::new("consume");
    dir.run(&["queue", "create", "q"], b"");
    let input: String = (1..=MESSAGES).map(|i| format!("{i}\n")).collect();
    dir.run(&["send", "q", "--batch"], input.as_bytes());

    let done = dir.path("done.txt");
    let exec = format!("b=$(cat); echo \"$b\" >> {}", done.display());
    let spawn = || -> Child {
        dir.cmd(&["consume", "q", "--exec", &exec, "--lease", "5s"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut consumers: Vec<Child> = (0..3).map(|_| spawn()).collect();
    eventually(Duration::from_secs(60), "a quarter processed", || {
        (lines(&done).len() >= MESSAGES / 4).then_some(())
    });
    let victim = consumers.remove(0);
    unsafe { libc::kill(victim.id() as i32, libc::SIGKILL) };
    let victim = victim.wait_with_output().unwrap();
    assert!(!victim.status.success());

    // Done when every body was handled and nothing is left: the killed consumer's claims come
    // back to the survivors, which handle them again (its orphaned commands may have written
    // their bodies without an ack).
    let started = Instant::now();
    while lines(&done).into_iter().collect::<HashSet<_>>().len() < MESSAGES
        || !drained(&counts(&dir))
    {
        if started.elapsed() > Duration::from_secs(90) {
            let queues = dir.cmd(&["queues"]).output().unwrap();
            let mut report = String::from_utf8_lossy(&queues.stdout).into_owned();
            for mut c in consumers {
                let _ = c.kill();
                let out = c.wait_with_output().unwrap();
                report.push_str(&String::from_utf8_lossy(&out.stderr));
            }
            panic!(
                "{} of {MESSAGES} processed 90 s after the kill:\n{report}",
                lines(&done).into_iter().collect::<HashSet<_>>().len()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for c in &consumers {
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    }
    let mut stderr = String::from_utf8_lossy(&victim.stderr).into_owned();
    for c in consumers {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stderr.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    assert!(!stderr.contains("locked"), "{stderr}");
    let seen = lines(&done);
    let distinct: HashSet<&String> = seen.iter().collect();
    let expected: HashSet<String> = (1..=MESSAGES).map(|i| i.to_string()).collect();
    assert_eq!(
        distinct.into_iter().cloned().collect::<HashSet<_>>(),
        expected
    );
    // Only what the killed consumer held may run twice (at-least-once): its running commands
    // and the finished ones whose batched ack it had not committed yet.
    assert!(
        seen.len() - MESSAGES <= 32,
        "{} duplicates for one killed consumer with 4 commands at a time",
        seen.len() - MESSAGES
    );
    let q = counts(&dir);
    assert!(drained(&q) && q["dead"] == 0, "{q}");
    eprintln!("recovered within {:?} of the kill", started.elapsed());
}

/// One HTTP/1.1 request on a fresh connection; returns the status and the body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, rest) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    // The body may be chunked: take what lies between the first '{' and the last '}'.
    let json = match (rest.find('{'), rest.rfind('}')) {
        (Some(a), Some(b)) => serde_json::from_str(&rest[a..=b]).unwrap(),
        _ => serde_json::Value::Null,
    };
    (status, json)
}

/// Guarantee: `sqlmq serve` runs on the default SQLite file too: a queue created, a message
/// sent, received and acked over HTTP.
#[test]
fn serve_runs_on_the_default_sqlite_file() {
    let dir = Dir::new("serve");
    // Port 0: the server picks a free port and says which (a port picked here and bound later
    // could be taken in between by another process's connection).
    let mut server = dir
        .cmd(&["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(server.stderr.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(n > 0, "sqlmq serve exited before listening");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    // Keep reading its stderr, so that the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let (status, _) = http(&addr, "PUT", "/v1/queues/q", "{}");
    assert!(status == 200 || status == 201, "{status}");
    let (status, sent) = http(
        &addr,
        "POST",
        "/v1/queues/q/messages",
        r#"{"messages":[{"body":"hello"}]}"#,
    );
    assert_eq!(status, 200, "{sent}");
    let (status, got) = http(
        &addr,
        "POST",
        "/v1/queues/q/receive",
        r#"{"max":10,"wait_ms":2000}"#,
    );
    assert_eq!(status, 200, "{got}");
    let messages = got["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{got}");
    assert_eq!(messages[0]["body"], "hello");
    let receipt = messages[0]["receipt"].as_str().unwrap();
    let (status, acked) = http(
        &addr,
        "POST",
        "/v1/queues/q/ack",
        &format!(r#"{{"receipts":["{receipt}"]}}"#),
    );
    assert_eq!(status, 200, "{acked}");
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    assert!(server.wait().unwrap().success());
    assert!(dir.path("sqlmq.db").exists());
}
