//! Traffic spread over the nodes: every node writes (the multi-writer topology, the hardest
//! case), so claims on different nodes race for the same rows and lose at certification.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sqlmq::topic::StartAt;
use sqlmq::{Client, GroupConfig, Message, MessageId, MySql, QueueConfig, Record, TopicConfig};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use crate::cluster::Cluster;

const LEASE: Duration = Duration::from_secs(60);

/// The engine's metrics, recorded in memory for this test binary.
fn metrics() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        snapshotter
    })
}

/// The sum of counter `name` over the series whose labels include `label`.
fn counter(name: &str, label: (&str, &str)) -> u64 {
    metrics()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            key.key().name() == name
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == label.0 && l.value() == label.1)
        })
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum()
}

/// A migrated client on `database` through node `n`.
async fn client(cluster: &Cluster, n: usize, database: &str) -> Client<MySql> {
    Client::builder()
        .housekeeping_interval(Duration::from_millis(50))
        .open::<MySql>(&cluster.url(n, database))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queues_and_topic_groups_across_nodes_lose_nothing_and_keep_offsets_dense() {
    metrics();
    let cluster = Cluster::start().await;
    cluster.create_database("app").await;
    let clients = [
        client(&cluster, 0, "app").await,
        client(&cluster, 1, "app").await,
        client(&cluster, 2, "app").await,
    ];
    clients[0].migrate().await.unwrap();
    for c in &clients[1..] {
        // The schema replicated: every node's client finds it.
        c.migrate().await.unwrap();
    }

    // The node's own retry of aborted autocommit statements is off in sqlmq's sessions: it
    // would run the writes of a claim's or an ack's second round trip outside their
    // transaction (docs/design/round-trips.md). Without it this test loses leases.
    // And reads wait for the node to catch up with the cluster (`wsrep_sync_wait` bit 1; see
    // balancer.rs for what it prevents).
    for c in &clients {
        // Scripts go to the nodes as compound statements (`store/mysql/script.rs`).
        assert!(c.server().galera);
        let mut conn = c.pool().acquire().await.unwrap();
        let (retry, sync_wait): (u64, u64) =
            sqlx::query_as("SELECT @@wsrep_retry_autocommit, @@wsrep_sync_wait")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        assert_eq!(retry, 0);
        assert_eq!(sync_wait & 1, 1);
    }

    // A queue: producers on nodes 0 and 1, consumers on nodes 1 and 2.
    clients[0]
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let mut producers = Vec::new();
    for (p, client) in clients[..2].iter().enumerate() {
        let q = client.queue("q").await.unwrap();
        producers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..300 {
                let sent = q.send(Message::new(format!("p{p}-{i}"))).await.unwrap();
                ids.push(sent.id);
            }
            ids
        }));
    }
    let mut consumers = Vec::new();
    for client in &clients[1..] {
        let q = client.queue("q").await.unwrap();
        consumers.push(tokio::spawn(async move {
            let mut got: Vec<MessageId> = Vec::new();
            let mut idle_since = Instant::now();
            while idle_since.elapsed() < Duration::from_secs(5) {
                let batch = q.receive(20, LEASE).await.unwrap();
                if batch.is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                idle_since = Instant::now();
                let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
                let report = q.ack_batch(&receipts).await.unwrap();
                assert!(report.lost.is_empty(), "an ack lost its lease: {report:?}");
                got.extend(batch.iter().map(|d| d.id));
            }
            got
        }));
    }
    let mut sent = HashSet::new();
    for p in producers {
        sent.extend(p.await.unwrap());
    }
    let mut seen: HashMap<MessageId, usize> = HashMap::new();
    for c in consumers {
        for id in c.await.unwrap() {
            *seen.entry(id).or_default() += 1;
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "delivered twice with 60 s leases: {twice:?}"
    );
    assert_eq!(
        seen.keys().copied().collect::<HashSet<_>>(),
        sent,
        "every message acked"
    );
    // Claims on two nodes took the same rows (`SKIP LOCKED` sees only local locks); the loser
    // failed certification at COMMIT (1213) and was retried like a deadlock, and counted.
    let certification = counter("sqlmq_db_retries_total", ("class", "retry_transaction"));
    assert!(certification > 0, "no certification failure was retried");
    eprintln!("transactions retried after a certification failure: {certification}");

    // A topic: publishers on all three nodes (each sequencing on its own node), one cluster
    // group with a member on each node.
    let t = clients[0]
        .create_topic("t", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    t.create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let mut publishers = Vec::new();
    for c in &clients {
        let t = c.topic("t").await.unwrap();
        publishers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..150 {
                ids.push(
                    t.publish(Record::new(format!("r{i}")).key(format!("k{}", i % 7)))
                        .await
                        .unwrap()
                        .id,
                );
            }
            ids
        }));
    }
    let mut published = HashSet::new();
    for p in publishers {
        published.extend(p.await.unwrap());
    }
    let mut members = Vec::new();
    for c in &clients {
        let t = c.topic("t").await.unwrap();
        members.push(tokio::spawn(async move {
            t.sequence().await.unwrap();
            let g = t.group("g").await.unwrap();
            let mut got = Vec::new();
            let mut idle_since = Instant::now();
            while idle_since.elapsed() < Duration::from_secs(5) {
                let batch = g.receive(20, LEASE).await.unwrap();
                if batch.is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                idle_since = Instant::now();
                let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
                g.ack_batch(&receipts).await.unwrap();
                got.extend(
                    batch
                        .iter()
                        .map(|d| (d.id, d.partition.unwrap(), d.offset.unwrap())),
                );
            }
            got
        }));
    }
    let mut delivered: HashMap<MessageId, usize> = HashMap::new();
    let mut offsets: HashMap<u32, Vec<(i64, MessageId)>> = HashMap::new();
    for m in members {
        for (id, p, o) in m.await.unwrap() {
            *delivered.entry(id).or_default() += 1;
            offsets.entry(p).or_default().push((o, id));
        }
    }
    assert_eq!(delivered.keys().copied().collect::<HashSet<_>>(), published);
    assert!(
        delivered.values().all(|n| *n == 1),
        "a record delivered twice"
    );
    for (p, mut got) in offsets {
        got.sort_unstable();
        let o: Vec<i64> = got.iter().map(|(o, _)| *o).collect();
        if o != (0..o.len() as i64).collect::<Vec<_>>() {
            let got: Vec<_> = got
                .iter()
                .map(|(o, id)| format!("{o}:{}", id.as_uuid().simple()))
                .collect();
            let retries: Vec<String> = metrics()
                .snapshot()
                .into_vec()
                .into_iter()
                .filter(|(key, ..)| key.key().name().contains("retries"))
                .map(|(key, _, _, value)| format!("{:?} {value:?}", key.key()))
                .collect();
            panic!(
                "partition {p}: offsets not dense: {got:?}\nretries: {retries:#?}\nthe log on each node: {}",
                log_seen(&cluster, p).await
            );
        }
    }
}

/// What each node holds of partition `p` of topic `t` in database `app`: its end, the log's
/// rows and offsets, and what is still pending (for a failure's message).
async fn log_seen(cluster: &Cluster, p: u32) -> String {
    use sqlx::Connection;
    let mut out = String::new();
    for n in 0..3 {
        let mut conn = sqlx::MySqlConnection::connect(&cluster.url(n, "app"))
            .await
            .unwrap();
        let end: Vec<(i64,)> =
            sqlx::query_as("SELECT next_offset FROM sqlmq_topic_partitions WHERE partition_no = ?")
                .bind(p)
                .fetch_all(&mut conn)
                .await
                .unwrap();
        let log: Vec<(i64, String)> = sqlx::query_as(
            "SELECT msg_offset, CAST(LOWER(HEX(id)) AS CHAR) FROM sqlmq_topic_log WHERE partition_no = ? \
             ORDER BY msg_offset",
        )
        .bind(p)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        let pending: Vec<(String,)> = sqlx::query_as(
            "SELECT CAST(LOWER(HEX(id)) AS CHAR) FROM sqlmq_topic_pending WHERE partition_no = ?",
        )
        .bind(p)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        out += &format!("\nnode {n}: end {end:?}, pending {pending:?}, log {log:?}");
    }
    out
}
