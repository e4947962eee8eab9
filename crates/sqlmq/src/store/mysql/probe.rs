//! The wakeup probes' statements (the body is `store/body/probe.rs`).

use crate::store::body::ProbeSql;

pub(super) const SQL: ProbeSql = ProbeSql {
    queues: "SELECT q.id, q.paused, \
        EXISTS (SELECT 1 FROM {p}ready r FORCE INDEX (PRIMARY) WHERE r.queue_id = q.id), \
        EXISTS (SELECT 1 FROM {p}scheduled s FORCE INDEX (due) \
            WHERE s.queue_id = q.id AND s.run_at <= UTC_TIMESTAMP(6)), \
        EXISTS (SELECT 1 FROM {p}leases l FORCE INDEX (expiry) \
            WHERE l.queue_id = q.id AND l.lease_until <= UTC_TIMESTAMP(6)), \
        q.name \
        FROM {p}queues q FORCE INDEX (PRIMARY) WHERE q.id IN ({list})",
    // Records to hand out (a cursor behind its partition's end — with strict order, only in a
    // partition with nothing in flight or waiting to retry — or a due retry), expired leases,
    // and published records still waiting for their offsets. (The strict-order checks are
    // scalar subqueries: MariaDB would turn an `EXISTS` there into a materialized `IN` that
    // reads the whole `part` index.)
    groups: "SELECT g.id, \
        EXISTS (SELECT 1 FROM {p}group_cursors c FORCE INDEX (PRIMARY) WHERE c.group_id = g.id \
            AND c.next_offset < (SELECT tp.next_offset FROM {p}topic_partitions tp \
            WHERE tp.topic_id = g.topic_id AND tp.partition_no = c.partition_no) \
            AND NOT (t.strict_order <> 0 AND ((SELECT 1 FROM {p}group_leases l FORCE INDEX (part) \
                WHERE l.group_id = c.group_id AND l.partition_no = c.partition_no LIMIT 1) IS NOT NULL \
            OR (SELECT 1 FROM {p}group_retries r FORCE INDEX (part) \
                WHERE r.group_id = c.group_id AND r.partition_no = c.partition_no LIMIT 1) IS NOT NULL))), \
        EXISTS (SELECT 1 FROM {p}group_retries r FORCE INDEX (due) \
            WHERE r.group_id = g.id AND r.run_at <= UTC_TIMESTAMP(6)), \
        EXISTS (SELECT 1 FROM {p}group_leases l FORCE INDEX (expiry) \
            WHERE l.group_id = g.id AND l.lease_until <= UTC_TIMESTAMP(6)), \
        EXISTS (SELECT 1 FROM {p}topic_pending p FORCE INDEX (PRIMARY) WHERE p.topic_id = g.topic_id), \
        t.name, g.name \
        FROM {p}consumer_groups g FORCE INDEX (PRIMARY) \
        STRAIGHT_JOIN {p}topics t FORCE INDEX (PRIMARY) ON t.id = g.topic_id WHERE g.id IN ({list})",
};
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::domain::StartAt;
    use crate::{GroupConfig, Record, TopicConfig};

    /// With strict order, a partition whose head is in flight or waiting to retry has nothing
    /// to hand out: the probe must not keep waking consumers for it.
    #[tokio::test]
    async fn the_group_probe_sees_strict_partitions_blocked_by_their_head() {
        let (db, client) = super::super::plans::scratch().await;
        let strict = client
            .create_topic("s", TopicConfig::default().strict_order(true))
            .await
            .unwrap();
        let loose = client
            .create_topic("l", TopicConfig::default())
            .await
            .unwrap();
        let mut groups = Vec::new();
        for t in [&strict, &loose] {
            t.publish_batch(vec![Record::new("a"), Record::new("b")])
                .await
                .unwrap();
            t.sequence().await.unwrap();
            groups.push(
                t.create_group("g", GroupConfig::default(), StartAt::Earliest)
                    .await
                    .unwrap(),
            );
        }
        let ready = |signals: &[crate::store::rows::GroupSignal], id: i32| {
            signals.iter().find(|s| s.group_id == id).unwrap().ready
        };
        let ids: Vec<i32> = groups.iter().map(|g| g.id()).collect();
        let probe = || async { client.probe_groups(&ids).await.unwrap() };
        assert!(ready(&probe().await, ids[0]) && ready(&probe().await, ids[1]));

        let held: Vec<_> = groups
            .iter()
            .map(|g| async move { g.receive(1, Duration::from_secs(60)).await.unwrap() })
            .collect();
        let mut heads = Vec::new();
        for h in held {
            heads.push(h.await.remove(0));
        }
        let signals = probe().await;
        assert!(!ready(&signals, ids[0]), "strict: the head is in flight");
        assert!(
            ready(&signals, ids[1]),
            "not strict: the second record can go"
        );

        // Waiting to retry blocks the strict partition too; once acked, the next is ready.
        groups[0]
            .nack(heads[0].receipt(), Some(Duration::from_secs(3600)), "later")
            .await
            .unwrap();
        assert!(
            !ready(&probe().await, ids[0]),
            "strict: the head waits to retry"
        );
        groups[0].retry_now(&[heads[0].id]).await.unwrap();
        assert!(
            ready(&probe().await, ids[0]),
            "strict: the head is due again"
        );
        let again = groups[0].receive(1, Duration::from_secs(60)).await.unwrap();
        assert_eq!(again[0].id, heads[0].id);
        groups[0].ack(again[0].receipt()).await.unwrap();
        assert!(
            ready(&probe().await, ids[0]),
            "strict: the next record can go"
        );
        sqlmq_testkit::drop_database(&db).await;
    }
}
