//! The sequencer's loss, held deterministically: a producer commits (or rolls back) while a
//! sequencing step is paused after each of its statements, and a second sequencer queues up
//! behind it. Whatever the moment, every committed record gets exactly one offset, offsets stay
//! dense, nothing rolled back appears and nothing stays pending.

use std::collections::BTreeMap;

use sqlmq::failpoints::pause;
use sqlmq::{Client, MySql, Record, Topic, TopicConfig};
use sqlmq_testkit::{TestDb, Value};

/// Every round-trip boundary of a step, in order (see `store/mysql/sequence.rs`: the counter's
/// lock and the claim share one round trip; the copy, the deletes and the advance another).
const POINTS: [&str; 3] = [
    "sequence.locked",
    "sequence.claimed",
    "sequence.before_commit",
];

/// Offset → body of topic `name`'s partition 0, as logged.
async fn log_of(db: &TestDb<MySql>, name: &str) -> BTreeMap<i64, String> {
    db.query(
        "SELECT l.msg_offset, l.body FROM sqlmq_topic_log l JOIN sqlmq_topics t \
         ON t.id = l.topic_id WHERE t.name = ? ORDER BY l.msg_offset",
        &[Value::from(name)],
    )
    .await
    .into_iter()
    .map(|row| (row[0].int(), row[1].text()))
    .collect()
}

/// A figure of topic `name`: `column` of `table`, summed over its partitions.
async fn sum_of(db: &TestDb<MySql>, name: &str, table: &str, column: &str) -> i64 {
    db.query(
        &format!(
            "SELECT CAST(COALESCE(SUM({column}), 0) AS SIGNED) FROM {table} x \
             JOIN sqlmq_topics t ON t.id = x.topic_id WHERE t.name = ?"
        ),
        &[Value::from(name)],
    )
    .await[0][0]
        .int()
}

/// Publish `body` in a transaction of its own, committed, without sequencing it.
async fn committed(client: &Client<MySql>, topic: &Topic<MySql>, body: &str) {
    let mut tx = client.begin().await.unwrap();
    topic.publish_in(&mut tx, Record::new(body)).await.unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_producer_committing_at_any_statement_of_a_step_gets_one_dense_offset() {
    let _turn = crate::serial().await;
    let db = TestDb::<MySql>::new().await;
    let client = db.client().await;
    let sequencers = [db.client().await, db.client().await];
    for (i, point) in POINTS.iter().enumerate() {
        for commit_late in [true, false] {
            let name = format!("t{i}{}", if commit_late { "c" } else { "r" });
            let t = client
                .create_topic(&name, TopicConfig::default())
                .await
                .unwrap();
            committed(&client, &t, "early").await;
            // The late producer: its row is inserted (and locked by that insert), not committed.
            let mut late = client.begin().await.unwrap();
            t.publish_in(&mut late, Record::new("late")).await.unwrap();

            let held = pause(point);
            let first = {
                let t = sequencers[0].topic(&name).await.unwrap();
                tokio::spawn(async move { t.sequence().await })
            };
            held.reached().await;
            // While the step is held: the late producer ends, another commits, and a second
            // sequencer starts (it waits for the counter row the held step has locked).
            if commit_late {
                late.commit().await.unwrap();
            } else {
                late.rollback().await.unwrap();
            }
            committed(&client, &t, "during").await;
            let second = {
                let t = sequencers[1].topic(&name).await.unwrap();
                tokio::spawn(async move { t.sequence().await })
            };
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            held.release();
            first.await.unwrap().unwrap();
            second.await.unwrap().unwrap();
            t.sequence().await.unwrap();

            let log = log_of(&db, &name).await;
            let mut bodies: Vec<&str> = log.values().map(String::as_str).collect();
            bodies.sort_unstable();
            let expected: &[&str] = if commit_late {
                &["during", "early", "late"]
            } else {
                &["during", "early"]
            };
            assert_eq!(bodies, expected, "held at {point}: {log:?}");
            assert_eq!(
                log.keys().copied().collect::<Vec<_>>(),
                (0..expected.len() as i64).collect::<Vec<_>>(),
                "held at {point}: offsets dense from 0"
            );
            assert_eq!(
                log[&0], "early",
                "held at {point}: the record committed first"
            );
            let pending = sum_of(&db, &name, "sqlmq_topic_pending", "1").await;
            assert_eq!(pending, 0, "held at {point}: nothing stranded");
            let counter = sum_of(&db, &name, "sqlmq_topic_partitions", "next_offset").await;
            assert_eq!(counter, expected.len() as i64, "held at {point}");
        }
    }
    db.drop().await;
}
