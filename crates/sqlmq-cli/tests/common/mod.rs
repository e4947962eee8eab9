//! Test harness for the `sqlmq` binary: every test gets its own database (see `sqlmq-testkit`:
//! on the server at `SQLMQ_TEST_DATABASE_URL`, dropped when the `TestDb` is dropped, also when
//! the test panics) and a scratch directory.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use sqlmq_testkit::TestDatabase;
pub use sqlmq_testkit::eventually;

/// Run `cmd` to completion with `stdin` as its input (written from a thread of its own, so
/// that a command that writes much before it reads cannot deadlock the test).
pub fn run_with_input(mut cmd: Command, stdin: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// A throwaway database and a scratch directory, with helpers to run the binary against them.
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub dir: PathBuf,
    database: TestDatabase,
}

impl TestDb {
    /// A fresh database, migrated with `sqlmq migrate`.
    pub fn new() -> TestDb {
        let db = TestDb::unmigrated();
        db.migrate();
        db
    }

    /// A fresh, empty database.
    pub fn unmigrated() -> TestDb {
        let database = TestDatabase::create();
        let dir = std::env::temp_dir().join(&database.name);
        std::fs::create_dir_all(&dir).unwrap();
        TestDb {
            name: database.name.clone(),
            url: database.url.clone(),
            dir,
            database,
        }
    }

    /// `sqlmq migrate` as the database's admin (the binary otherwise runs as the runtime user,
    /// which has no DDL rights).
    pub fn migrate(&self) {
        let out = self
            .cmd(&["migrate"])
            .env("SQLMQ_DATABASE_URL", &self.database.admin_url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "migrate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The URL of the database's admin (DDL rights).
    pub fn admin_url(&self) -> &str {
        &self.database.admin_url
    }

    /// Run as the database's admin (DDL rights).
    pub fn run_as_admin(&self, args: &[&str]) -> Output {
        self.cmd(args)
            .env("SQLMQ_DATABASE_URL", &self.database.admin_url)
            .output()
            .unwrap()
    }

    /// The binary with this database in its environment and nothing else inherited that could
    /// change its behaviour.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = self.database.command(env!("CARGO_BIN_EXE_sqlmq"));
        cmd.args(args).current_dir(&self.dir);
        cmd
    }

    /// Run to completion with `stdin` as input.
    pub fn run_with_stdin(&self, args: &[&str], stdin: &[u8]) -> Output {
        run_with_input(self.cmd(args), stdin)
    }

    /// Run to completion with an empty stdin.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with_stdin(args, b"")
    }

    /// Run, require success, return stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_with_stdin(args, b"")
    }

    /// Run with input, require success, return stdout.
    pub fn ok_with_stdin(&self, args: &[&str], stdin: &[u8]) -> String {
        let out = self.run_with_stdin(args, stdin);
        assert!(
            out.status.success(),
            "sqlmq {args:?} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Run, require success, parse stdout as JSON.
    pub fn json(&self, args: &[&str]) -> Value {
        let text = self.ok(args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("sqlmq {args:?}: {e}: {text}"))
    }

    /// Run and require failure with `code` and a stderr containing `needle`; return stderr.
    pub fn fails(&self, args: &[&str], code: i32, needle: &str) -> String {
        self.fails_with_stdin(args, b"", code, needle)
    }

    /// Like [`TestDb::fails`], with input.
    pub fn fails_with_stdin(&self, args: &[&str], stdin: &[u8], code: i32, needle: &str) -> String {
        let out = self.run_with_stdin(args, stdin);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(code),
            "sqlmq {args:?} should exit {code}; stderr:\n{stderr}"
        );
        assert!(
            stderr.contains(needle),
            "sqlmq {args:?}: stderr should mention {needle:?}:\n{stderr}"
        );
        assert!(
            stderr.starts_with("error: "),
            "sqlmq {args:?}: errors start with `error: `:\n{stderr}"
        );
        stderr
    }

    /// `queues --json` entry of `queue`.
    pub fn stats(&self, queue: &str) -> Stats {
        let all = self.json(&["queues", "--json"]);
        let q = all
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == queue)
            .unwrap_or_else(|| panic!("queue {queue} not in {all}"));
        let n = |k: &str| q[k].as_u64().unwrap_or_else(|| panic!("{k} in {q}"));
        Stats {
            ready: n("ready"),
            scheduled: n("scheduled"),
            blocked: n("blocked"),
            in_flight: n("in_flight"),
            dead: n("dead"),
        }
    }

    /// A path in this test's scratch directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Spawn the binary in the background; killed when the guard drops.
    pub fn spawn(&self, args: &[&str]) -> Running {
        spawn_cmd(self.cmd(args))
    }
}

impl Drop for TestDb {
    /// Remove the scratch directory; the database goes with the `database` field.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The multithreaded libfaketime, wherever Debian put it for this architecture.
pub fn libfaketime() -> String {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("faketime/libfaketimeMT.so.1"))
        .find(|p| p.exists());
    found
        .expect("libfaketime is installed (scripts/test.sh installs it: Debian package faketime)")
        .display()
        .to_string()
}

/// The binary with its wall clock shifted by `skew` (`+5h`, `-5h`).
pub fn skewed_cmd(db: &TestDb, skew: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = db.cmd(args);
    cmd.env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", skew)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    cmd
}

/// Spawn `cmd` in the background; killed when the guard drops.
pub fn spawn_cmd(mut cmd: Command) -> Running {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Running { child: Some(child) }
}

/// Counts of one queue, from `queues --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    pub ready: u64,
    pub scheduled: u64,
    pub blocked: u64,
    pub in_flight: u64,
    pub dead: u64,
}

impl Stats {
    pub fn pending(&self) -> u64 {
        self.ready + self.scheduled + self.blocked + self.in_flight
    }
}

/// A background `sqlmq` process, SIGKILLed if still running when dropped.
pub struct Running {
    child: Option<Child>,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Whether it has exited (without collecting its output).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().unwrap().try_wait().unwrap()
    }

    /// Send a signal (e.g. `libc::SIGTERM`).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child, which is not reaped yet.
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill failed");
    }

    /// SIGKILL (what `kill -9` does) and reap.
    pub fn kill9(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Wait for the exit, failing after `deadline`; returns the output.
    pub fn wait(mut self, deadline: Duration) -> Output {
        eventually(deadline, "the process to exit", || self.try_status());
        self.child.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The lines of a file, empty when it does not exist.
pub fn lines(path: &Path) -> Vec<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.lines().map(str::to_owned).collect(),
        Err(_) => Vec::new(),
    }
}

/// One HTTP/1.1 request over a fresh connection; the whole response as text.
pub fn http(port: u16, method: &str, path: &str, body: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

pub fn free_port() -> u16 {
    sqlmq_testkit::free_port()
}
