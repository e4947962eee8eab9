//! Randomized out-of-order commits (the no skipped offsets guarantee of the guide (docs/guide/src/guarantees.md)): 8 producers publish inside their own
//! transactions with random commit delays and rollbacks, while 4 cluster-group members (each
//! with its own client, one of them failing some records) and 2 broadcast readers run
//! throughout. Every committed record is seen exactly once per broadcast reader, in offset
//! order per partition, and at least once by the group; nothing rolled back is ever seen;
//! offsets are dense per partition.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use sqlmq::topic::StartAt;
use sqlmq::worker::CancellationToken;
use sqlmq::{GroupConfig, Record, TopicConfig};
use sqlmq_testkit::{TestBackend, TestDb, eventually_async};

const PRODUCERS: usize = 8;
const TRANSACTIONS: usize = 40;
const MEMBERS: usize = 4;
const PARTITIONS: u32 = 4;
const LEASE: Duration = Duration::from_secs(30);

/// What one consumer saw: (partition, offset, body), in the order it saw them.
type Seen = Arc<Mutex<Vec<(u32, i64, String)>>>;

pub(crate) async fn random_commit_delays_and_rollbacks_lose_skip_and_invent_nothing<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let topic = client
        .create_topic("s", TopicConfig::default().partitions(PARTITIONS))
        .await
        .unwrap();
    let group = topic
        .create_group("c", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    topic
        .create_group("b", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    let stop = CancellationToken::new();

    // Cluster members, each on its own client (its own owner id and pool).
    let group_seen: Seen = Arc::default();
    let mut members = Vec::new();
    for m in 0..MEMBERS {
        let client = db.client().await;
        let g = client.topic("s").await.unwrap().group("c").await.unwrap();
        let (seen, stop) = (group_seen.clone(), stop.clone());
        members.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ m as u64);
            while !stop.is_cancelled() {
                let batch = g.receive(10, LEASE).await.unwrap();
                if batch.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let mut acks = Vec::new();
                for d in batch {
                    let body = String::from_utf8(d.body.clone()).unwrap();
                    seen.lock()
                        .unwrap()
                        .push((d.partition.unwrap(), d.offset.unwrap(), body));
                    // Member 0 fails one record in ten: it comes back on the retry ladder.
                    if m == 0 && rng.random_ratio(1, 10) {
                        g.nack(d.receipt(), Some(Duration::ZERO), "flaky")
                            .await
                            .unwrap();
                    } else {
                        acks.push(d.receipt());
                    }
                }
                g.ack_batch(&acks).await.unwrap();
            }
        }));
    }

    // Broadcast readers, each on its own client.
    let mut readers = Vec::new();
    for r in 0..2 {
        let client = db.client().await;
        let b = client.topic("s").await.unwrap().group("b").await.unwrap();
        let mut reader = b.reader(&format!("r{r}")).await.unwrap();
        let seen: Seen = Arc::default();
        let (out, stop) = (seen.clone(), stop.clone());
        readers.push((
            seen,
            tokio::spawn(async move {
                while !stop.is_cancelled() {
                    let records = reader.poll(20).await.unwrap();
                    if records.is_empty() {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    let mut out = out.lock().unwrap();
                    for rec in records {
                        out.push((
                            rec.partition,
                            rec.offset,
                            String::from_utf8(rec.body).unwrap(),
                        ));
                    }
                }
            }),
        ));
    }

    // Producers: each transaction publishes 1 to 3 records (random keys), waits a random
    // while with its rows written and uncommitted, then commits or (one in five) rolls back.
    let committed: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let rolled_back: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let (client, topic) = (client.clone(), topic.clone());
        let (committed, rolled_back) = (committed.clone(), rolled_back.clone());
        producers.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(100 + p as u64));
            for t in 0..TRANSACTIONS {
                // Begun as the backend needs (SQLite: BEGIN IMMEDIATE; a deferred transaction
                // that reads, then writes, fails at once when another client wrote meanwhile).
                let mut tx = client.begin().await.unwrap();
                let n = rng.random_range(1..=3);
                let bodies: Vec<String> = (0..n).map(|i| format!("p{p}-t{t}-r{i}")).collect();
                let records = bodies
                    .iter()
                    .map(|b| Record::new(b.clone()).key(format!("k{}", rng.random_range(0..50))))
                    .collect();
                topic.publish_batch_in(&mut tx, records).await.unwrap();
                tokio::time::sleep(Duration::from_millis(rng.random_range(0..30))).await;
                if rng.random_ratio(1, 5) {
                    tx.rollback().await.unwrap();
                    rolled_back.lock().unwrap().extend(bodies);
                } else {
                    tx.commit().await.unwrap();
                    committed.lock().unwrap().extend(bodies);
                }
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
    let committed = committed.lock().unwrap().clone();
    let rolled_back = rolled_back.lock().unwrap().clone();
    assert!(!committed.is_empty() && !rolled_back.is_empty());

    // Everything committed reaches every consumer.
    let all_seen = |seen: &Seen| {
        seen.lock()
            .unwrap()
            .iter()
            .map(|(_, _, b)| b.clone())
            .collect::<BTreeSet<_>>()
    };
    eventually_async(
        Duration::from_secs(60),
        "every consumer caught up",
        || async {
            let done = all_seen(&group_seen).is_superset(&committed)
                && readers
                    .iter()
                    .all(|(seen, _)| seen.lock().unwrap().len() >= committed.len());
            done.then_some(())
        },
    )
    .await;
    eventually_async(Duration::from_secs(30), "the group settled", || async {
        let settled = group.lag().await.unwrap().unconsumed == 0
            && group.retries(1).await.unwrap().is_empty();
        settled.then_some(())
    })
    .await;
    // A moment more for anything that should not be there to show up.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.cancel();
    for m in members {
        m.await.unwrap();
    }

    // Nothing rolled back, nothing invented, everything committed.
    let group_bodies = all_seen(&group_seen);
    assert_eq!(
        group_bodies, committed,
        "the group saw exactly the committed records"
    );
    assert!(group_bodies.is_disjoint(&rolled_back));

    // Offsets: one per committed record, dense per partition from 0, the same in every view.
    let mut offsets: BTreeMap<(u32, i64), String> = BTreeMap::new();
    for (part, off, body) in group_seen.lock().unwrap().iter() {
        if let Some(other) = offsets.insert((*part, *off), body.clone()) {
            assert_eq!(&other, body, "offset {part}:{off} holds one record");
        }
    }
    assert_eq!(offsets.len(), committed.len());
    for part in 0..PARTITIONS {
        let in_part: Vec<i64> = offsets
            .keys()
            .filter(|(p, _)| *p == part)
            .map(|(_, o)| *o)
            .collect();
        let dense: Vec<i64> = (0..in_part.len() as i64).collect();
        assert_eq!(in_part, dense, "offsets of partition {part} are dense");
    }

    for (r, (seen, task)) in readers.into_iter().enumerate() {
        task.await.unwrap();
        let seen = seen.lock().unwrap().clone();
        let unique: HashSet<&String> = seen.iter().map(|(_, _, b)| b).collect();
        assert_eq!(unique.len(), seen.len(), "reader {r} saw a record twice");
        assert_eq!(seen.len(), committed.len(), "reader {r} saw every record");
        for (part, off, body) in &seen {
            assert_eq!(
                offsets.get(&(*part, *off)),
                Some(body),
                "reader {r} at {part}:{off}"
            );
        }
        for part in 0..PARTITIONS {
            let order: Vec<i64> = seen
                .iter()
                .filter(|(p, _, _)| *p == part)
                .map(|(_, o, _)| *o)
                .collect();
            let dense: Vec<i64> = (0..order.len() as i64).collect();
            assert_eq!(
                order, dense,
                "reader {r} reads partition {part} in offset order"
            );
        }
    }
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [random_commit_delays_and_rollbacks_lose_skip_and_invent_nothing]
);
