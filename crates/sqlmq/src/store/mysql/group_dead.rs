//! A cluster group's dead letters and waiting retries: list, redrive, retry now, purge; and
//! replay of offset ranges.

use sqlx::{MySqlConnection, Row};

use super::{MySqlStore, headers_at, id_at, micros, opt_text_at};
use crate::domain::PendingRetry;
use crate::domain::Result;
use crate::domain::parse_events;
use crate::domain::{AttemptError, DeadLetter, MessageId, time_from_micros};
use crate::store::GroupDead;
use crate::store::body::GroupIds;
use crate::store::statements::padded;
use crate::store::statements::{MAX_LIST, bucket};
use sqlx::MySql;

pub(crate) const LIST_GROUP_DEAD: &str = concat!(
    "SELECT d.id, d.partition_no, d.msg_offset, d.attempts, ",
    micros!("d.died_at"),
    ", l.msg_key, l.headers, l.body, ",
    micros!("l.published_at"),
    ", h.events FROM {p}group_dead d FORCE INDEX (died) ",
    "LEFT JOIN {p}topic_log l FORCE INDEX (PRIMARY) ON l.topic_id = ? ",
    "AND l.partition_no = d.partition_no AND l.msg_offset = d.msg_offset ",
    "LEFT JOIN {p}group_history h FORCE INDEX (PRIMARY) ON h.group_id = d.group_id ",
    "AND h.partition_no = d.partition_no AND h.msg_offset = d.msg_offset ",
    "WHERE d.group_id = ? ORDER BY d.died_at, d.id LIMIT ?"
);
/// Lock dead rows to redrive.
pub(crate) const LOCK_GROUP_DEAD: &str = "SELECT id FROM {p}group_dead FORCE INDEX (PRIMARY) \
    WHERE group_id = ? AND id IN ({list}) FOR UPDATE";
/// Move dead rows back to the retries (due now, attempts reset, tokens kept).
pub(crate) const DEAD_TO_RETRIES: &str = "INSERT INTO {p}group_retries \
    (group_id, id, partition_no, msg_offset, run_at, attempts, token) \
    SELECT d.group_id, d.id, d.partition_no, d.msg_offset, UTC_TIMESTAMP(6), 0, d.token \
    FROM ({ids}) v STRAIGHT_JOIN {p}group_dead d FORCE INDEX (PRIMARY) \
    ON d.group_id = ? AND d.id = v.id \
    ON DUPLICATE KEY UPDATE run_at = VALUES(run_at), attempts = 0";
pub(crate) const DELETE_GROUP_DEAD: &str = "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}group_dead t \
    FORCE INDEX (PRIMARY) ON t.group_id = ? AND t.id = v.id";
const OLDEST_DEAD: &str = "SELECT id FROM {p}group_dead FORCE INDEX (died) WHERE group_id = ? \
    ORDER BY died_at, id LIMIT ?";
pub(crate) const LIST_RETRIES: &str = concat!(
    "SELECT id, partition_no, msg_offset, attempts, ",
    micros!("run_at"),
    " FROM {p}group_retries FORCE INDEX (due) WHERE group_id = ? ORDER BY run_at, id LIMIT ?"
);
pub(crate) const RETRY_NOW: &str = "UPDATE {p}group_retries SET run_at = UTC_TIMESTAMP(6) \
    WHERE group_id = ? AND id IN ({list})";
/// Replay one partition's range into the retries (due now). Attempts restart; the token
/// continues from the record's last delivery, so that older receipts stay fenced.
pub(crate) const REPLAY_RANGE: &str = "INSERT INTO {p}group_retries \
    (group_id, id, partition_no, msg_offset, run_at, attempts, token) \
    SELECT ?, l.id, l.partition_no, l.msg_offset, UTC_TIMESTAMP(6), 0, COALESCE(h.token, 0) \
    FROM {p}topic_log l FORCE INDEX (PRIMARY) \
    LEFT JOIN {p}group_history h FORCE INDEX (PRIMARY) ON h.group_id = ? \
    AND h.partition_no = l.partition_no AND h.msg_offset = l.msg_offset \
    WHERE l.topic_id = ? AND l.partition_no = ? AND l.msg_offset >= ? AND l.msg_offset < ? \
    ON DUPLICATE KEY UPDATE run_at = VALUES(run_at), attempts = 0";
/// Records in one partition's range (what a replay queues).
pub(crate) const COUNT_RANGE: &str = "SELECT COUNT(*) FROM {p}topic_log FORCE INDEX (PRIMARY) \
    WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
/// Dead letters of a replayed range are being delivered again.
pub(crate) const DELETE_DEAD_RANGE: &str = "DELETE FROM {p}group_dead WHERE group_id = ? \
    AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";

impl GroupDead<MySql> for MySqlStore {
    /// The group's oldest `limit` dead letters.
    async fn group_dead_letters(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        group_id: i32,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let rows = sqlx::query(self.st.get(LIST_GROUP_DEAD))
            .bind(topic_id)
            .bind(group_id)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| {
                let events = r
                    .try_get::<Option<Vec<u8>>, _>(9)?
                    .map(|e| parse_events(&e))
                    .unwrap_or_default();
                let died_us: i64 = r.try_get(4)?;
                Ok(DeadLetter {
                    id: id_at(r, 0)?,
                    attempts: r.try_get::<i32, _>(3)?.max(0) as u32,
                    died_at: time_from_micros(died_us),
                    enqueued_at: time_from_micros(
                        r.try_get::<Option<i64>, _>(8)?.unwrap_or(died_us),
                    ),
                    errors: events
                        .into_iter()
                        .filter_map(|e| {
                            e.error.map(|error| AttemptError {
                                attempt: e.attempt,
                                at: e.at,
                                error,
                            })
                        })
                        .collect(),
                    ordering_key: opt_text_at(r, 5)?,
                    headers: headers_at(r, 6)?,
                    body: r.try_get::<Option<Vec<u8>>, _>(7)?.unwrap_or_default(),
                    partition: Some(r.try_get::<i32, _>(1)? as u32),
                    offset: Some(r.try_get(2)?),
                    member: None,
                })
            })
            .collect()
    }

    /// Redrive dead letters: due again now with fresh attempts. Returns the ids found dead.
    async fn redrive_group(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<Vec<MessageId>> {
        let mut found = Vec::new();
        for chunk in ids.chunks(MAX_LIST) {
            let mut q =
                sqlx::query(self.st.list(LOCK_GROUP_DEAD, "?", bucket(chunk.len()))).bind(group_id);
            for id in padded(chunk) {
                q = q.bind(id.bytes());
            }
            for row in q.fetch_all(&mut *conn).await? {
                found.push(id_at(&row, 0)?);
            }
        }
        if found.is_empty() {
            return Ok(found);
        }
        // Exact buckets: the derived table feeds an INSERT.
        let mut rest = found.as_slice();
        for size in crate::store::statements::split_into_buckets(found.len(), MAX_LIST) {
            let (chunk, tail) = rest.split_at(size);
            let mut q = sqlx::query(self.st.list(
                DEAD_TO_RETRIES,
                crate::store::statements::ID_ROW,
                size,
            ));
            for id in chunk {
                q = q.bind(id.bytes());
            }
            q.bind(group_id).execute(&mut *conn).await?;
            rest = tail;
        }
        self.exec_group_ids(
            conn,
            DELETE_GROUP_DEAD,
            GroupIds::GroupLast,
            group_id,
            &found,
        )
        .await?;
        Ok(found)
    }

    async fn delete_group_dead(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<u64> {
        self.exec_group_ids(conn, DELETE_GROUP_DEAD, GroupIds::GroupLast, group_id, ids)
            .await
    }

    /// Ids of the group's oldest `limit` dead letters.
    async fn oldest_group_dead(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        limit: usize,
    ) -> Result<Vec<MessageId>> {
        let rows = sqlx::query(self.st.get(OLDEST_DEAD))
            .bind(group_id)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(|r| id_at(r, 0)).collect()
    }

    /// The group's first `limit` waiting retries, soonest first.
    async fn group_retries(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        limit: usize,
    ) -> Result<Vec<PendingRetry>> {
        let rows = sqlx::query(self.st.get(LIST_RETRIES))
            .bind(group_id)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(PendingRetry {
                    id: id_at(r, 0)?,
                    partition: r.try_get::<i32, _>(1)? as u32,
                    offset: r.try_get(2)?,
                    attempts: r.try_get::<i32, _>(3)?.max(0) as u32,
                    run_at: time_from_micros(r.try_get(4)?),
                })
            })
            .collect()
    }

    /// Make waiting retries due now. Returns how many were waiting.
    async fn retry_now(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<u64> {
        let mut n = 0;
        for chunk in ids.chunks(MAX_LIST) {
            let mut q =
                sqlx::query(self.st.list(RETRY_NOW, "?", bucket(chunk.len()))).bind(group_id);
            for id in padded(chunk) {
                q = q.bind(id.bytes());
            }
            n += q.execute(&mut *conn).await?.rows_affected();
        }
        Ok(n)
    }

    /// Replay offsets `[from, to)` of one partition into the group (at most a few thousand per
    /// call: the caller chunks). Returns how many records were queued.
    async fn replay_range(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        group_id: i32,
        partition: i32,
        range: std::ops::Range<i64>,
    ) -> Result<u64> {
        let (from, to) = (range.start, range.end);
        let n: i64 = sqlx::query(self.st.get(COUNT_RANGE))
            .bind(topic_id)
            .bind(partition)
            .bind(from)
            .bind(to)
            .fetch_one(&mut *conn)
            .await?
            .try_get(0)?;
        sqlx::query(self.st.get(REPLAY_RANGE))
            .bind(group_id)
            .bind(group_id)
            .bind(topic_id)
            .bind(partition)
            .bind(from)
            .bind(to)
            .execute(&mut *conn)
            .await?;
        sqlx::query(self.st.get(DELETE_DEAD_RANGE))
            .bind(group_id)
            .bind(partition)
            .bind(from)
            .bind(to)
            .execute(&mut *conn)
            .await?;
        Ok(n as u64)
    }
}
