//! A client whose pooled connections a balancer spreads over the three nodes (round robin):
//! `migrate` works (its SKIP LOCKED self-test notices that its two connections reached different
//! nodes and does not mistake the cluster for a server that ignores SKIP LOCKED), and a queue
//! loses nothing, and no ack loses its lease: an ack sent through one node a moment after the
//! claim committed through another finds the lease, because sqlmq's sessions on a Galera node
//! wait for the node to catch up before a transaction starts (`wsrep_sync_wait` bit 1; without
//! it such acks reported their leases lost and the messages came back when the leases ended).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::error::ErrorClass;
use sqlmq::{Client, Error, Message, MessageId, MySql, QueueConfig};
use sqlmq_testkit::Proxy;

use crate::cluster::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_spread_over_the_nodes_migrate_and_lose_nothing() {
    let cluster = Cluster::start().await;
    cluster.create_database("app").await;
    let proxy = Proxy::start_round_robin((0..3).map(|n| cluster.addr(n)).collect()).await;
    let client = Client::builder()
        .housekeeping_interval(Duration::from_millis(50))
        .open::<MySql>(&proxy.url(&cluster.url(0, "app")))
        .await
        .unwrap();
    client
        .migrate()
        .await
        .expect("the self-test does not refuse a cluster");
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let sent: HashSet<MessageId> = q
        .send_batch((0..2000).map(|i| Message::new(format!("m{i}"))).collect())
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    // Eight consumers at once, so that the pool holds connections on every node and a claim
    // and its ack often go through different ones.
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let lost_leases = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut consumers = Vec::new();
    for _ in 0..8 {
        let (q, acked, lost_leases, total) =
            (q.clone(), acked.clone(), lost_leases.clone(), sent.len());
        consumers.push(tokio::spawn(async move {
            while acked.lock().unwrap().len() < total {
                assert!(Instant::now() < deadline, "not all acked in time");
                // Leases long enough that only a node behind the claim's could lose one, never a
                // slow machine (2 s leases ran out under load in CI: 80 acks reported lost).
                let batch = match q.receive(20, Duration::from_secs(30)).await {
                    Ok(batch) => batch,
                    // Consumers on different nodes claim the same head rows (SKIP LOCKED skips
                    // only a node's own locks) and certification rolls all but one back; on a
                    // loaded machine one consumer can lose every one of sqlmq's bounded
                    // retries. A consumer tries again, as the worker runtime does.
                    Err(e) if e.is_retryable() => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                    Err(e) => panic!("receive: {e}"),
                };
                if batch.is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
                // An ack rolled back the same way is tried again too (nothing of it committed).
                let report = loop {
                    match q.ack_batch(&receipts).await {
                        Ok(report) => break report,
                        Err(e) if rolled_back(&e) => {
                            assert!(Instant::now() < deadline, "ack: {e}");
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Err(e) => panic!("ack: {e}"),
                    }
                };
                lost_leases.fetch_add(report.lost.len(), Ordering::Relaxed);
                let lost: HashSet<_> = report.lost.iter().map(|r| r.id).collect();
                let mut acked = acked.lock().unwrap();
                acked.extend(batch.iter().map(|d| d.id).filter(|id| !lost.contains(id)));
            }
        }));
    }
    for c in consumers {
        c.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let lost_leases = lost_leases.load(Ordering::Relaxed);
    assert_eq!(acked, sent, "every message acked");
    assert_eq!(
        lost_leases, 0,
        "acks that found their lease not yet applied on their node"
    );
}

/// Whether the server rolled the failed unit back (a deadlock, a certification failure, a lock
/// wait timeout): nothing of it committed.
fn rolled_back(e: &Error) -> bool {
    matches!(
        e.class(),
        Some(ErrorClass::RetryTransaction | ErrorClass::RetryStatement)
    )
}
