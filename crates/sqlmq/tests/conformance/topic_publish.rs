//! Publishing and sequencing: atomic batches, idempotent ids, dense offsets in commit order.
//!
//! Where offsets are given after commit (MySQL: records wait in `topic_pending` for a
//! sequencer), a late committer's records must never be skipped; where the publishing
//! transaction gives them (SQLite: one writer at a time), a publisher waits for the open one,
//! and nothing is visible before its commit. The scenarios check commit order either way.

use std::time::Duration;

use sqlmq::{Record, TopicConfig};
use sqlmq_testkit::{TestBackend, TestDb, eventually_async};

use crate::late_committer::{finishes_while_a_is_open, publish_in_task};

/// Records waiting for their offsets: the rows of `topic_pending`, where the backend has one
/// (a backend whose publish gives the offsets has none, and nothing ever waits).
async fn unsequenced<B: TestBackend>(db: &TestDb<B>) -> i64 {
    if db.tables().await.iter().any(|t| t == "sqlmq_topic_pending") {
        db.count("topic_pending").await
    } else {
        0
    }
}

/// (partition, offset, body) of every logged record, in partition/offset order.
async fn log<B: TestBackend>(db: &TestDb<B>) -> Vec<(i32, i64, String)> {
    db.query(
        "SELECT partition_no, msg_offset, body FROM sqlmq_topic_log ORDER BY partition_no, msg_offset",
        &[],
    )
    .await
    .iter()
    .map(|r| (r[0].int() as i32, r[1].int(), r[2].text()))
    .collect()
}

pub(crate) async fn published_records_get_dense_offsets_per_partition<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("t", TopicConfig::default().partitions(3))
        .await
        .unwrap();
    for i in 0..30 {
        t.publish(Record::new(format!("{i}")).key(format!("k{}", i % 5)))
            .await
            .unwrap();
    }
    let batch: Vec<Record> = (30..60)
        .map(|i| Record::new(format!("{i}")).partition(i % 3))
        .collect();
    t.publish_batch(batch).await.unwrap();
    let logged = eventually_async(Duration::from_secs(10), "all 60 sequenced", || async {
        let l = log(&db).await;
        (l.len() == 60).then_some(l)
    })
    .await;
    for p in 0..3 {
        let offsets: Vec<i64> = logged.iter().filter(|r| r.0 == p).map(|r| r.1).collect();
        let expected: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, expected, "partition {p} is dense from 0");
    }
    // Same key, same partition, in publish order.
    let k0: Vec<&(i32, i64, String)> = logged
        .iter()
        .filter(|r| r.2.parse::<i32>().unwrap() < 30 && r.2.parse::<i32>().unwrap() % 5 == 0)
        .collect();
    assert!(
        k0.windows(2).all(|w| w[0].0 == w[1].0 && w[0].1 < w[1].1),
        "{k0:?}"
    );
    assert_eq!(unsequenced(&db).await, 0);
    db.drop().await;
}

pub(crate) async fn publishing_an_id_twice_is_a_no_op<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("t", TopicConfig::default())
        .await
        .unwrap();
    let r = Record::new("once");
    let first = t.publish(r.clone()).await.unwrap();
    assert!(!first.duplicate);
    // pending or already logged: a duplicate either way
    assert!(t.publish(r.clone()).await.unwrap().duplicate);
    t.sequence().await.unwrap();
    assert!(t.publish(r.clone()).await.unwrap().duplicate);
    let batch = t
        .publish_batch(vec![r.clone(), Record::new("new")])
        .await
        .unwrap();
    assert!(batch[0].duplicate && !batch[1].duplicate);
    t.sequence().await.unwrap();
    assert_eq!(log(&db).await.len(), 2);
    db.drop().await;
}

pub(crate) async fn a_late_committer_gets_a_later_offset_and_rolled_back_records_never_appear<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("t", TopicConfig::default())
        .await
        .unwrap();
    let mut a = client.begin().await.unwrap();
    t.publish_in(&mut a, Record::new("A, inserted first"))
        .await
        .unwrap();
    assert!(log(&db).await.is_empty(), "nothing visible before commit");
    // While A is open: a publish that will roll back, and B, which commits, each in a task of
    // its own. Where writers run concurrently, both write and B commits before A does; with
    // one writer at a time, both wait for A's commit.
    let (rollback, rolled_back) = tokio::sync::oneshot::channel::<()>();
    let (wrote, written) = tokio::sync::oneshot::channel::<()>();
    let (c, tt) = (client.clone(), t.clone());
    let rolled = tokio::spawn(async move {
        let mut tx = c.begin().await.unwrap();
        tt.publish_in(&mut tx, Record::new("rolled back"))
            .await
            .unwrap();
        let _ = wrote.send(());
        let _ = rolled_back.await;
        tx.rollback().await.unwrap();
    });
    let mut b = publish_in_task(&client, &t, "B, committed first");
    let concurrent = finishes_while_a_is_open::<B>(async {
        written.await.unwrap();
        (&mut b).await.unwrap();
    })
    .await;
    t.sequence().await.unwrap(); // A is still uncommitted: skipped, not waited for
    let (a_row, b_row) = (
        "A, inserted first".to_owned(),
        "B, committed first".to_owned(),
    );
    let before_a = if concurrent {
        vec![(0, 0, b_row.clone())]
    } else {
        Vec::new()
    };
    assert_eq!(log(&db).await, before_a);
    a.commit().await.unwrap();
    let _ = rollback.send(());
    rolled.await.unwrap();
    if !concurrent {
        b.await.unwrap();
    }
    t.sequence().await.unwrap();
    let expected = if concurrent {
        vec![(0, 0, b_row), (0, 1, a_row)]
    } else {
        vec![(0, 0, a_row), (0, 1, b_row)]
    };
    assert_eq!(log(&db).await, expected, "offsets in commit order");
    db.drop().await;
}

pub(crate) async fn partitions_report_their_ranges_and_delete_topic_removes_everything<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("gone", TopicConfig::default().partitions(3))
        .await
        .unwrap();
    let g = t
        .create_group(
            "g",
            sqlmq::GroupConfig::default(),
            sqlmq::topic::StartAt::Earliest,
        )
        .await
        .unwrap();
    let records = (0..2500)
        .map(|i| Record::new(format!("{i}")).partition(i % 3))
        .collect();
    t.publish_batch(records).await.unwrap();
    t.sequence().await.unwrap();
    let parts = t.partitions().await.unwrap();
    let ranges: Vec<(u32, i64, i64)> = parts
        .iter()
        .map(|p| (p.partition, p.start, p.end))
        .collect();
    assert_eq!(ranges, vec![(0, 0, 834), (1, 0, 833), (2, 0, 833)]);
    assert!(parts.iter().all(|p| p.bytes > 0));
    let got = g.receive(10, Duration::from_secs(30)).await.unwrap();
    g.nack(got[0].receipt(), None, "later").await.unwrap();
    // One more, published in the caller's transaction (still waiting for its offset where
    // offsets are given after commit).
    let mut tx = client.begin().await.unwrap();
    t.publish_in(&mut tx, Record::new("pending")).await.unwrap();
    tx.commit().await.unwrap();

    client.delete_topic("gone").await.unwrap();
    assert!(matches!(
        client.topic("gone").await,
        Err(sqlmq::Error::UnknownTopic(_))
    ));
    for table in [
        "topics",
        "topic_partitions",
        "topic_log",
        "consumer_groups",
        "group_cursors",
        "group_leases",
        "group_retries",
        "group_history",
    ] {
        assert_eq!(db.count(table).await, 0, "{table} after delete");
    }
    assert_eq!(unsequenced(&db).await, 0, "topic_pending after delete");
    assert!(matches!(
        client.delete_topic("gone").await,
        Err(sqlmq::Error::UnknownTopic(_))
    ));
    // The name is free again, and the new topic starts empty.
    let again = client
        .create_topic("gone", TopicConfig::default())
        .await
        .unwrap();
    assert_eq!(again.partitions().await.unwrap()[0].end, 0);
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [published_records_get_dense_offsets_per_partition, publishing_an_id_twice_is_a_no_op, a_late_committer_gets_a_later_offset_and_rolled_back_records_never_appear, partitions_report_their_ranges_and_delete_topic_removes_everything]
);
