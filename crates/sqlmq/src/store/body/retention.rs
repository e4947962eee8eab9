//! Retention: removing a partition's oldest records in small primary-key-range chunks.
//!
//! Each chunk is its own short transaction (the engine's, `topic/retention.rs`): raise the
//! partition's `low_offset`, delete the groups' history of the range and the log rows (one
//! primary-key range each). Short chunks matter most on SQLite, where a retention transaction
//! holds the database's one write lock. Readers that were behind jump to the new `low_offset`;
//! with `retention_keeps_unconsumed`, the engine never cuts past what a group still has to
//! consume (cursor, in flight, retrying, dead) or what a broadcast member's checkpoint still
//! has to read. The engine also walks the body sizes to find the cut by bytes.

use std::collections::HashMap;

use super::{Columns, SqlStore, Statement};
use crate::domain::{Error, Result};
use crate::store::Backend;
use crate::store::rows::{RangeRemoval, TopicCursor};

/// The retention statements whose texts differ by backend.
pub struct RetentionSql {
    /// Up to a limit of a partition's body sizes from an offset on, in offset order: `topic
    /// id, partition, offset, limit`. Returns `offset, body bytes`.
    pub body_sizes: &'static str,
    /// The records and body bytes of a range: `topic id, partition, from, to`. Returns
    /// `records, bytes` (bytes 0 when there are none).
    pub range_bytes: &'static str,
    /// Raise a partition's first retained offset and lower its bytes (never below 0): `low
    /// offset, bytes removed, topic id, partition`.
    pub raise_low: &'static str,
    /// Every group's cursors in a topic's partitions: topic id. Returns `group id, mode (1
    /// broadcast), partition, next offset`.
    pub group_cursors: &'static str,
}

/// Delete a range of the log: `topic id, partition, from, to`.
const DELETE_LOG_RANGE: &str = "DELETE FROM {p}topic_log WHERE topic_id = ? \
    AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
/// Delete a group's history of a range: `group id, partition, from, to`.
const DELETE_HISTORY_RANGE: &str = "DELETE FROM {p}group_history WHERE group_id = ? \
    AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
/// The smallest checkpointed position per partition of a group: group id. Returns
/// `partition, offset`.
const MIN_POSITIONS: &str = "SELECT partition_no, MIN(next_offset) \
    FROM {p}group_positions WHERE group_id = ? GROUP BY partition_no";

/// Removing a partition's oldest records.
impl<B: Backend> SqlStore<B> {
    /// The body sizes of up to `limit` records of one partition from `from` on, in offset
    /// order: `(offset, bytes)`.
    pub(crate) async fn body_sizes(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        from: i64,
        limit: usize,
    ) -> Result<Vec<(i64, i64)>> {
        let rows = self
            .query(B::RETENTION.body_sizes)
            .arg(topic_id)
            .arg(partition)
            .arg(from)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.col(0)?, r.col::<Option<i64>>(1)?.unwrap_or(0))))
            .collect()
    }

    /// Remove one range (the caller's transaction): the groups' history of it, the records,
    /// and the partition's counters. Returns (records, bytes) removed.
    ///
    /// The partition's counters first (readers behind jump to the new first offset), then the
    /// history of the range in each group, then the log rows (all in the caller's
    /// transaction).
    pub(crate) async fn remove_range(
        &self,
        conn: &mut B::Connection,
        range: &RangeRemoval<'_>,
    ) -> Result<(u64, i64)> {
        let RangeRemoval {
            topic_id,
            partition,
            from,
            to,
            group_ids,
        } = *range;
        let sums = self
            .query(B::RETENTION.range_bytes)
            .arg(topic_id)
            .arg(partition)
            .arg(from)
            .arg(to)
            .first(conn)
            .await?
            .ok_or_else(|| Error::Corrupt("a sum over a range returned no row".into()))?;
        let bytes: i64 = sums.col::<Option<i64>>(1)?.unwrap_or(0);
        self.query(B::RETENTION.raise_low)
            .arg(to)
            .arg(bytes)
            .arg(topic_id)
            .arg(partition)
            .run(conn)
            .await?;
        for g in group_ids {
            self.query(DELETE_HISTORY_RANGE)
                .arg(*g)
                .arg(partition)
                .arg(from)
                .arg(to)
                .run(conn)
                .await?;
        }
        let removed = self
            .query(DELETE_LOG_RANGE)
            .arg(topic_id)
            .arg(partition)
            .arg(from)
            .arg(to)
            .run(conn)
            .await?;
        Ok((removed, bytes))
    }

    /// Every group's cursor in every partition of the topic.
    pub(crate) async fn cursors_of_topic(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
    ) -> Result<Vec<TopicCursor>> {
        let rows = self
            .query(B::RETENTION.group_cursors)
            .arg(topic_id)
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TopicCursor {
                    group_id: r.col(0)?,
                    broadcast: r.col::<i64>(1)? == 1,
                    partition: r.col(2)?,
                    next_offset: r.col(3)?,
                })
            })
            .collect()
    }

    /// The smallest checkpointed position per partition of a broadcast group.
    pub(crate) async fn min_positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
    ) -> Result<HashMap<i32, i64>> {
        let rows = self.query(MIN_POSITIONS).arg(group_id).rows(conn).await?;
        rows.iter().map(|r| Ok((r.col(0)?, r.col(1)?))).collect()
    }
}
