//! Retention: removing a partition's oldest records in small primary-key-range chunks.
//!
//! Each chunk is its own short transaction: raise the partition's `low_offset`, delete the log
//! rows below it (one PK range), and the groups' history of those offsets. Readers that were
//! behind jump to the new `low_offset`; with `retention_keeps_unconsumed`, the cut never
//! passes what a group still has to consume (cursor, in flight, retrying, dead) or what a
//! broadcast member's checkpoint still has to read.

use sqlx::{MySqlConnection, Row};

use super::MySqlStore;
use crate::domain::Result;
use crate::store::Retention;
use crate::store::rows::{RangeRemoval, TopicCursor};
use sqlx::MySql;

/// Offsets removed per transaction.
const BODY_SIZES_CHUNK: i64 = 500;

pub(crate) const BODY_SIZES: &str = "SELECT msg_offset, LENGTH(body) FROM {p}topic_log \
    FORCE INDEX (PRIMARY) WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? \
    ORDER BY msg_offset LIMIT ?";
pub(crate) const RANGE_BYTES: &str = "SELECT COUNT(*), CAST(COALESCE(SUM(LENGTH(body)), 0) AS SIGNED) \
    FROM {p}topic_log FORCE INDEX (PRIMARY) WHERE topic_id = ? AND partition_no = ? \
    AND msg_offset >= ? AND msg_offset < ?";
pub(crate) const DELETE_LOG_RANGE: &str = "DELETE FROM {p}topic_log WHERE topic_id = ? \
    AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
pub(crate) const DELETE_HISTORY_RANGE: &str = "DELETE FROM {p}group_history WHERE group_id = ? \
    AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
pub(crate) const RAISE_LOW: &str = "UPDATE {p}topic_partitions \
    SET low_offset = GREATEST(low_offset, ?), bytes = GREATEST(bytes - ?, 0) \
    WHERE topic_id = ? AND partition_no = ?";
/// Per group of the topic and partition: the cursor (what a cluster group has not been handed
/// yet, or where a broadcast group starts).
pub(crate) const GROUP_CURSORS: &str = "SELECT g.id, g.mode, c.partition_no, c.next_offset \
    FROM {p}consumer_groups g JOIN {p}group_cursors c FORCE INDEX (PRIMARY) ON c.group_id = g.id \
    WHERE g.topic_id = ?";
pub(crate) const MIN_POSITIONS: &str = "SELECT partition_no, MIN(next_offset) \
    FROM {p}group_positions WHERE group_id = ? GROUP BY partition_no";

impl Retention<MySql> for MySqlStore {
    /// The first offset of `partition` at or after `from` such that the bodies from there on
    /// total at most `keep` bytes, given `total` bytes from `from` on.
    async fn offset_for_bytes(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        partition: i32,
        from: i64,
        total: i64,
        keep: i64,
    ) -> Result<i64> {
        let mut excess = total - keep;
        let mut at = from;
        while excess > 0 {
            let rows = sqlx::query(self.st.get(BODY_SIZES))
                .bind(topic_id)
                .bind(partition)
                .bind(at)
                .bind(BODY_SIZES_CHUNK)
                .fetch_all(&mut *conn)
                .await?;
            if rows.is_empty() {
                break;
            }
            for r in &rows {
                if excess <= 0 {
                    break;
                }
                let offset: i64 = r.try_get(0)?;
                excess -= r.try_get::<Option<i64>, _>(1)?.unwrap_or(0);
                at = offset + 1;
            }
        }
        Ok(at)
    }

    /// The partition's counters first (readers behind jump to the new first offset), then the
    /// history of the range in each group, then the log rows.
    async fn remove_range(
        &self,
        conn: &mut MySqlConnection,
        range: &RangeRemoval<'_>,
    ) -> Result<(u64, i64)> {
        let RangeRemoval {
            topic_id,
            partition,
            from,
            to,
            group_ids,
        } = *range;
        let sums = sqlx::query(self.st.get(RANGE_BYTES))
            .bind(topic_id)
            .bind(partition)
            .bind(from)
            .bind(to)
            .fetch_one(&mut *conn)
            .await?;
        let bytes: i64 = sums.try_get::<Option<i64>, _>(1)?.unwrap_or(0);
        sqlx::query(self.st.get(RAISE_LOW))
            .bind(to)
            .bind(bytes)
            .bind(topic_id)
            .bind(partition)
            .execute(&mut *conn)
            .await?;
        for g in group_ids {
            sqlx::query(self.st.get(DELETE_HISTORY_RANGE))
                .bind(*g)
                .bind(partition)
                .bind(from)
                .bind(to)
                .execute(&mut *conn)
                .await?;
        }
        let removed = sqlx::query(self.st.get(DELETE_LOG_RANGE))
            .bind(topic_id)
            .bind(partition)
            .bind(from)
            .bind(to)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        Ok((removed, bytes))
    }

    async fn cursors_of_topic(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
    ) -> Result<Vec<TopicCursor>> {
        let rows = sqlx::query(self.st.get(GROUP_CURSORS))
            .bind(topic_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TopicCursor {
                    group_id: r.try_get(0)?,
                    broadcast: r.try_get::<i8, _>(1)? == 1,
                    partition: r.try_get(2)?,
                    next_offset: r.try_get(3)?,
                })
            })
            .collect()
    }

    /// The smallest checkpointed position per partition of a broadcast group.
    async fn min_positions(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
    ) -> Result<std::collections::HashMap<i32, i64>> {
        let rows = sqlx::query(self.st.get(MIN_POSITIONS))
            .bind(group_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }
}
