//! Many writers on one file: "database is locked" never reaches the caller.
//!
//! Each client here has its own writer connection, as a process has: they contend for the
//! file's write lock exactly as separate processes do (SQLite's lock is on the file, not the
//! process), so this exercises the busy timeout and the engine's retries of `SQLITE_BUSY`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sqlmq::{Client, Message, QueueConfig, Sqlite};
use sqlmq_testkit::TestDb;
use tokio::sync::Mutex;

const CLIENTS: usize = 4;
const PER_PRODUCER: usize = 300;

/// Guarantee: four clients on one file, each producing (single sends and batches, some in
/// its own transaction that reads before it writes) and consuming at once, see no error, and
/// every message is delivered and acked exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_writers_on_one_file_never_see_a_locked_database() {
    let db = TestDb::<Sqlite>::new().await;
    let first = db.client().await;
    first
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let client = Client::<Sqlite>::open(&db.url).await.unwrap();
        let q = client.queue("q").await.unwrap();
        let producer = (client.clone(), q.clone());
        tasks.spawn(async move {
            let (client, q) = producer;
            for i in 0..PER_PRODUCER {
                let body = format!("{c}-{i}");
                match i % 3 {
                    0 => {
                        q.send(Message::new(body)).await.unwrap();
                    }
                    1 => {
                        // The caller's transaction: a read, then a send in it. Begun by
                        // Client::begin (BEGIN IMMEDIATE), it holds the write lock from the
                        // start, so the write cannot fail on a snapshot gone stale.
                        let mut tx = client.begin().await.unwrap();
                        let _: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlmq_queues")
                            .fetch_one(&mut *tx)
                            .await
                            .unwrap();
                        q.send_in(&mut tx, Message::new(body)).await.unwrap();
                        tx.commit().await.unwrap();
                    }
                    _ => {
                        q.send_batch(vec![Message::new(body)]).await.unwrap();
                    }
                }
            }
        });
        let seen = Arc::clone(&seen);
        tasks.spawn(async move {
            let mut idle = 0;
            while idle < 50 {
                let batch = q.receive(16, Duration::from_secs(30)).await.unwrap();
                if batch.is_empty() {
                    idle += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                idle = 0;
                let mut seen = seen.lock().await;
                for d in &batch {
                    assert!(seen.insert(d.id), "{} delivered twice", d.id);
                }
                drop(seen);
                let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
                let report = q.ack_batch(&receipts).await.unwrap();
                assert_eq!(report.acked, receipts.len());
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let q = first.queue("q").await.unwrap();
    // Consumers stop after a second without work; anything still pending is drained here.
    loop {
        let batch = q.receive(100, Duration::from_secs(30)).await.unwrap();
        if batch.is_empty() {
            break;
        }
        let mut seen = seen.lock().await;
        for d in &batch {
            assert!(seen.insert(d.id), "{} delivered twice", d.id);
        }
        let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
        q.ack_batch(&receipts).await.unwrap();
    }
    assert_eq!(seen.lock().await.len(), CLIENTS * PER_PRODUCER);
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    db.drop().await;
}
