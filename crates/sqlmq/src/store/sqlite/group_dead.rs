//! A cluster group's dead letters and waiting retries: list, redrive, retry now, purge; and
//! replay of offset ranges.
//!
//! Redrive reads and moves the dead rows without locking them first (MySQL's `FOR UPDATE`):
//! the transaction has the database to itself.

use sqlx::{Row, Sqlite, SqliteConnection};

use super::{SqliteStore, headers_at, id_at, now_us, opt_text_at};
use crate::domain::{
    AttemptError, DeadLetter, MessageId, PendingRetry, Result, parse_events, time_from_micros,
};
use crate::store::GroupDead;
use crate::store::body::GroupIds;
use crate::store::statements::{MAX_LIST, bucket, padded};

const LIST_GROUP_DEAD: &str = "SELECT d.id, d.partition_no, d.msg_offset, d.attempts, d.died_at, \
    l.msg_key, l.headers, l.body, l.published_at, h.events FROM {p}group_dead d \
    LEFT JOIN {p}topic_log l ON l.topic_id = ? \
    AND l.partition_no = d.partition_no AND l.msg_offset = d.msg_offset \
    LEFT JOIN {p}group_history h ON h.group_id = d.group_id \
    AND h.partition_no = d.partition_no AND h.msg_offset = d.msg_offset \
    WHERE d.group_id = ? ORDER BY d.died_at, d.id LIMIT ?";
/// Move dead rows back to the retries (due now, attempts reset, tokens kept). The `WHERE`
/// clause also keeps SQLite's parser from reading `ON CONFLICT` as a join constraint.
const DEAD_TO_RETRIES: &str = concat!(
    "INSERT INTO {p}group_retries (group_id, id, partition_no, msg_offset, run_at, attempts, ",
    "token) SELECT group_id, id, partition_no, msg_offset, ",
    now_us!(),
    ", 0, token FROM {p}group_dead WHERE group_id = ? AND id IN ({list}) ",
    "ON CONFLICT (group_id, id) DO UPDATE SET run_at = excluded.run_at, attempts = 0"
);
/// Delete dead rows of group `?`, returning the ids that were dead.
const DELETE_GROUP_DEAD: &str =
    "DELETE FROM {p}group_dead WHERE group_id = ? AND id IN ({list}) RETURNING id";
const OLDEST_DEAD: &str = "SELECT id FROM {p}group_dead WHERE group_id = ? \
    ORDER BY died_at, id LIMIT ?";
const LIST_RETRIES: &str = "SELECT id, partition_no, msg_offset, attempts, run_at \
    FROM {p}group_retries WHERE group_id = ? ORDER BY run_at, id LIMIT ?";
const RETRY_NOW: &str = concat!(
    "UPDATE {p}group_retries SET run_at = ",
    now_us!(),
    " WHERE group_id = ? AND id IN ({list})"
);
/// Replay one partition's range into the retries (due now). Attempts restart; the token
/// continues from the record's last delivery, so that older receipts stay fenced.
const REPLAY_RANGE: &str = concat!(
    "INSERT INTO {p}group_retries (group_id, id, partition_no, msg_offset, run_at, attempts, ",
    "token) SELECT ?1, l.id, l.partition_no, l.msg_offset, ",
    now_us!(),
    ", 0, COALESCE(h.token, 0) FROM {p}topic_log l ",
    "LEFT JOIN {p}group_history h ON h.group_id = ?1 ",
    "AND h.partition_no = l.partition_no AND h.msg_offset = l.msg_offset ",
    "WHERE l.topic_id = ?2 AND l.partition_no = ?3 AND l.msg_offset >= ?4 AND l.msg_offset < ?5 ",
    "ON CONFLICT (group_id, id) DO UPDATE SET run_at = excluded.run_at, attempts = 0"
);
/// Dead letters of a replayed range are being delivered again.
const DELETE_DEAD_RANGE: &str = "DELETE FROM {p}group_dead WHERE group_id = ? \
    AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";

impl SqliteStore {
    /// Delete the group's dead rows of `ids`; returns the ids that were dead.
    async fn take_group_dead(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<Vec<MessageId>> {
        let mut out = Vec::new();
        for chunk in ids.chunks(MAX_LIST) {
            let mut q = sqlx::query(self.st.list(DELETE_GROUP_DEAD, "?", bucket(chunk.len())))
                .bind(group_id);
            for id in padded(chunk) {
                q = q.bind(id.bytes());
            }
            for row in q.fetch_all(&mut *conn).await? {
                out.push(id_at(&row, 0)?);
            }
        }
        Ok(out)
    }
}

impl GroupDead<Sqlite> for SqliteStore {
    /// The group's oldest `limit` dead letters.
    async fn group_dead_letters(
        &self,
        conn: &mut SqliteConnection,
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

    /// Redrive dead letters: due again now with fresh attempts (copied to the retries, then
    /// deleted). Returns the ids found dead.
    async fn redrive_group(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<Vec<MessageId>> {
        self.exec_group_ids(conn, DEAD_TO_RETRIES, GroupIds::GroupFirst, group_id, ids)
            .await?;
        self.take_group_dead(conn, group_id, ids).await
    }

    async fn delete_group_dead(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<u64> {
        Ok(self.take_group_dead(conn, group_id, ids).await?.len() as u64)
    }

    /// Ids of the group's oldest `limit` dead letters.
    async fn oldest_group_dead(
        &self,
        conn: &mut SqliteConnection,
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
        conn: &mut SqliteConnection,
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
        conn: &mut SqliteConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<u64> {
        self.exec_group_ids(conn, RETRY_NOW, GroupIds::GroupFirst, group_id, ids)
            .await
    }

    /// Replay offsets `[from, to)` of one partition into the group (at most a few thousand per
    /// call: the caller chunks). Returns how many records were queued.
    async fn replay_range(
        &self,
        conn: &mut SqliteConnection,
        topic_id: i32,
        group_id: i32,
        partition: i32,
        range: std::ops::Range<i64>,
    ) -> Result<u64> {
        let (from, to) = (range.start, range.end);
        // One row per logged record of the range, inserted or updated: the count MySQL reads
        // first (its upsert counts an updated row twice).
        let queued = sqlx::query(self.st.get(REPLAY_RANGE))
            .bind(group_id)
            .bind(topic_id)
            .bind(partition)
            .bind(from)
            .bind(to)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        sqlx::query(self.st.get(DELETE_DEAD_RANGE))
            .bind(group_id)
            .bind(partition)
            .bind(from)
            .bind(to)
            .execute(&mut *conn)
            .await?;
        Ok(queued)
    }
}
