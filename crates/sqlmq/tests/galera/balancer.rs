//! A client whose pooled connections a balancer spreads over the three nodes (round robin):
//! `migrate` works (its SKIP LOCKED self-test notices that its two connections reached different
//! nodes and does not mistake the cluster for a server that ignores SKIP LOCKED), and a queue
//! loses nothing. A claim made through one node and acked through another a moment later may
//! find the lease not yet applied there (README, "Running on a cluster": `wsrep_sync_wait`):
//! such an ack reports the lease lost and the message comes back when the lease ends.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use sqlmq::{Client, Message, MessageId, MySql, QueueConfig};
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
        .send_batch((0..300).map(|i| Message::new(format!("m{i}"))).collect())
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    let mut acked = HashSet::new();
    let mut lost_leases = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.len() < sent.len() {
        assert!(
            Instant::now() < deadline,
            "{} of {} acked",
            acked.len(),
            sent.len()
        );
        let batch = q.receive(20, Duration::from_secs(2)).await.unwrap();
        let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
        let report = q.ack_batch(&receipts).await.unwrap();
        lost_leases += report.lost.len();
        let lost: HashSet<_> = report.lost.iter().map(|r| r.id).collect();
        acked.extend(batch.iter().map(|d| d.id).filter(|id| !lost.contains(id)));
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(acked, sent, "every message acked");
    eprintln!("acks that found their lease not yet applied on their node: {lost_leases}");
}
