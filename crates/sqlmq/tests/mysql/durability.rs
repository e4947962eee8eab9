//! Durable (guarantee 1): a message whose send returned Ok survives a `kill -9` of the database
//! server and its restart, and so does an ack that returned Ok.
//!
//! The test starts a private `mariadbd` on its own port and data directory (never the shared
//! server), writes to it from producers and a consumer, kills it with SIGKILL mid-traffic,
//! restarts it on the same data directory and checks every acknowledged write.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::{Client, Message, MessageId, QueueConfig};
use sqlmq_testkit::check_invariants_at;

use sqlmq_testkit::PrivateServer;

/// Short, so that messages in flight at the crash come back soon after the restart.
const LEASE: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_sends_and_acks_survive_kill_9_of_the_server() {
    let mut server = PrivateServer::install();
    server.start();
    server.wait_ready().await;
    PrivateServer::create_database(&server.url("mysql"), "app").await;

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
