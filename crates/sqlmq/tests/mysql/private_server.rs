//! A private MariaDB server for the tests that kill, restart or reconfigure one: its own data
//! directory and port, never the shared server.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::Connection;

const MARIADBD: &str = "/usr/sbin/mariadbd";
/// A private MariaDB server: its own data directory and port.
pub(crate) struct PrivateServer {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl PrivateServer {
    pub(crate) fn install() -> PrivateServer {
        let dir = std::env::temp_dir().join(format!(
            "sqlmq-private-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        // Two installs at once fail (the tests of this binary run in parallel): one at a time.
        static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
        let mut install = Command::new("mariadb-install-db");
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if is_root() {
            install.arg("--user=root");
        }
        assert!(
            install.status().expect("mariadb-install-db runs").success(),
            "mariadb-install-db failed"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        PrivateServer {
            dir,
            port,
            child: None,
        }
    }

    /// Start without privilege checks (root may do anything, over any transport).
    pub(crate) fn start(&mut self) {
        self.start_with(&["--skip-grant-tables".to_owned()]);
    }

    /// Start with extra server options (`--ssl-cert=…`), privileges checked: root has no
    /// password (`mariadb-install-db --auth-root-authentication-method=normal`).
    pub(crate) fn start_with(&mut self, options: &[String]) {
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
            .args(options)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if is_root() {
            cmd.arg("--user=root");
        }
        self.child = Some(cmd.spawn().expect("mariadbd starts"));
    }

    pub(crate) fn url(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.port)
    }

    pub(crate) async fn wait_ready(&self) {
        self.wait_ready_at(&self.url("mysql")).await
    }

    /// Wait until `url` connects (a server that takes TLS only needs its TLS URL).
    pub(crate) async fn wait_ready_at(&self, url: &str) {
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
    pub(crate) async fn create_database(admin_url: &str, name: &str) {
        let mut admin = sqlx::MySqlConnection::connect(admin_url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
    }

    /// The server's own directory (for certificates and the like).
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// SIGKILL: no shutdown, no flush beyond what commits already made durable.
    pub(crate) fn kill9(&mut self) {
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

/// mariadbd refuses to run as root unless told `--user=root`.
fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}
