//! EXPLAIN of the hot statements of topics and consumer groups (see `plans.rs`): publishing and
//! sequencing, the group claim, settling, expiry, the probe and broadcast reads.

use std::time::Duration;

use sqlx::{AssertSqlSafe, Executor};

use super::plans::{Bind, Case, check, explain, id, scratch};
use super::{group_claim, group_settle, sequence, stream};
use crate::domain::StartAt;
use crate::store::body::Dialect;
use crate::{Client, GroupConfig, Record, TopicConfig};

fn cases(client: &Client, topic: i64, group: i64) -> Vec<Case> {
    use Bind::Int;
    let st = &client.inner.db.store.st;
    let c = |name, sql, binds, expect| Case {
        name,
        sql,
        binds,
        expect,
    };
    let ids = |n: usize| (0..n).map(|i| id(i as u8)).collect::<Vec<_>>();
    let mut group_then_ids = vec![Int(group)];
    group_then_ids.extend(ids(8));
    let mut ids_then_group = ids(8);
    ids_then_group.push(Int(group));
    vec![
        c(
            "sequence: lock the counter",
            st.list(sequence::LOCK_COUNTERS, "?", 2),
            vec![Int(topic), Int(0), Int(1)],
            ("topic_partitions", "PRIMARY"),
        ),
        c(
            "sequence: claim pending",
            st.list(sequence::CLAIM_PENDING, "?", 2),
            vec![Int(topic), Int(0), Int(1), Int(1000)],
            ("p", "PRIMARY"),
        ),
        c(
            "group claim: due retries",
            st.get(group_claim::SQL.claim_retries),
            vec![Int(group), Int(100)],
            ("group_retries", "due"),
        ),
        c(
            "group claim: lock cursors",
            st.get(group_claim::SQL.lock_cursors),
            vec![
                Int(topic),
                Int(topic),
                Int(group),
                Int(0),
                Int(1024),
                Int(topic),
                Int(3),
            ],
            ("c", "PRIMARY"),
        ),
        c(
            "group claim: log range",
            st.get(group_claim::SQL.log_range),
            vec![Int(topic), Int(0), Int(10), Int(110)],
            ("topic_log", "PRIMARY"),
        ),
        c(
            "group claim: past tokens",
            st.get(group_claim::SQL.past_tokens),
            vec![Int(group), Int(0), Int(10), Int(110)],
            ("group_history", "PRIMARY"),
        ),
        c(
            "group ack: lock leases",
            st.list(group_settle::SQL.lock_leases, "?", 8),
            group_then_ids,
            ("group_leases", "PRIMARY"),
        ),
        c(
            "group ack: delete leases",
            st.list(group_settle::SQL.delete_leases, "?", 8),
            ids_then_group,
            ("t", "PRIMARY"),
        ),
        c(
            "group extend",
            st.get(group_settle::SQL.extend),
            vec![Int(1000), Int(group), id(1), Int(1)],
            ("group_leases", "PRIMARY"),
        ),
        c(
            "group release: expired leases",
            st.get(group_settle::SQL.claim_expired),
            vec![Int(group), Int(500)],
            ("group_leases", "expiry"),
        ),
        c(
            "group probe",
            st.list(sqlx::MySql::PROBE.groups, "?", 2),
            vec![Int(group), Int(group)],
            ("g", "PRIMARY"),
        ),
        c(
            "broadcast read",
            st.get(stream::SQL.read_from),
            vec![Int(topic), Int(0), Int(10), Int(100)],
            ("topic_log", "PRIMARY"),
        ),
    ]
}

#[tokio::test]
async fn topic_statements_use_their_index_without_scans_or_sorts() {
    let (db, client) = scratch().await;
    let pool = client.pool().clone();
    let topic = client
        .create_topic("t", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let group = topic
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    topic.publish(Record::new("x")).await.unwrap();
    let (t, g) = (topic.id() as i64, group.id() as i64);
    for case in cases(&client, t, g) {
        check(&case, &explain(&pool, &case).await, "tiny tables");
    }

    // Populated: thousands of records, some pending, in flight, retrying, acked.
    for other in ["u", "v"] {
        let o = client
            .create_topic(other, TopicConfig::default().partitions(4))
            .await
            .unwrap();
        o.create_group("h", GroupConfig::default(), StartAt::Earliest)
            .await
            .unwrap();
    }
    let records = (0..4000).map(|i| Record::new(format!("{i}"))).collect();
    topic.publish_batch(records).await.unwrap();
    topic.sequence().await.unwrap();
    let got = group
        .receive(1000, Duration::from_secs(3600))
        .await
        .unwrap();
    let receipts: Vec<_> = got[..500].iter().map(|d| d.receipt()).collect();
    group.ack_batch(&receipts).await.unwrap();
    for d in &got[500..700] {
        group.nack(d.receipt(), None, "later").await.unwrap();
    }
    let mut tx = pool.begin().await.unwrap();
    let pending = (0..200).map(|i| Record::new(format!("p{i}"))).collect();
    topic.publish_batch_in(&mut tx, pending).await.unwrap();
    tx.commit().await.unwrap();
    for table in [
        "topic_partitions",
        "topic_pending",
        "topic_log",
        "consumer_groups",
        "group_cursors",
        "group_leases",
        "group_retries",
        "group_history",
    ] {
        pool.execute(AssertSqlSafe(format!("ANALYZE TABLE sqlmq_{table}")))
            .await
            .unwrap();
    }
    for case in cases(&client, t, g) {
        check(&case, &explain(&pool, &case).await, "populated tables");
    }
    sqlmq_testkit::drop_database(&db).await;
}
