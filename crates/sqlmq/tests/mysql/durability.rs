//! Durable (guarantee 1): a message whose send returned Ok survives a `kill -9` of the database
//! server and its restart, and so does an ack that returned Ok.
//!
//! The test starts a private `mariadbd` on its own port and data directory (never the shared
//! server), writes to it from producers and a consumer, kills it with SIGKILL mid-traffic,
//! restarts it on the same data directory and checks every acknowledged write.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::{Client, Message, MessageId, QueueConfig};
use sqlmq_testkit::check_invariants_at;
use sqlx::Connection;

const MARIADBD: &str = "/usr/sbin/mariadbd";
/// Short, so that messages in flight at the crash come back soon after the restart.
const LEASE: Duration = Duration::from_secs(3);

/// A private MariaDB server: its own data directory and port.
struct PrivateServer {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl PrivateServer {
    fn install() -> PrivateServer {
        let dir = std::env::temp_dir().join(format!(
            "sqlmq-durability-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
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

    fn start(&mut self) {
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
            .arg("--skip-grant-tables")
            .arg("--innodb-buffer-pool-size=64M")
            .arg("--innodb-flush-log-at-trx-commit=1")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if is_root() {
            cmd.arg("--user=root");
        }
        self.child = Some(cmd.spawn().expect("mariadbd starts"));
    }

    fn url(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.port)
    }

    async fn wait_ready(&self) {
        let started = Instant::now();
        loop {
            if let Ok(conn) = sqlx::MySqlConnection::connect(&self.url("mysql")).await {
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

    /// SIGKILL: no shutdown, no flush beyond what commits already made durable.
    fn kill9(&mut self) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_sends_and_acks_survive_kill_9_of_the_server() {
    let mut server = PrivateServer::install();
    server.start();
    server.wait_ready().await;
    let mut admin = sqlx::MySqlConnection::connect(&server.url("mysql"))
        .await
        .unwrap();
    sqlx::query("CREATE DATABASE app")
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();

    let client = Client::connect(&server.url("app")).await.unwrap();
    client.migrate().await.unwrap();
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();

    let sent: Arc<Mutex<HashSet<MessageId>>> = Arc::default();
    let acked: Arc<Mutex<HashSet<MessageId>>> = Arc::default();
    // The batch whose ack failed when the server died: its COMMIT may have been applied with
    // the reply lost, so those messages may be gone or still stored; either is correct.
    let in_doubt: Arc<Mutex<HashSet<MessageId>>> = Arc::default();
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let (q, sent) = (q.clone(), sent.clone());
            tokio::spawn(async move {
                for i in 0.. {
                    let result = if i % 10 == 0 {
                        let batch: Vec<Message> = (0..50)
                            .map(|j| Message::new(format!("{p}-{i}-{j}")))
                            .collect();
                        q.send_batch(batch)
                            .await
                            .map(|s| s.into_iter().map(|s| s.id).collect::<Vec<_>>())
                    } else {
                        q.send(Message::new(format!("{p}-{i}")))
                            .await
                            .map(|s| vec![s.id])
                    };
                    match result {
                        Ok(ids) => sent.lock().unwrap().extend(ids),
                        Err(_) => return, // the server is gone
                    }
                }
            })
        })
        .collect();
    let consumer = {
        let (q, acked, in_doubt) = (q.clone(), acked.clone(), in_doubt.clone());
        tokio::spawn(async move {
            loop {
                let Ok(batch) = q.receive(20, LEASE).await else {
                    return;
                };
                let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
                match q.ack_batch(&receipts).await {
                    Ok(report) => {
                        assert!(report.lost.is_empty());
                        acked.lock().unwrap().extend(batch.iter().map(|d| d.id));
                    }
                    Err(_) => {
                        in_doubt.lock().unwrap().extend(batch.iter().map(|d| d.id));
                        return;
                    }
                }
            }
        })
    };

    // Let traffic build up, then pull the plug.
    let started = Instant::now();
    while sent.lock().unwrap().len() < 2000 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill9();
    for p in producers {
        p.await.unwrap();
    }
    consumer.await.unwrap();
    drop(q);
    drop(client);

    let sent = std::mem::take(&mut *sent.lock().unwrap());
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    let in_doubt = std::mem::take(&mut *in_doubt.lock().unwrap());
    assert!(
        sent.len() >= 2000,
        "traffic before the crash: {}",
        sent.len()
    );
    assert!(
        !acked.is_empty(),
        "the consumer acked something before the crash"
    );

    server.start();
    server.wait_ready().await;
    let client = Client::connect(&server.url("app")).await.unwrap();
    let pool = client.pool().clone();
    let stored: HashSet<MessageId> =
        sqlx::query_scalar::<_, Vec<u8>>("SELECT id FROM sqlmq_messages")
            .fetch_all(&pool)
            .await
            .unwrap()
            .into_iter()
            .map(|b| MessageId::from_uuid(uuid::Uuid::from_slice(&b).unwrap()))
            .collect();
    let lost: Vec<_> = sent
        .difference(&acked)
        .filter(|id| !stored.contains(id) && !in_doubt.contains(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} sent messages lost in the crash, e.g. {:?}",
        lost.len(),
        lost.first()
    );
    let resurrected: Vec<_> = acked.intersection(&stored).collect();
    assert!(
        resurrected.is_empty(),
        "{} acked messages came back",
        resurrected.len()
    );
    check_invariants_at::<sqlx::MySql>(&server.url("app")).await;

    // Everything left is deliverable; messages in flight at the crash once their leases end.
    let q = client.queue("q").await.unwrap();
    let mut drained = HashSet::new();
    let deadline = Instant::now() + LEASE * 5;
    while drained.len() < stored.len() {
        assert!(
            Instant::now() < deadline,
            "drained {} of {}",
            drained.len(),
            stored.len()
        );
        let batch = q.receive(1000, Duration::from_secs(60)).await.unwrap();
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        drained.extend(batch.iter().map(|d| d.id));
        q.ack_batch(&batch.iter().map(|d| d.receipt()).collect::<Vec<_>>())
            .await
            .unwrap();
    }
    assert_eq!(drained, stored);
}
