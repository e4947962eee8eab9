//! Publishing and sequencing: atomic batches, idempotent ids, dense offsets in commit order.

mod common;

use std::time::Duration;

use common::{TestDb, eventually};
use sqlmq::{Record, TopicConfig};
use sqlx::Row;

/// (partition, offset, body) of every logged record, in partition/offset order.
async fn log(pool: &sqlx::MySqlPool) -> Vec<(i32, i64, String)> {
    sqlx::query("SELECT partition_no, msg_offset, body FROM sqlmq_topic_log ORDER BY partition_no, msg_offset")
        .fetch_all(pool)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), String::from_utf8(r.get(2)).unwrap()))
        .collect()
}

#[tokio::test]
async fn published_records_get_dense_offsets_per_partition() {
    let db = TestDb::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("t", TopicConfig::default().partitions(3))
        .await
        .unwrap();
    let pool = db.pool().await;
    for i in 0..30 {
        t.publish(Record::new(format!("{i}")).key(format!("k{}", i % 5)))
            .await
            .unwrap();
    }
    let batch: Vec<Record> = (30..60)
        .map(|i| Record::new(format!("{i}")).partition(i % 3))
        .collect();
    t.publish_batch(batch).await.unwrap();
    let logged = eventually(Duration::from_secs(10), "all 60 sequenced", || async {
        let l = log(&pool).await;
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
    let pending: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlmq_topic_pending")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(pending, 0);
    db.drop().await;
}

#[tokio::test]
async fn publishing_an_id_twice_is_a_no_op() {
    let db = TestDb::new().await;
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
    assert_eq!(log(&db.pool().await).await.len(), 2);
    db.drop().await;
}

#[tokio::test]
async fn a_late_committer_gets_a_later_offset_and_rolled_back_records_never_appear() {
    let db = TestDb::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("t", TopicConfig::default())
        .await
        .unwrap();
    let pool = db.pool().await;
    let mut a = client.pool().begin().await.unwrap();
    t.publish_in(&mut a, Record::new("A, inserted first"))
        .await
        .unwrap();
    let mut rolled = client.pool().begin().await.unwrap();
    t.publish_in(&mut rolled, Record::new("rolled back"))
        .await
        .unwrap();
    let mut b = client.pool().begin().await.unwrap();
    t.publish_in(&mut b, Record::new("B, committed first"))
        .await
        .unwrap();
    b.commit().await.unwrap();
    t.sequence().await.unwrap(); // A is still uncommitted: skipped, not waited for
    assert_eq!(
        log(&pool).await,
        vec![(0, 0, "B, committed first".to_owned())]
    );
    a.commit().await.unwrap();
    rolled.rollback().await.unwrap();
    t.sequence().await.unwrap();
    assert_eq!(
        log(&pool).await,
        vec![
            (0, 0, "B, committed first".to_owned()),
            (0, 1, "A, inserted first".to_owned())
        ]
    );
    db.drop().await;
}
