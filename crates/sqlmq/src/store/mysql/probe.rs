//! The wakeup probe: one cheap, non-locking query that tells an idle worker process which of its
//! queues have work, and which need maintenance.
//!
//! MySQL has no LISTEN/NOTIFY, so an idle process polls. Claiming from each queue in turn would
//! cost a locking transaction per queue per poll; this single consistent read covers every queue
//! of the process with three `EXISTS` probes on the first index entry of a range each.

use sqlx::{MySqlConnection, Row};

use super::MySqlStore;
use crate::domain::Result;
use crate::store::Probe;
use crate::store::rows::GroupSignal;
use crate::store::rows::QueueSignal;
use crate::store::statements::bucket;
use sqlx::MySql;

pub(crate) const PROBE: &str = "SELECT q.id, q.paused, \
    EXISTS (SELECT 1 FROM {p}ready r FORCE INDEX (PRIMARY) WHERE r.queue_id = q.id), \
    EXISTS (SELECT 1 FROM {p}scheduled s FORCE INDEX (due) \
        WHERE s.queue_id = q.id AND s.run_at <= UTC_TIMESTAMP(6)), \
    EXISTS (SELECT 1 FROM {p}leases l FORCE INDEX (expiry) \
        WHERE l.queue_id = q.id AND l.lease_until <= UTC_TIMESTAMP(6)) \
    FROM {p}queues q FORCE INDEX (PRIMARY) WHERE q.id IN ({list})";

impl Probe<MySql> for MySqlStore {
    /// Probe `queue_ids` (at most 1 024).
    async fn probe(
        &self,
        conn: &mut MySqlConnection,
        queue_ids: &[i32],
    ) -> Result<Vec<QueueSignal>> {
        if queue_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = sqlx::query(self.st.list(PROBE, "?", bucket(queue_ids.len())));
        for id in crate::store::statements::padded(queue_ids) {
            q = q.bind(*id);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        rows.iter()
            .map(|r| {
                let paused = r.try_get::<i8, _>(1)? != 0;
                Ok(QueueSignal {
                    queue_id: r.try_get(0)?,
                    ready: !paused && r.try_get::<i64, _>(2)? != 0,
                    due: r.try_get::<i64, _>(3)? != 0,
                    expired: r.try_get::<i64, _>(4)? != 0,
                })
            })
            .collect()
    }

    /// Probe `group_ids` (at most 1 024).
    async fn probe_groups(
        &self,
        conn: &mut MySqlConnection,
        group_ids: &[i32],
    ) -> Result<Vec<GroupSignal>> {
        if group_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = sqlx::query(self.st.list(GROUP_PROBE, "?", bucket(group_ids.len())));
        for id in crate::store::statements::padded(group_ids) {
            q = q.bind(*id);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        rows.iter()
            .map(|r| {
                Ok(GroupSignal {
                    group_id: r.try_get(0)?,
                    ready: r.try_get::<i64, _>(1)? != 0 || r.try_get::<i64, _>(2)? != 0,
                    expired: r.try_get::<i64, _>(3)? != 0,
                    pending: r.try_get::<i64, _>(4)? != 0,
                })
            })
            .collect()
    }
}

/// The probe of cluster groups: records to hand out (a cursor behind its partition's end — with
/// strict order, only in a partition with nothing in flight or waiting to retry — or a due
/// retry), expired leases, and published records still waiting for their offsets. (The
/// strict-order checks are scalar subqueries: MariaDB would turn an `EXISTS` there into a
/// materialized `IN` that reads the whole `part` index.)
pub(crate) const GROUP_PROBE: &str = "SELECT g.id, \
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
    EXISTS (SELECT 1 FROM {p}topic_pending p FORCE INDEX (PRIMARY) WHERE p.topic_id = g.topic_id) \
    FROM {p}consumer_groups g FORCE INDEX (PRIMARY) \
    STRAIGHT_JOIN {p}topics t FORCE INDEX (PRIMARY) ON t.id = g.topic_id WHERE g.id IN ({list})";

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{GroupConfig, Record, StartAt, TopicConfig};

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
        let ready = |signals: &[super::GroupSignal], id: i32| {
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
