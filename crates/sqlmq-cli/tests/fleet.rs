//! A fleet of long-running processes on a real server at its limits (private `mariadbd`s, real
//! processes): at `max_connections` and at a user's connection limit they wait and then all get
//! to work, never exit; a server stopped for 20 s under `consume`, `subscribe` and `serve`
//! leaves them alive and back at work within 5 s of its return; `--max-connections` bounds
//! what each process holds.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{TestDb, free_port, http, lines, run_with_input};
use sqlmq_testkit::{PrivateServer, eventually};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The binary on `url`, with nothing inherited that could change its behaviour.
fn sqlmq(url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sqlmq"));
    cmd.args(args)
        .env("SQLMQ_DATABASE_URL", url)
        .env_remove("SQLMQ_CONFIG")
        .env_remove("SQLMQ_TABLE_PREFIX")
        .env_remove("SQLMQ_MAX_CONNECTIONS")
        .env_remove("SQLMQ_CONNECT_TIMEOUT")
        .env_remove("RUST_LOG");
    cmd
}

fn ok(url: &str, args: &[&str]) {
    let out = sqlmq(url, args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A background process whose stderr goes to a file (a pipe nobody reads would fill and stop
/// it); SIGKILLed on drop.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(mut cmd: Command, log: PathBuf) -> Proc {
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        Proc { child, log }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then the exit status (graceful shutdown).
    fn stop(mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child, not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        eventually(Duration::from_secs(30), "the process to exit", || {
            self.child.try_wait().unwrap()
        })
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "sqlmq-fleet-{name}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// (pid of the consume process, message id) per handled message.
fn handled(path: &Path) -> Vec<(u32, String)> {
    lines(path)
        .iter()
        .filter_map(|l| {
            let (pid, id) = l.split_once(' ')?;
            Some((pid.parse().ok()?, id.to_owned()))
        })
        .collect()
}

/// `consumers` consume processes (8 commands each, the default pool of 3 connections) and a
/// producer of `messages` started together against a server whose `limit` (applied at start
/// or to the runtime user) leaves room for fewer: every process stays alive, those that get
/// connections handle messages; once `raise` runs every consumer gets to work, and every
/// message is handled.
fn fleet_outlives_a_limit(
    server_options: &[&str],
    user_options: &str,
    raise: &str,
    consumers: usize,
    messages: usize,
) {
    let rt = runtime();
    let mut server = PrivateServer::install();
    let options: Vec<String> = server_options.iter().map(|o| (*o).to_owned()).collect();
    server.start_with(&options);
    rt.block_on(server.wait_ready());
    for sql in [
        "CREATE DATABASE app".to_owned(),
        format!("CREATE USER app@'%' IDENTIFIED BY 'pw' {user_options}"),
        "GRANT ALL ON app.* TO app@'%'".to_owned(),
    ] {
        rt.block_on(server.admin(&sql));
    }
    let url = format!("mysql://app:pw@127.0.0.1:{}/app", server.port());
    ok(&url, &["migrate"]);
    ok(&url, &["queue", "create", "q"]);

    let dir = scratch("limit");
    let out = dir.join("handled");
    let exec = format!(
        r#"printf '%s %s\n' "$PPID" "$SQLMQ_MESSAGE_ID" >> {}; sleep 0.1"#,
        out.display()
    );
    let mut fleet: Vec<Proc> = (0..consumers)
        .map(|i| {
            let cmd = sqlmq(
                &url,
                &["consume", "q", "--exec", &exec, "--concurrency", "8"],
            );
            Proc::spawn(cmd, dir.join(format!("consume-{i}.log")))
        })
        .collect();
    // The producer goes through the extra port kept for administrators, so that the fleet
    // cannot starve it of connections (what is tested is the consumers).
    let input: String = (0..messages).map(|i| format!("m{i}\n")).collect();
    let mut producer = sqlmq(&server.admin_url("app"), &["send", "q", "--batch"]);
    producer.args(["--max-connections", "1"]);
    let sent = run_with_input(producer, input.as_bytes());
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );

    // Under the limit: some work, nobody exits, and the limit was met.
    eventually(Duration::from_secs(60), "work under the limit", || {
        (handled(&out).len() >= messages / 5).then_some(())
    });
    for (i, p) in fleet.iter_mut().enumerate() {
        assert!(p.alive(), "consumer {i} exited:\n{}", p.log());
    }
    let waited = fleet
        .iter()
        .filter(|p| p.log().contains("waiting for the database"))
        .count();
    assert!(waited > 0, "no consumer met the limit: it tests nothing");
    let busy: HashSet<u32> = handled(&out).iter().map(|h| h.0).collect();
    eprintln!(
        "under the limit: {} of {consumers} consumers at work, {waited} waited, {} handled",
        busy.len(),
        handled(&out).len()
    );

    // The limit raised: every consumer gets to work, and every message is handled.
    rt.block_on(server.admin(raise));
    let raised_at = handled(&out).len();
    let pids: HashSet<u32> = fleet.iter().map(|p| p.child.id()).collect();
    eventually(Duration::from_secs(60), "every consumer at work", || {
        let after: HashSet<u32> = handled(&out)[raised_at..].iter().map(|h| h.0).collect();
        pids.is_subset(&after).then_some(())
    });
    eventually(Duration::from_secs(120), "every message handled", || {
        let ids: HashSet<String> = handled(&out).into_iter().map(|h| h.1).collect();
        (ids.len() == messages).then_some(())
    });
    for (i, p) in fleet.drain(..).enumerate() {
        let log = p.log();
        assert!(p.stop().success(), "consumer {i}:\n{log}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn six_consumers_outlive_max_connections_8_and_all_work_once_it_is_raised() {
    fleet_outlives_a_limit(
        &["--max-connections=8"],
        "",
        "SET GLOBAL max_connections = 200",
        6,
        3000,
    );
}

#[test]
fn consumers_outlive_the_runtime_users_connection_limit() {
    fleet_outlives_a_limit(
        &[],
        "WITH MAX_USER_CONNECTIONS 4",
        "ALTER USER app@'%' WITH MAX_USER_CONNECTIONS 0",
        3,
        1500,
    );
}

/// Connections of the test database's runtime user, sampled until `done`; the most seen.
fn most_connections(user: &str, done: impl Fn() -> bool) -> usize {
    let sql = format!(
        "SELECT CAST(COUNT(*) AS CHAR) FROM information_schema.PROCESSLIST WHERE USER = '{user}'"
    );
    let mut most = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "the consumers did not finish");
        let n: usize = sqlmq_testkit::admin(&sql)[0].parse().unwrap();
        most = most.max(n);
        std::thread::sleep(Duration::from_millis(20));
    }
    most
}

/// `processes` consume processes (16 commands each, `extra` flags) drain `messages`; the
/// most connections their user held at once.
fn pool_of(db: &TestDb, processes: usize, extra: &[&str], messages: usize) -> usize {
    let input: String = (0..messages).map(|i| format!("m{i}\n")).collect();
    db.ok_with_stdin(&["send", "q", "--batch"], input.as_bytes());
    let out = db.path("handled");
    let _ = std::fs::remove_file(&out);
    let exec = format!(
        r#"printf '%s\n' "$SQLMQ_MESSAGE_ID" >> {}; sleep 0.02"#,
        out.display()
    );
    let mut args = vec!["consume", "q", "--exec", &exec, "--concurrency", "16"];
    args.extend_from_slice(extra);
    let fleet: Vec<Proc> = (0..processes)
        .map(|i| Proc::spawn(db.cmd(&args), db.path(&format!("pool-{i}.log"))))
        .collect();
    let most = most_connections(&db.name, || lines(&out).len() >= messages);
    for p in fleet {
        let log = p.log();
        assert!(p.stop().success(), "{log}");
    }
    most
}

#[test]
fn consume_processes_hold_at_most_their_pools() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "q"]);
    let bounded = pool_of(&db, 3, &["--max-connections", "2"], 1500);
    eprintln!("3 processes with --max-connections 2: at most {bounded} connections");
    assert!(bounded <= 6, "{bounded} connections for 3 × 2");
    let default = pool_of(&db, 2, &[], 1000);
    eprintln!("2 processes, default pool: at most {default} connections");
    assert!(default <= 6, "{default} connections for 2 × the default 3");
}

/// How many times `needle` occurs in `text`.
fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

#[test]
fn consume_subscribe_and_serve_outlive_a_server_stopped_for_20_s() {
    let rt = runtime();
    let mut server = PrivateServer::install();
    server.start();
    rt.block_on(server.wait_ready());
    rt.block_on(server.admin("CREATE DATABASE app"));
    let url = server.url("app");
    ok(&url, &["migrate"]);
    ok(&url, &["queue", "create", "q"]);
    ok(&url, &["topic", "create", "t"]);

    let dir = scratch("outage");
    let (queue_out, topic_out) = (dir.join("queue"), dir.join("topic"));
    let record =
        |path: &Path| format!(r#"printf '%s\n' "$SQLMQ_MESSAGE_ID" >> {}"#, path.display());
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut procs: HashMap<&str, Proc> = HashMap::new();
    procs.insert(
        "consume",
        Proc::spawn(
            sqlmq(&url, &["consume", "q", "--exec", &record(&queue_out)]),
            dir.join("consume.log"),
        ),
    );
    procs.insert(
        "subscribe",
        Proc::spawn(
            sqlmq(
                &url,
                &[
                    "subscribe",
                    "t",
                    "--group",
                    "g",
                    "--from",
                    "earliest",
                    "--exec",
                    &record(&topic_out),
                ],
            ),
            dir.join("subscribe.log"),
        ),
    );
    procs.insert(
        "serve",
        Proc::spawn(
            sqlmq(&url, &["serve", "--listen", &listen]),
            dir.join("serve.log"),
        ),
    );
    let status = |path: &str| {
        http(port, "GET", path, "")
            .ok()
            .and_then(|r| r.split(' ').nth(1).map(str::to_owned))
    };
    eventually(Duration::from_secs(30), "serve ready", || {
        (status("/readyz").as_deref() == Some("200")).then_some(())
    });
    // Everything at work before the outage.
    let work = |n: usize| {
        ok(&url, &["send", "q", "before"]);
        ok(&url, &["publish", "t", "before"]);
        eventually(Duration::from_secs(30), "the consumers at work", || {
            (lines(&queue_out).len() >= n && lines(&topic_out).len() >= n).then_some(())
        });
    };
    work(1);

    server.kill9();
    let down = Instant::now();
    eventually(Duration::from_secs(15), "serve to answer 503", || {
        (status("/readyz").as_deref() == Some("503")).then_some(())
    });
    std::thread::sleep(Duration::from_secs(20).saturating_sub(down.elapsed()));
    for (name, p) in procs.iter_mut() {
        assert!(
            p.alive(),
            "{name} exited while the server was down:\n{}",
            p.log()
        );
    }

    server.start();
    rt.block_on(server.wait_ready());
    let up = Instant::now();
    ok(&url, &["send", "q", "after"]);
    ok(&url, &["publish", "t", "after"]);
    let mut serve_back = None;
    let mut queue_back = None;
    let mut topic_back = None;
    while up.elapsed() < Duration::from_secs(5)
        && (serve_back.is_none() || queue_back.is_none() || topic_back.is_none())
    {
        if serve_back.is_none()
            && http(
                port,
                "POST",
                "/v1/queues/q/messages",
                r#"{"messages":[{"body":"via http"}]}"#,
            )
            .is_ok_and(|r| r.starts_with("HTTP/1.1 20"))
        {
            serve_back = Some(up.elapsed());
        }
        if queue_back.is_none() && lines(&queue_out).len() >= 2 {
            queue_back = Some(up.elapsed());
        }
        if topic_back.is_none() && lines(&topic_out).len() >= 2 {
            topic_back = Some(up.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "back after the server accepted connections: serve {serve_back:?}, consume \
         {queue_back:?}, subscribe {topic_back:?}"
    );
    for (name, back) in [
        ("serve", serve_back),
        ("consume", queue_back),
        ("subscribe", topic_back),
    ] {
        assert!(
            back.is_some(),
            "{name} not back within 5 s:\n{}",
            procs[name].log()
        );
    }
    eventually(Duration::from_secs(10), "serve ready again", || {
        (status("/readyz").as_deref() == Some("200")).then_some(())
    });
    let metrics = http(port, "GET", "/metrics", "").unwrap();
    assert!(metrics.contains("sqlmq_database_waits_total"), "{metrics}");

    // Each process told of the outage once, and of its end once (an outage ends at a success
    // 2 s after its last failure).
    eventually(
        Duration::from_secs(15),
        "every process to say the database is back",
        || {
            procs
                .values()
                .all(|p| p.log().contains("available again"))
                .then_some(())
        },
    );
    for (name, p) in procs.drain() {
        let log = p.log();
        assert_eq!(count(&log, "waiting for the database"), 1, "{name}:\n{log}");
        assert_eq!(count(&log, "available again"), 1, "{name}:\n{log}");
        assert!(p.stop().success(), "{name}:\n{log}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A one-shot command waits for a free connection up to `--connect-timeout`, then exits 1
/// naming the limit; given longer, it gets through once the connection is free.
#[test]
fn a_one_shot_command_waits_out_a_connection_limit_for_its_connect_timeout() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "q"]);
    sqlmq_testkit::admin(&format!(
        "ALTER USER '{}'@'%' WITH MAX_USER_CONNECTIONS 3",
        db.name
    ));
    // The user's three connections, held for 4 s by other clients (sqlmq needs two at once:
    // it checks SKIP LOCKED between them; the third leaves room for the one it just closed,
    // which the server counts until its thread ends).
    let server = sqlmq_testkit::address_of(&db.url);
    let (host, port) = (server.ip().to_string(), server.port().to_string());
    let holders: Vec<Child> = (0..3)
        .map(|_| {
            Command::new("mariadb")
                .args(["-h", &host, "-P", &port, "-u", &db.name, "-psqlmq-runtime"])
                .args(["-e", "SELECT SLEEP(4)"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let refused = db.run(&["queues", "--connect-timeout", "1s"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("refuses new connections"), "{stderr}");
    assert!(stderr.contains("per-user resource limit"), "{stderr}");
    assert!(stderr.contains("gave up after waiting"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the test was too slow to see the limit"
    );
    // Given long enough, the same command gets through once the holder is done.
    let waited = db.run(&["queues", "--connect-timeout", "20s"]);
    assert!(
        waited.status.success(),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
    assert!(String::from_utf8_lossy(&waited.stderr).contains("waiting for the database"));
    for mut holder in holders {
        holder.wait().unwrap();
    }
    sqlmq_testkit::admin(&format!(
        "ALTER USER '{}'@'%' WITH MAX_USER_CONNECTIONS 0",
        db.name
    ));
}
