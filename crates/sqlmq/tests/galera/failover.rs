//! A node killed with SIGKILL mid-run: a producer and a consumer that reach the cluster through
//! a proxy (the test's stand-in for HAProxy, ProxySQL or MaxScale: each new connection goes to
//! the first node that accepts it) carry on through the surviving nodes, and nothing whose send
//! or ack returned Ok is lost.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::worker::CancellationToken;
use sqlmq::{Client, Message, MessageId, MySql, QueueConfig};
use sqlmq_testkit::Proxy;

use crate::cluster::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_killed_mid_run_loses_nothing_acknowledged_and_clients_go_on() {
    let mut cluster = Cluster::start().await;
    cluster.create_database("app").await;
    let proxy = Proxy::start_any((0..3).map(|n| cluster.addr(n)).collect()).await;
    let url = proxy.url(&cluster.url(0, "app"));
    let client = Client::builder()
        .housekeeping_interval(Duration::from_millis(50))
        .connect_timeout(Duration::from_secs(3))
        .open::<MySql>(&url)
        .await
        .unwrap();
    client.migrate().await.unwrap();
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();

    let sent: Arc<Mutex<Vec<(MessageId, Instant)>>> = Arc::default();
    let stop = CancellationToken::new();
    let producer = {
        let (q, sent, stop) = (q.clone(), sent.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                let id = MessageId::new();
                // A send whose connection died with the node may fail after its retries; the
                // caller would send again with the same id (sqlmq never applies it twice).
                if q.send(Message::new("m").with_id(id)).await.is_ok() {
                    sent.lock().unwrap().push((id, Instant::now()));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let received: Arc<Mutex<HashSet<MessageId>>> = Arc::default();
    let acked_at: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let consumer = {
        let (q, received, acked_at, stop) =
            (q.clone(), received.clone(), acked_at.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                let Ok(batch) = q.receive(20, Duration::from_secs(3)).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if batch.is_empty() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
                if q.ack_batch(&receipts).await.is_ok() {
                    acked_at.lock().unwrap().push(Instant::now());
                }
                received.lock().unwrap().extend(batch.iter().map(|d| d.id));
            }
        })
    };

    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !received.lock().unwrap().is_empty(),
        "traffic before the kill"
    );
    cluster.kill9(0);
    let killed = Instant::now();
    cluster.wait_size(2).await;
    // Both go on through the surviving nodes.
    let deadline = killed + Duration::from_secs(30);
    loop {
        let producing = sent.lock().unwrap().last().is_some_and(|s| s.1 > killed);
        let consuming = acked_at.lock().unwrap().last().is_some_and(|t| *t > killed);
        if producing && consuming {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the clients did not go on after the kill"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "back through the other nodes {:?} after the kill",
        killed.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    producer.await.unwrap();
    consumer.await.unwrap();

    // Every message whose send returned Ok is in the cluster: received, or still stored (its
    // lease taken on the dead node comes back when it ends).
    let sent: HashSet<MessageId> = sent.lock().unwrap().iter().map(|s| s.0).collect();
    let drained = Instant::now() + Duration::from_secs(30);
    let mut received = received.lock().unwrap().clone();
    while !sent.is_subset(&received) {
        assert!(
            Instant::now() < drained,
            "{} sent messages never delivered",
            sent.difference(&received).count()
        );
        for d in q
            .receive(50, Duration::from_secs(30))
            .await
            .unwrap_or_default()
        {
            q.ack(d.receipt()).await.unwrap();
            received.insert(d.id);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
