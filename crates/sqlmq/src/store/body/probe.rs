//! The wakeup probes: one cheap, non-locking read that tells an idle worker process which of
//! its queues (or cluster groups) have work, and which need maintenance.
//!
//! MySQL has no LISTEN/NOTIFY, so an idle process polls. Claiming from each queue in turn would
//! cost a locking transaction per queue per poll; this single read covers every queue of the
//! process with `EXISTS` probes on the first index entry of a range each.

use super::{Columns, SqlStore, Statement};
use crate::domain::Result;
use crate::store::Backend;
use crate::store::rows::{GroupSignal, QueueSignal};
use crate::store::statements::{bucket, padded};

/// The probes' statements.
pub struct ProbeSql {
    /// Per queue of a `{list}` of ids: `id, paused, any ready, any due delayed, any ended
    /// lease, name` (flags as integers).
    pub queues: &'static str,
    /// Per cluster group of a `{list}` of ids: `id, any record to hand out, any due retry, any
    /// ended lease, any record waiting for its offset, topic name, group name` (flags as
    /// integers).
    pub groups: &'static str,
}

/// The idle worker's wakeup probe: one cheap, non-locking read for all of a process's queues
/// (and one for all of its groups).
impl<B: Backend> SqlStore<B> {
    /// What each of `queue_ids` (at most 1 024) has: ready, due and expired rows.
    pub(crate) async fn probe(
        &self,
        conn: &mut B::Connection,
        queue_ids: &[i32],
    ) -> Result<Vec<QueueSignal>> {
        if queue_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = self.list_query(B::PROBE.queues, "?", bucket(queue_ids.len()));
        for id in padded(queue_ids) {
            q = q.arg(*id);
        }
        let rows = q.rows(conn).await?;
        rows.iter()
            .map(|r| {
                let paused = r.col::<i64>(1)? != 0;
                Ok(QueueSignal {
                    queue_id: r.col(0)?,
                    name: r.col(5)?,
                    ready: !paused && r.col::<i64>(2)? != 0,
                    due: r.col::<i64>(3)? != 0,
                    expired: r.col::<i64>(4)? != 0,
                })
            })
            .collect()
    }

    /// What each of `group_ids` (at most 1 024) has: records to hand out (with strict order,
    /// only in partitions with nothing in flight or waiting), due retries, expired leases,
    /// records waiting for offsets.
    pub(crate) async fn probe_groups(
        &self,
        conn: &mut B::Connection,
        group_ids: &[i32],
    ) -> Result<Vec<GroupSignal>> {
        if group_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = self.list_query(B::PROBE.groups, "?", bucket(group_ids.len()));
        for id in padded(group_ids) {
            q = q.arg(*id);
        }
        let rows = q.rows(conn).await?;
        rows.iter()
            .map(|r| {
                Ok(GroupSignal {
                    group_id: r.col(0)?,
                    topic: r.col(5)?,
                    group: r.col(6)?,
                    ready: r.col::<i64>(1)? != 0 || r.col::<i64>(2)? != 0,
                    expired: r.col::<i64>(3)? != 0,
                    pending: r.col::<i64>(4)? != 0,
                })
            })
            .collect()
    }
}
