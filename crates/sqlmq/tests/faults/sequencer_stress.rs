//! The sequencer under a bounded randomized stress: producers commit and roll back in random
//! order while their transactions stay open a random while, three clients run sequencing steps
//! at once, every statement of a step waits a random while (fail-point jitter), and a broadcast
//! reader follows the log meanwhile. It would catch a recurrence of the loss `sqlmq bench` once
//! saw: a record committed and never logged, logged twice, an offset left empty, or a reader
//! shown an offset before one below it. Two minutes by default; `SQLMQ_STRESS_SECONDS` changes it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::failpoints::jitter;
use sqlmq::topic::StartAt;
use sqlmq::{GroupConfig, MySql, Record, TopicConfig};
use sqlmq_testkit::TestDb;

const PARTITIONS: u32 = 4;
const PRODUCERS: usize = 8;
const SEQUENCERS: usize = 3;

/// Bodies whose publish committed, and those rolled back.
#[derive(Default)]
struct Outcomes {
    committed: HashSet<String>,
    rolled_back: HashSet<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_commit_orders_and_timings_never_lose_skip_or_repeat_an_offset() {
    let _turn = crate::serial().await;
    let seconds = std::env::var("SQLMQ_STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let db = TestDb::<MySql>::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("s", TopicConfig::default().partitions(PARTITIONS))
        .await
        .unwrap();
    let watch = t
        .create_group("watch", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    let _shake: Vec<_> = [
        "sequence.locked",
        "sequence.claimed",
        "sequence.logged",
        "sequence.deleted",
        "sequence.before_commit",
        "publish.before_commit",
    ]
    .into_iter()
    .map(|p| jitter(p, Duration::from_millis(3)))
    .collect();

    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let mut tasks = Vec::new();
    for p in 0..PRODUCERS {
        let client = db.client().await;
        let outcomes = outcomes.clone();
        tasks.push(tokio::spawn(async move {
            let t = client.topic("s").await.unwrap();
            let mut n = 0;
            while Instant::now() < deadline {
                let count = rand::random_range(1..=4);
                let hold = Duration::from_micros(rand::random_range(0..4000));
                let roll = rand::random_range(0..10) == 0;
                let own_tx = rand::random_range(0..10) < 7;
                let bodies: Vec<String> = (0..count)
                    .map(|_| {
                        n += 1;
                        format!("p{p}-{n}")
                    })
                    .collect();
                let records = bodies
                    .iter()
                    .map(|b| Record::new(b.as_str()).partition(rand::random_range(0..PARTITIONS)))
                    .collect();
                if own_tx {
                    // Commit order is decided by how long each producer holds its transaction.
                    let mut tx = client.begin().await.unwrap();
                    t.publish_batch_in(&mut tx, records).await.unwrap();
                    tokio::time::sleep(hold).await;
                    if roll {
                        tx.rollback().await.unwrap();
                        outcomes.lock().unwrap().rolled_back.extend(bodies);
                    } else {
                        tx.commit().await.unwrap();
                        outcomes.lock().unwrap().committed.extend(bodies);
                    }
                } else {
                    t.publish_batch(records).await.unwrap();
                    outcomes.lock().unwrap().committed.extend(bodies);
                }
            }
        }));
    }
    for _ in 0..SEQUENCERS {
        let client = db.client().await;
        tasks.push(tokio::spawn(async move {
            let t = client.topic("s").await.unwrap();
            while Instant::now() < deadline {
                t.sequence().await.unwrap();
                let pause = rand::random_range(0..3000);
                tokio::time::sleep(Duration::from_micros(pause)).await;
            }
        }));
    }

    // The reader follows the log while it grows: each partition's offsets must come 0, 1, 2…
    let mut reader = watch.reader("r").await.unwrap();
    let mut seen: HashMap<u32, i64> = HashMap::new();
    let mut read: Vec<String> = Vec::new();
    let mut follow = async |reader: &mut sqlmq::topic::BroadcastReader<MySql>| {
        let mut got = 0;
        for r in reader.poll(200).await.unwrap() {
            let next = seen.entry(r.partition).or_insert(0);
            assert_eq!(
                r.offset, *next,
                "partition {}: a hole or a repeat",
                r.partition
            );
            *next += 1;
            read.push(String::from_utf8(r.body).unwrap());
            got += 1;
        }
        got
    };
    while Instant::now() < deadline {
        if follow(&mut reader).await == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    t.sequence().await.unwrap();
    while follow(&mut reader).await > 0 {}

    let outcomes = std::mem::take(&mut *outcomes.lock().unwrap());
    assert!(
        outcomes.committed.len() > 500,
        "{} records",
        outcomes.committed.len()
    );
    assert!(!outcomes.rolled_back.is_empty());
    // The log: every committed record once, nothing rolled back, offsets dense per partition.
    let rows = db
        .query(
            "SELECT partition_no, msg_offset, body FROM sqlmq_topic_log ORDER BY 1, 2",
            &[],
        )
        .await;
    let mut by_partition: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let mut logged: HashMap<String, usize> = HashMap::new();
    for row in &rows {
        by_partition
            .entry(row[0].int())
            .or_default()
            .push(row[1].int());
        *logged.entry(row[2].text()).or_default() += 1;
    }
    for (partition, offsets) in &by_partition {
        let dense: Vec<i64> = (0..offsets.len() as i64).collect();
        assert!(
            offsets == &dense,
            "partition {partition}: offsets not dense"
        );
    }
    let repeated: Vec<_> = logged.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "logged twice: {repeated:?}");
    let logged: HashSet<String> = logged.into_keys().collect();
    let lost: Vec<_> = outcomes.committed.difference(&logged).collect();
    assert!(lost.is_empty(), "committed, never logged: {lost:?}");
    let ghosts: Vec<_> = logged.intersection(&outcomes.rolled_back).collect();
    assert!(ghosts.is_empty(), "rolled back, yet logged: {ghosts:?}");
    assert_eq!(logged, outcomes.committed);
    let pending = db.scalar("SELECT COUNT(*) FROM sqlmq_topic_pending").await;
    assert_eq!(pending, 0, "nothing stranded");
    // The reader saw exactly the log, in order per partition.
    assert_eq!(read.len(), rows.len());
    assert_eq!(read.into_iter().collect::<HashSet<_>>(), outcomes.committed);
    db.drop().await;
}
