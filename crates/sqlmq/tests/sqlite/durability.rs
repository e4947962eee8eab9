//! Durable once `send` returns: a producer process killed with `kill -9` mid-stream has every
//! message it was told was sent in the file, and the file opens cleanly afterwards.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use sqlmq::{Client, Message, MessageId, QueueConfig, Sqlite};
use sqlmq_testkit::TestDb;

/// Environment variable that makes [`child_producer`] run (with the database URL).
const CHILD_URL: &str = "SQLMQ_TEST_CHILD_URL";

/// The child: send single messages and batches forever, printing each id after its send
/// returned Ok. A no-op unless the parent set [`CHILD_URL`].
#[tokio::test]
async fn child_producer() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let client = Client::<Sqlite>::open(&url).await.unwrap();
    let q = client.queue("q").await.unwrap();
    for i in 0u64.. {
        if i % 2 == 0 {
            let sent = q.send(Message::new(format!("{i}"))).await.unwrap();
            println!("{}", sent.id);
        } else {
            let batch: Vec<Message> = (0..10).map(|j| Message::new(format!("{i}.{j}"))).collect();
            for sent in q.send_batch(batch).await.unwrap() {
                println!("{}", sent.id);
            }
        }
    }
}

/// Guarantee: every message whose `send` returned Ok before a `kill -9` of its process is in
/// the database afterwards; nothing half-written is visible.
#[tokio::test]
async fn a_producer_killed_mid_stream_loses_no_acknowledged_message() {
    let db = TestDb::<Sqlite>::new().await;
    let client = db.client().await;
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "durability::child_producer", "--nocapture"])
        .env(CHILD_URL, &db.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acknowledged = Vec::new();
    let kill_after = 200 + rand::random::<u32>() as usize % 800;
    while acknowledged.len() < kill_after {
        let line = lines.next().expect("the child stopped early").unwrap();
        if let Ok(id) = line.trim().parse::<MessageId>() {
            acknowledged.push(id);
        }
    }
    child.kill().unwrap(); // SIGKILL
    // Ids printed before the kill are acknowledged too.
    for line in lines.map_while(Result::ok) {
        if let Ok(id) = line.trim().parse::<MessageId>() {
            acknowledged.push(id);
        }
    }
    child.wait().unwrap();
    let stats = q.stats().await.unwrap();
    assert!(stats.ready as usize >= acknowledged.len(), "{stats:?}");
    let mut delivered = std::collections::HashSet::new();
    loop {
        let batch = q
            .receive(1000, std::time::Duration::from_secs(60))
            .await
            .unwrap();
        if batch.is_empty() {
            break;
        }
        delivered.extend(batch.iter().map(|d| d.id));
    }
    let lost: Vec<_> = acknowledged
        .iter()
        .filter(|id| !delivered.contains(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged messages lost: {lost:?}",
        lost.len()
    );
    assert_eq!(
        delivered.len() as u64,
        stats.ready,
        "what the stats count is what is there"
    );
    db.drop().await;
}
