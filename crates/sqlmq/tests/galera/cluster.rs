//! A MariaDB Galera cluster of three nodes on loopback, private to one test: its own data
//! directories and ports, the first node bootstrapped (`--wsrep-new-cluster`), the others joining
//! by state transfer (rsync). Debian's `galera-4` provides the provider library; the servers run
//! as the `mysql` user, which the rsync state transfer needs to write the joiners' directories.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Row};

const MARIADBD: &str = "/usr/sbin/mariadbd";
/// The wsrep provider of Debian's `galera-4`.
pub const PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";

/// One node: its directory, SQL port, and process.
struct Node {
    dir: PathBuf,
    port: u16,
    group_port: u16,
    child: Option<Child>,
}

/// A running three-node cluster; stopped and removed when dropped.
pub struct Cluster {
    root: PathBuf,
    nodes: Vec<Node>,
    address: String,
}

/// `n` free loopback ports (outside the ephemeral range: a joiner binds its state-transfer
/// port only after the nodes before it synced, see `sqlmq_testkit::free_port`).
fn free_ports(n: usize) -> Vec<u16> {
    (0..n).map(|_| sqlmq_testkit::free_port()).collect()
}

impl Cluster {
    /// Install three data directories and start the cluster; returns once every node is
    /// synced and the cluster has three members.
    pub async fn start() -> Cluster {
        assert!(
            std::path::Path::new(PROVIDER).exists(),
            "the Galera provider {PROVIDER} is missing: apt-get install galera-4 (scripts/test.sh does)"
        );
        let root = std::env::temp_dir().join(format!(
            "sqlmq-galera-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        let ports = free_ports(12);
        let mut nodes = Vec::new();
        for n in 0..3 {
            let dir = root.join(format!("n{n}"));
            std::fs::create_dir_all(&dir).unwrap();
            chown_mysql(&root);
            chown_mysql(&dir);
            sqlmq_testkit::install_data_dir(&dir.join("data"), Some("mysql"), &[]);
            nodes.push(Node {
                dir,
                port: ports[n],
                group_port: ports[3 + n],
                child: None,
            });
        }
        let address = format!(
            "gcomm://{}",
            nodes
                .iter()
                .map(|n| format!("127.0.0.1:{}", n.group_port))
                .collect::<Vec<_>>()
                .join(",")
        );
        let mut cluster = Cluster {
            root,
            nodes,
            address,
        };
        let (ist, sst) = (&ports[6..9], &ports[9..12]);
        for n in 0..3 {
            cluster.spawn(n, ist[n], sst[n], n == 0);
            // The first node must be primary before the others join it.
            cluster.wait_synced(n).await;
        }
        cluster.wait_size(3).await;
        cluster
    }

    fn spawn(&mut self, n: usize, ist_port: u16, sst_port: u16, bootstrap: bool) {
        let address = self.address.clone();
        let node = &mut self.nodes[n];
        let mut cmd = Command::new(MARIADBD);
        cmd.arg("--no-defaults")
            .arg("--user=mysql")
            .arg(format!("--datadir={}", node.dir.join("data").display()))
            .arg(format!("--port={}", node.port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", node.dir.join("sock").display()))
            .arg(format!("--pid-file={}", node.dir.join("pid").display()))
            .arg(format!("--log-error={}", node.dir.join("error.log").display()))
            .arg("--innodb-buffer-pool-size=64M")
            .arg("--innodb-flush-log-at-trx-commit=1")
            // What Galera requires (the guide, "Running on a cluster").
            .arg("--binlog-format=ROW")
            .arg("--innodb-autoinc-lock-mode=2")
            .arg("--wsrep-on=ON")
            .arg(format!("--wsrep-provider={PROVIDER}"))
            .arg("--wsrep-cluster-name=sqlmq-test")
            .arg(format!("--wsrep-cluster-address={address}"))
            .arg(format!("--wsrep-node-address=127.0.0.1:{}", node.group_port))
            .arg(format!("--wsrep-node-name=n{n}"))
            .arg(format!(
                "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{};ist.recv_addr=127.0.0.1:{ist_port};gcache.size=64M",
                node.group_port
            ))
            .arg("--wsrep-sst-method=rsync")
            .arg(format!("--wsrep-sst-receive-address=127.0.0.1:{sst_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if bootstrap {
            cmd.arg("--wsrep-new-cluster");
        }
        node.child = Some(cmd.spawn().expect("mariadbd starts"));
    }

    /// The URL of `database` on node `n`.
    pub fn url(&self, n: usize, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.nodes[n].port)
    }

    /// The SQL address of node `n`.
    pub fn addr(&self, n: usize) -> std::net::SocketAddr {
        format!("127.0.0.1:{}", self.nodes[n].port).parse().unwrap()
    }

    /// A status variable of node `n`.
    pub async fn status(&self, n: usize, name: &str) -> Option<String> {
        let mut conn = sqlx::MySqlConnection::connect(&self.url(n, "mysql"))
            .await
            .ok()?;
        let row = sqlx::query(
            "SELECT CAST(VARIABLE_VALUE AS CHAR) FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = UPPER(?)",
        )
        .bind(name)
        .fetch_optional(&mut conn)
        .await
        .ok()??;
        let value: String = row.try_get(0).ok()?;
        let _ = conn.close().await;
        Some(value)
    }

    async fn wait_synced(&self, n: usize) {
        let started = Instant::now();
        while self.status(n, "wsrep_local_state_comment").await.as_deref() != Some("Synced") {
            let log =
                std::fs::read_to_string(self.nodes[n].dir.join("error.log")).unwrap_or_default();
            let telling: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("ERROR") || l.contains("WSREP_SST") || l.contains("Synced"))
                .collect();
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "galera node {n} did not sync:\n{}",
                telling[telling.len().saturating_sub(30)..].join("\n")
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Wait until the cluster, seen from any live node, has `size` members.
    pub async fn wait_size(&self, size: usize) {
        let started = Instant::now();
        loop {
            for n in 0..self.nodes.len() {
                if self.nodes[n].child.is_some()
                    && self.status(n, "wsrep_cluster_size").await == Some(size.to_string())
                {
                    return;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the cluster never had {size} members"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Create `database` (through node 0: DDL replicates to every node).
    pub async fn create_database(&self, database: &str) {
        let mut conn = sqlx::MySqlConnection::connect(&self.url(0, "mysql"))
            .await
            .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    }

    /// SIGKILL node `n`: no shutdown, no goodbye to the group.
    pub fn kill9(&mut self, n: usize) {
        if let Some(mut child) = self.nodes[n].child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in 0..self.nodes.len() {
            self.kill9(n);
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Give a directory to the `mysql` user (the servers run as it).
fn chown_mysql(dir: &std::path::Path) {
    let status = Command::new("chown")
        .arg("mysql:mysql")
        .arg(dir)
        .status()
        .expect("chown runs");
    assert!(status.success(), "chown mysql {}", dir.display());
}
