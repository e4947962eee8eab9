//! The wakeup probes: one cheap read that tells an idle worker process which of its queues (or
//! cluster groups) have work, and which need maintenance.
//!
//! The same `EXISTS` probes as on MySQL, each on the first entry of an index range, run on a
//! reader connection (WAL: it never waits for the writer). Two differences for groups: SQLite
//! gives records their offsets in the publishing transaction, so there is no `topic_pending`
//! and `pending` is always false; and the strict-order checks are plain `EXISTS` (MySQL needs
//! scalar subqueries there to keep MariaDB from materialising them).

use sqlx::{Row, Sqlite, SqliteConnection};

use super::{SqliteStore, now_us};
use crate::domain::Result;
use crate::store::Probe;
use crate::store::rows::{GroupSignal, QueueSignal};
use crate::store::statements::{bucket, padded};

const PROBE: &str = concat!(
    "SELECT q.id, q.paused, ",
    "EXISTS (SELECT 1 FROM {p}ready r WHERE r.queue_id = q.id), ",
    "EXISTS (SELECT 1 FROM {p}scheduled s WHERE s.queue_id = q.id AND s.run_at <= ",
    now_us!(),
    "), ",
    "EXISTS (SELECT 1 FROM {p}leases l WHERE l.queue_id = q.id AND l.lease_until <= ",
    now_us!(),
    ") FROM {p}queues q WHERE q.id IN ({list})"
);

/// The probe of cluster groups: records to hand out (a cursor behind its partition's end (with
/// strict order, only in a partition with nothing in flight or waiting to retry) or a due
/// retry) and expired leases.
const GROUP_PROBE: &str = concat!(
    "SELECT g.id, ",
    "EXISTS (SELECT 1 FROM {p}group_cursors c JOIN {p}topic_partitions tp ",
    "ON tp.topic_id = g.topic_id AND tp.partition_no = c.partition_no ",
    "WHERE c.group_id = g.id AND c.next_offset < tp.next_offset ",
    "AND NOT (t.strict_order <> 0 AND (",
    "EXISTS (SELECT 1 FROM {p}group_leases l ",
    "WHERE l.group_id = c.group_id AND l.partition_no = c.partition_no) ",
    "OR EXISTS (SELECT 1 FROM {p}group_retries r ",
    "WHERE r.group_id = c.group_id AND r.partition_no = c.partition_no)))), ",
    "EXISTS (SELECT 1 FROM {p}group_retries r WHERE r.group_id = g.id AND r.run_at <= ",
    now_us!(),
    "), ",
    "EXISTS (SELECT 1 FROM {p}group_leases l WHERE l.group_id = g.id AND l.lease_until <= ",
    now_us!(),
    ") FROM {p}consumer_groups g JOIN {p}topics t ON t.id = g.topic_id WHERE g.id IN ({list})"
);

impl Probe<Sqlite> for SqliteStore {
    /// Probe `queue_ids` (at most 1 024).
    async fn probe(
        &self,
        conn: &mut SqliteConnection,
        queue_ids: &[i32],
    ) -> Result<Vec<QueueSignal>> {
        if queue_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = sqlx::query(self.st.list(PROBE, "?", bucket(queue_ids.len())));
        for id in padded(queue_ids) {
            q = q.bind(*id);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        rows.iter()
            .map(|r| {
                let paused = r.try_get::<i64, _>(1)? != 0;
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
        conn: &mut SqliteConnection,
        group_ids: &[i32],
    ) -> Result<Vec<GroupSignal>> {
        if group_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = sqlx::query(self.st.list(GROUP_PROBE, "?", bucket(group_ids.len())));
        for id in padded(group_ids) {
            q = q.bind(*id);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        rows.iter()
            .map(|r| {
                Ok(GroupSignal {
                    group_id: r.try_get(0)?,
                    ready: r.try_get::<i64, _>(1)? != 0 || r.try_get::<i64, _>(2)? != 0,
                    expired: r.try_get::<i64, _>(3)? != 0,
                    // Offsets are given at publish: nothing ever waits for them.
                    pending: false,
                })
            })
            .collect()
    }
}
