//! A private MariaDB server for the tests that kill, restart, fill or reconfigure one: its own
//! data directory and ports, never the shared server.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::Connection;

const MARIADBD: &str = "/usr/sbin/mariadbd";
/// InnoDB's redo log, at install and at every start: small, so that a server fits on a small
/// file system (the default is 96 MiB).
const REDO_LOG_SIZE: &str = "--innodb-log-file-size=8M";

/// A private MariaDB server: its own data directory, port and extra port.
///
/// ```no_run
/// # async fn f() {
/// let mut server = sqlmq_testkit::PrivateServer::install();
/// server.start();
/// server.wait_ready().await;
/// let url = server.url("mysql");
/// # let _ = url; }
/// ```
pub struct PrivateServer {
    dir: PathBuf,
    port: u16,
    extra_port: u16,
    child: Option<Child>,
    /// Options of every start (and of the install).
    always: Vec<String>,
}

impl PrivateServer {
    /// Install a new server in a directory of its own (not started).
    pub fn install() -> PrivateServer {
        Self::install_with(&[])
    }

    /// Install a new server with server options that hold at install and at every start
    /// (`--innodb-data-file-path=…` fixes the system tablespace when it is created).
    pub fn install_with(options: &[&str]) -> PrivateServer {
        let dir = std::env::temp_dir().join(format!(
            "sqlmq-private-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let always: Vec<String> = options.iter().map(|o| (*o).to_owned()).collect();
        let user = is_root().then_some("root");
        let mut options = vec![REDO_LOG_SIZE.to_owned()];
        options.extend(always.iter().cloned());
        install_data_dir(&dir.join("data"), user, &options);
        PrivateServer {
            dir,
            port: crate::free_port(),
            extra_port: crate::free_port(),
            child: None,
            always,
        }
    }

    /// Start without privilege checks (root may do anything, over any transport).
    pub fn start(&mut self) {
        self.start_with(&["--skip-grant-tables".to_owned()]);
    }

    /// Start with extra server options (`--ssl-cert=…`, `--max-connections=8`), privileges
    /// checked: root has no password (`mariadb-install-db --auth-root-authentication-method=normal`).
    /// Two connections on [`PrivateServer::admin_url`]'s extra port are kept for the test
    /// whatever `max_connections` says.
    pub fn start_with(&mut self, options: &[String]) {
        let mut cmd = Command::new(MARIADBD);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.dir.join("data").display()))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .arg(format!("--pid-file={}", self.dir.join("pid").display()))
            .arg(format!(
                "--log-error={}",
                self.dir.join("error.log").display()
            ))
            .arg("--innodb-buffer-pool-size=64M")
            .arg("--innodb-flush-log-at-trx-commit=1")
            .arg(REDO_LOG_SIZE)
            .arg(format!("--extra-port={}", self.extra_port))
            .arg("--extra-max-connections=2")
            .args(&self.always)
            .args(options)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if is_root() {
            cmd.arg("--user=root");
        }
        self.child = Some(cmd.spawn().expect("mariadbd starts"));
    }

    /// `database` as root on the server's port.
    pub fn url(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.port)
    }

    /// `database` as root on the extra port: reachable when the server is at its
    /// `max_connections`.
    pub fn admin_url(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.extra_port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Wait until root connects (panics after 60 s with the server's error log).
    pub async fn wait_ready(&self) {
        self.wait_ready_at(&self.url("mysql")).await
    }

    /// Wait until `url` connects (a server that takes TLS only needs its TLS URL).
    pub async fn wait_ready_at(&self, url: &str) {
        let started = Instant::now();
        loop {
            if let Ok(conn) = sqlx::MySqlConnection::connect(url).await {
                let _ = conn.close().await;
                return;
            }
            let log = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "private mariadbd did not start:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Create database `name` through the connection `admin_url` opens.
    pub async fn create_database(admin_url: &str, name: &str) {
        let mut admin = sqlx::MySqlConnection::connect(admin_url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
    }

    /// Run `sql` as root through the extra port (it works at the server's connection limit).
    pub async fn admin(&self, sql: &str) {
        let mut admin = sqlx::MySqlConnection::connect(&self.admin_url("mysql"))
            .await
            .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        admin.close().await.unwrap();
    }

    /// The server's own directory (for certificates and the like).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// SIGTERM, as a service manager stops a server: a clean shutdown, waited for. Start it
    /// again with [`PrivateServer::start_with`] (new options win over the installed ones).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let sent = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status()
                .expect("kill runs");
            assert!(sent.success(), "SIGTERM to mariadbd");
            child.wait().unwrap();
        }
    }

    /// SIGKILL: no shutdown, no flush beyond what commits already made durable.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Create a MariaDB data directory at `datadir` (`mariadb-install-db`, root without a
/// password, no test database) owned by `user`, with server `options`; panics with the
/// installer's output when it fails three times (once in CI, on a loaded machine, it failed
/// with no reason given; the next try on an empty directory is cheap). One install at a time in
/// this process: two at once fail.
///
/// ```no_run
/// let dir = std::env::temp_dir().join("node0");
/// sqlmq_testkit::install_data_dir(&dir.join("data"), Some("mysql"), &[]);
/// ```
pub fn install_data_dir(datadir: &Path, user: Option<&str>, options: &[String]) {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let mut failures = String::new();
    for _ in 0..3 {
        let mut install = Command::new("mariadb-install-db");
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db")
            .args(options);
        if let Some(user) = user {
            install.arg(format!("--user={user}"));
        }
        let out = install.output().expect("mariadb-install-db runs");
        if out.status.success() {
            return;
        }
        failures.push_str(&String::from_utf8_lossy(&out.stdout));
        failures.push_str(&String::from_utf8_lossy(&out.stderr));
        // Start the next try from an empty directory, as the first did.
        if let Ok(entries) = std::fs::read_dir(datadir) {
            for entry in entries.flatten() {
                let path = entry.path();
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    panic!("mariadb-install-db failed three times:\n{failures}");
}

/// mariadbd refuses to run as root unless told `--user=root`.
fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}
