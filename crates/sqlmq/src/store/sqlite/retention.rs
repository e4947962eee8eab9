//! Retention: removing a partition's oldest records in small primary-key-range chunks.
//!
//! Each chunk is its own short transaction (the engine's, `BEGIN IMMEDIATE`): raise the
//! partition's `low_offset`, delete the groups' history of the range and the log rows (one
//! primary-key range each). Short chunks matter more here than on MySQL: a retention
//! transaction holds the database's one write lock, and publishers and claims wait for it.
//! Readers that were behind jump to the new `low_offset`; with `retention_keeps_unconsumed`,
//! the engine never cuts past what a group still has to consume.

use std::collections::HashMap;

use sqlx::{Row, Sqlite, SqliteConnection};

use super::SqliteStore;
use crate::domain::Result;
use crate::store::Retention;
use crate::store::rows::{RangeRemoval, TopicCursor};

/// Body sizes read per statement while looking for the cut by bytes.
const BODY_SIZES_CHUNK: i64 = 500;

const BODY_SIZES: &str = "SELECT msg_offset, length(body) FROM {p}topic_log \
    WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? ORDER BY msg_offset LIMIT ?";
const RANGE_BYTES: &str = "SELECT COUNT(*), COALESCE(SUM(length(body)), 0) FROM {p}topic_log \
    WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
const DELETE_LOG_RANGE: &str = "DELETE FROM {p}topic_log WHERE topic_id = ? \
    AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
const DELETE_HISTORY_RANGE: &str = "DELETE FROM {p}group_history WHERE group_id = ? \
    AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
const RAISE_LOW: &str = "UPDATE {p}topic_partitions \
    SET low_offset = max(low_offset, ?), bytes = max(bytes - ?, 0) \
    WHERE topic_id = ? AND partition_no = ?";
/// Per group of the topic and partition: the cursor (what a cluster group has not been handed
/// yet, or where a broadcast group starts).
const GROUP_CURSORS: &str = "SELECT g.id, g.mode, c.partition_no, c.next_offset \
    FROM {p}consumer_groups g JOIN {p}group_cursors c ON c.group_id = g.id WHERE g.topic_id = ?";
const MIN_POSITIONS: &str = "SELECT partition_no, MIN(next_offset) \
    FROM {p}group_positions WHERE group_id = ? GROUP BY partition_no";

impl Retention<Sqlite> for SqliteStore {
    /// The first offset of `partition` at or after `from` such that the bodies from there on
    /// total at most `keep` bytes, given `total` bytes from `from` on.
    async fn offset_for_bytes(
        &self,
        conn: &mut SqliteConnection,
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

    /// The partition's counters first, then the history of the range in each group, then the
    /// log rows (all in the caller's transaction).
    async fn remove_range(
        &self,
        conn: &mut SqliteConnection,
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
        conn: &mut SqliteConnection,
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
                    broadcast: r.try_get::<i64, _>(1)? == 1,
                    partition: r.try_get(2)?,
                    next_offset: r.try_get(3)?,
                })
            })
            .collect()
    }

    /// The smallest checkpointed position per partition of a broadcast group.
    async fn min_positions(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
    ) -> Result<HashMap<i32, i64>> {
        let rows = sqlx::query(self.st.get(MIN_POSITIONS))
            .bind(group_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }
}
