//! A cluster group's dead letters and waiting retries: list, redrive, retry now, purge; and
//! replay of offset ranges.

use std::ops::Range;

use super::{Beside, Columns, Query, SqlStore, Statement};
use crate::domain::{
    AttemptError, DeadLetter, MessageId, PendingRetry, Result, parse_events, time_from_micros,
};
use crate::store::Backend;
use crate::store::statements::{MAX_LIST, split_into_buckets};

/// A group's dead letters and retries. Times come back as microseconds since the epoch.
pub struct GroupDeadSql {
    /// The group's oldest dead letters with their records and history events: topic id, group
    /// id, limit → id, partition, offset, attempts, died (µs), key, headers, body (the last
    /// four NULL when retention removed the record), published (µs, NULL likewise), events
    /// (NULL without a history row).
    pub list_dead: &'static str,
    /// The group's dead rows of some ids, locked: group id, then `{list}` of ids → id.
    pub lock_dead: &'static str,
    /// Copy dead rows to the retries, due now, attempts reset, tokens kept (an existing retry
    /// is made due with attempts reset): the ids (`{ids}` or `{list}`, exact buckets: they
    /// feed an insert), then group id.
    pub dead_to_retries: &'static str,
    /// Delete the group's dead rows of some ids: the ids (`{ids}` or `{list}`), then group id.
    pub delete_dead: &'static str,
    /// Ids of the group's oldest dead letters: group id, limit → id.
    pub oldest_dead: &'static str,
    /// The group's first waiting retries, soonest first: group id, limit → id, partition,
    /// offset, attempts, due (µs).
    pub list_retries: &'static str,
    /// Make the group's retries of some ids due now: group id, then `{list}` of ids.
    pub retry_now: &'static str,
    /// Records in one partition's range (what a replay queues): topic id, partition, from, to
    /// → count.
    pub count_range: &'static str,
    /// Queue one partition's range of records in the retries, due now, attempts reset, token
    /// the record's last in the group (so that older receipts stay fenced): group id, group
    /// id, topic id, partition, from, to.
    pub replay_range: &'static str,
}

/// Dead letters of a replayed range are being delivered again: group id, partition, from, to.
const DELETE_DEAD_RANGE: &str = "DELETE FROM {p}group_dead WHERE group_id = ? \
    AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";

/// A cluster group's dead letters, waiting retries and replays.
impl<B: Backend> SqlStore<B> {
    /// The oldest `limit` dead letters, with their records and error histories.
    pub(crate) async fn group_dead_letters(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        group_id: i32,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let rows = self
            .query(B::GROUP_DEAD.list_dead)
            .arg(topic_id)
            .arg(group_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| {
                let events = r
                    .col::<Option<Vec<u8>>>(9)?
                    .map(|e| parse_events(&e))
                    .unwrap_or_default();
                let died_us: i64 = r.col(4)?;
                Ok(DeadLetter {
                    id: r.id_at(0)?,
                    attempts: r.col::<i32>(3)?.max(0) as u32,
                    died_at: time_from_micros(died_us),
                    enqueued_at: time_from_micros(r.col::<Option<i64>>(8)?.unwrap_or(died_us)),
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
                    ordering_key: r.opt_text_at(5)?,
                    concurrency_key: None,
                    headers: r.headers_at(6)?,
                    body: r.col::<Option<Vec<u8>>>(7)?.unwrap_or_default(),
                    partition: Some(r.col::<i32>(1)? as u32),
                    offset: Some(r.col(2)?),
                    member: None,
                })
            })
            .collect()
    }

    /// Due again now with fresh attempts. Returns the ids that were dead.
    ///
    /// Redrive: lock the dead rows, copy them to the retries, delete them. Returns the ids
    /// found dead.
    pub(crate) async fn redrive_group(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<Vec<MessageId>> {
        let sql = &B::GROUP_DEAD;
        let rows = self
            .fetch_ids_beside(conn, sql.lock_dead, Beside::Before(group_id), ids)
            .await?;
        let found = rows
            .iter()
            .map(|r| r.id_at(0))
            .collect::<Result<Vec<_>>>()?;
        if found.is_empty() {
            return Ok(found);
        }
        let mut rest = found.as_slice();
        for size in split_into_buckets(found.len(), MAX_LIST) {
            let (chunk, tail) = rest.split_at(size);
            let mut q: Query<'static, B> =
                sqlx::query(self.st.list(sql.dead_to_retries, "?", size));
            for id in chunk {
                q = q.arg(id.bytes());
            }
            q.arg(group_id).run(conn).await?;
            rest = tail;
        }
        self.exec_ids_beside(conn, sql.delete_dead, Beside::After(group_id), &found)
            .await?;
        Ok(found)
    }

    /// Ids of the oldest `limit` dead letters.
    pub(crate) async fn oldest_group_dead(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        limit: usize,
    ) -> Result<Vec<MessageId>> {
        let rows = self
            .query(B::GROUP_DEAD.oldest_dead)
            .arg(group_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter().map(|r| r.id_at(0)).collect()
    }

    /// Delete dead letters. Returns how many.
    pub(crate) async fn delete_group_dead(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<u64> {
        self.exec_ids_beside(
            conn,
            B::GROUP_DEAD.delete_dead,
            Beside::After(group_id),
            ids,
        )
        .await
    }

    /// The first `limit` waiting retries, soonest first.
    pub(crate) async fn group_retries(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        limit: usize,
    ) -> Result<Vec<PendingRetry>> {
        let rows = self
            .query(B::GROUP_DEAD.list_retries)
            .arg(group_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(PendingRetry {
                    id: r.id_at(0)?,
                    partition: r.col::<i32>(1)? as u32,
                    offset: r.col(2)?,
                    attempts: r.col::<i32>(3)?.max(0) as u32,
                    run_at: time_from_micros(r.col(4)?),
                })
            })
            .collect()
    }

    /// Make waiting retries due now. Returns how many were waiting.
    pub(crate) async fn retry_now(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<u64> {
        self.exec_ids_beside(conn, B::GROUP_DEAD.retry_now, Beside::Before(group_id), ids)
            .await
    }

    /// Queue offsets `[from, to)` of one partition for delivery again (attempts restart,
    /// tokens continue; dead letters of the range are delivered again too). Returns how many.
    ///
    /// Replay offsets `range` of one partition into the group (at most a few thousand per
    /// call: the caller chunks). Returns how many records were queued: the records of the
    /// range, counted first (an upsert's rows changed count an updated row twice on MySQL).
    pub(crate) async fn replay_range(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        group_id: i32,
        partition: i32,
        range: Range<i64>,
    ) -> Result<u64> {
        let sql = &B::GROUP_DEAD;
        let (from, to) = (range.start, range.end);
        let n: i64 = match self
            .query(sql.count_range)
            .arg(topic_id)
            .arg(partition)
            .arg(from)
            .arg(to)
            .first(conn)
            .await?
        {
            Some(r) => r.col(0)?,
            None => 0,
        };
        self.query(sql.replay_range)
            .arg(group_id)
            .arg(group_id)
            .arg(topic_id)
            .arg(partition)
            .arg(from)
            .arg(to)
            .run(conn)
            .await?;
        self.query(DELETE_DEAD_RANGE)
            .arg(group_id)
            .arg(partition)
            .arg(from)
            .arg(to)
            .run(conn)
            .await?;
        Ok(n as u64)
    }
}
