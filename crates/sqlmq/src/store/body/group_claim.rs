//! The cluster-group claim's reads and writes. The claim itself (which records, in which order,
//! with which tokens: due retries first, strict order, retention floors, which cursors to lock
//! and when to wait for one) is the engine's (`topic/claim.rs`); each method here is one
//! statement or a fixed sequence of them, inside the claim's transaction.
//!
//! A cursor row is the right to hand out its partition's next offsets: MySQL locks it
//! (`FOR UPDATE SKIP LOCKED`, so that two members never take the same offset and a member
//! finding a partition busy moves on); on SQLite the claim's transaction has the database to
//! itself, so no cursor is ever busy and the same statements simply read.

use std::collections::{HashMap, HashSet};

use super::{Beside, Columns, Query, SqlStore, Statement};
use crate::domain::{MessageId, Result};
use crate::store::Backend;
use crate::store::rows::{Cursor, CursorScan, DueRetry, LoggedRow, NewGroupLeases};
use crate::store::statements::{MAX_LIST, bucket, padded, split_into_buckets};

/// The claim's statements. Times come back as microseconds since the epoch and are bound so.
///
/// The cursor columns, in order: `partition, next offset, high offset, the partition's end
/// (next offset to log), the partition's first retained offset, now (µs)`. The logged record
/// columns: `partition, offset, id, key, headers, body, published (µs)`.
pub struct GroupClaimSql {
    /// The group's due retries, soonest first, locked (skipping those another claim holds):
    /// group id, limit → id, partition, offset, attempts, token, now (µs).
    pub claim_retries: &'static str,
    /// Delete the group's retries of some ids: the ids (`{ids}` or `{list}`), then group id.
    pub delete_retries: &'static str,
    /// Which ids the group holds leases on, locking them (waits for a lease being written):
    /// group id, then `{list}` of ids → id.
    pub held: &'static str,
    /// Records at positions: `position_row` per position (`{rows}` or `{list}`, exact
    /// buckets: a repeated position could come back twice), then topic id → logged record
    /// columns.
    pub log_at: &'static str,
    /// One position of `log_at`: partition, offset.
    pub position_row: &'static str,
    /// Up to `limit` cursors with work among partitions `[from, to)`, by partition, locked
    /// (skipping those another claim holds): topic id, topic id, group id, from, to, topic id,
    /// limit → cursor columns.
    pub lock_cursors: &'static str,
    /// A partition with work whatever its cursor's lock (a plain read): group id, topic id →
    /// partition.
    pub busy_cursor: &'static str,
    /// One partition's cursor, locked, waiting for it: topic id, topic id, group id, partition
    /// → cursor columns (the partition's end and first offset as read before the wait).
    pub wait_cursor: &'static str,
    /// Partitions among some with a record in flight or waiting to retry: group id, `{list}`
    /// of partitions, group id, `{list}` of partitions → partition.
    pub occupied: &'static str,
    /// The records of one partition in an offset range, by offset: topic id, partition, from,
    /// to → logged record columns.
    pub log_range: &'static str,
    /// The last token of each offset of a range that has a history row in the group: group
    /// id, partition, from, to → offset, token.
    pub past_tokens: &'static str,
    /// One lease row of `INSERT_LEASES`: group id, id, partition, offset, token, attempts,
    /// lease end (µs), claimed (µs), owner.
    pub lease_row: &'static str,
}

/// SQL expression (for `concat!`): the end (next offset to log) of cursor `c`'s partition, by
/// a subquery (which a locking read of the cursor does not lock: claims never contend with
/// publishing): binds topic id.
macro_rules! partition_end {
    () => {
        "(SELECT tp.next_offset FROM {p}topic_partitions tp \
        WHERE tp.topic_id = ? AND tp.partition_no = c.partition_no)"
    };
}
pub(crate) use partition_end;

/// SQL text (for `concat!`): `SELECT` and the cursor columns of cursor `c` up to the clock,
/// which the backend appends (with its `FROM`): binds topic id, topic id.
macro_rules! cursor_select {
    () => {
        concat!(
            "SELECT c.partition_no, c.next_offset, c.high_offset, ",
            crate::store::body::partition_end!(),
            ", (SELECT tp.low_offset FROM {p}topic_partitions tp ",
            "WHERE tp.topic_id = ? AND tp.partition_no = c.partition_no), "
        )
    };
}
pub(crate) use cursor_select;

/// A partition's end and first retained offset, read again after waiting for its cursor:
/// topic id, partition → next offset, low offset.
const PARTITION_NOW: &str = "SELECT next_offset, low_offset FROM {p}topic_partitions \
    WHERE topic_id = ? AND partition_no = ?";
/// Write lease rows: `VALUES {list}` of `lease_row`.
const INSERT_LEASES: &str = "INSERT INTO {p}group_leases (group_id, id, partition_no, msg_offset, \
    token, attempts, lease_until, claimed_at, owner) VALUES {list}";
/// Parameters of a `lease_row`.
const LEASE_PARAMS: usize = 9;

/// Decode the cursor columns (a partition row that is gone reads as an empty partition).
fn decode_cursor<B: Backend>(row: &B::Row) -> Result<Cursor> {
    Ok(Cursor {
        partition: row.col(0)?,
        next: row.col(1)?,
        high: row.col(2)?,
        end: row.col::<Option<i64>>(3)?.unwrap_or(0),
        low: row.col::<Option<i64>>(4)?.unwrap_or(0),
        now_us: row.col(5)?,
    })
}

/// Decode the logged record columns.
fn decode_logged<B: Backend>(row: &B::Row) -> Result<LoggedRow> {
    Ok(LoggedRow {
        partition: row.col(0)?,
        offset: row.col(1)?,
        id: row.id_at(2)?,
        key: row.opt_text_at(3)?,
        headers: row.headers_at(4)?,
        body: row.col(5)?,
        published_us: row.col(6)?,
        token: 0,
    })
}

/// The reads and writes of a cluster-group claim (its decisions are the engine's).
impl<B: Backend> SqlStore<B> {
    /// Take up to `n` due retries: locked (skipping those other claims hold) and deleted.
    pub(crate) async fn take_due_retries(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        n: usize,
    ) -> Result<Vec<DueRetry>> {
        let sql = &B::GROUP_CLAIM;
        let rows = self
            .query(sql.claim_retries)
            .arg(group_id)
            .arg(n as i64)
            .rows(conn)
            .await?;
        let retries = rows
            .iter()
            .map(|row| {
                Ok(DueRetry {
                    id: row.id_at(0)?,
                    partition: row.col(1)?,
                    offset: row.col(2)?,
                    attempts: row.col(3)?,
                    token: row.col(4)?,
                    now_us: row.col(5)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if !retries.is_empty() {
            let ids: Vec<MessageId> = retries.iter().map(|r| r.id).collect();
            self.exec_ids_beside(conn, sql.delete_retries, Beside::After(group_id), &ids)
                .await?;
        }
        Ok(retries)
    }

    /// Which of `ids` the group has in flight (waits for a lease being written).
    pub(crate) async fn held(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<HashSet<MessageId>> {
        let rows = self
            .fetch_ids_beside(conn, B::GROUP_CLAIM.held, Beside::Before(group_id), ids)
            .await?;
        rows.iter().map(|r| r.id_at(0)).collect()
    }

    /// The records at `(partition, offset)` positions (those retention has not removed).
    pub(crate) async fn records_at(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        positions: &[(i32, i64)],
    ) -> Result<Vec<LoggedRow>> {
        let sql = &B::GROUP_CLAIM;
        // Each position once: a derived table of positions would join a repeated one twice
        // (and exact bucket sizes, never padding, for the same reason).
        let mut positions = positions.to_vec();
        positions.sort_unstable();
        positions.dedup();
        let mut out = Vec::with_capacity(positions.len());
        let mut rest = positions.as_slice();
        for size in split_into_buckets(positions.len(), MAX_LIST) {
            let (chunk, tail) = rest.split_at(size);
            let mut q: Query<'static, B> =
                sqlx::query(self.st.list(sql.log_at, sql.position_row, size));
            for (partition, offset) in chunk {
                q = q.arg(*partition).arg(*offset);
            }
            for row in q.arg(topic_id).rows(conn).await? {
                out.push(decode_logged::<B>(&row)?);
            }
            rest = tail;
        }
        Ok(out)
    }

    /// Lock up to `scan.limit` cursors with work among partitions `[scan.from, scan.to)`, by
    /// partition: a locked cursor is the right to hand out its partition's next offsets.
    /// Cursors other claims hold are skipped.
    pub(crate) async fn lock_cursors(
        &self,
        conn: &mut B::Connection,
        scan: &CursorScan,
    ) -> Result<Vec<Cursor>> {
        let rows = self
            .query(B::GROUP_CLAIM.lock_cursors)
            .arg(scan.topic_id)
            .arg(scan.topic_id)
            .arg(scan.group_id)
            .arg(scan.from)
            .arg(scan.to)
            .arg(scan.topic_id)
            .arg(scan.limit)
            .rows(conn)
            .await?;
        rows.iter().map(decode_cursor::<B>).collect()
    }

    /// A partition with work, whoever holds its cursor (after `SqlStore::lock_cursors`
    /// found none free: one whose cursor another claim holds).
    pub(crate) async fn busy_cursor(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        topic_id: i32,
    ) -> Result<Option<i32>> {
        let row = self
            .query(B::GROUP_CLAIM.busy_cursor)
            .arg(group_id)
            .arg(topic_id)
            .first(conn)
            .await?;
        row.map(|r| r.col(0)).transpose()
    }

    /// Lock one partition's cursor, waiting for another claim's to end; with the partition's
    /// end and first offset as they are after the wait. `None` when the cursor is gone.
    ///
    /// Lock the cursor (waiting), then read the partition's end and first offset again: the
    /// cursor statement read them before the wait.
    pub(crate) async fn wait_cursor(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        topic_id: i32,
        partition: i32,
    ) -> Result<Option<Cursor>> {
        let Some(row) = self
            .query(B::GROUP_CLAIM.wait_cursor)
            .arg(topic_id)
            .arg(topic_id)
            .arg(group_id)
            .arg(partition)
            .first(conn)
            .await?
        else {
            return Ok(None);
        };
        let mut c = decode_cursor::<B>(&row)?;
        if let Some(p) = self
            .query(PARTITION_NOW)
            .arg(topic_id)
            .arg(partition)
            .first(conn)
            .await?
        {
            c.end = p.col(0)?;
            c.low = p.col(1)?;
        }
        Ok(Some(c))
    }

    /// Partitions among `parts` with a record in flight or waiting to retry.
    pub(crate) async fn occupied(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        parts: &[i32],
    ) -> Result<HashSet<i32>> {
        let mut out = HashSet::new();
        for chunk in parts.chunks(MAX_LIST) {
            let mut q: Query<'static, B> = sqlx::query(self.st.list(
                B::GROUP_CLAIM.occupied,
                "?",
                bucket(chunk.len()),
            ));
            for _ in 0..2 {
                q = q.arg(group_id);
                for p in padded(chunk) {
                    q = q.arg(*p);
                }
            }
            for row in q.rows(conn).await? {
                out.insert(row.col::<i32>(0)?);
            }
        }
        Ok(out)
    }

    /// The records of one partition in `[from, to)`.
    pub(crate) async fn log_range(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        from: i64,
        to: i64,
    ) -> Result<Vec<LoggedRow>> {
        let rows = self
            .query(B::GROUP_CLAIM.log_range)
            .arg(topic_id)
            .arg(partition)
            .arg(from)
            .arg(to)
            .rows(conn)
            .await?;
        rows.iter().map(decode_logged::<B>).collect()
    }

    /// The last token each offset of `[from, to)` had in the group: `offset -> token`.
    pub(crate) async fn past_tokens(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        partition: i32,
        from: i64,
        to: i64,
    ) -> Result<HashMap<i64, i64>> {
        let rows = self
            .query(B::GROUP_CLAIM.past_tokens)
            .arg(group_id)
            .arg(partition)
            .arg(from)
            .arg(to)
            .rows(conn)
            .await?;
        rows.iter().map(|r| Ok((r.col(0)?, r.col(1)?))).collect()
    }

    /// Write the lease rows of a claim's deliveries.
    pub(crate) async fn insert_group_leases(
        &self,
        conn: &mut B::Connection,
        new: &NewGroupLeases<'_>,
    ) -> Result<()> {
        self.insert_values(
            conn,
            INSERT_LEASES,
            B::GROUP_CLAIM.lease_row,
            LEASE_PARAMS,
            new.deliveries,
            |q, d| {
                q.arg(new.group_id)
                    .arg(d.id.bytes())
                    .arg(d.partition.unwrap_or(0) as i32)
                    .arg(d.offset.unwrap_or(0))
                    .arg(d.token as i64)
                    .arg(d.attempt as i32)
                    .arg(new.until_us)
                    .arg(new.claimed_us)
                    .arg(new.owner.as_bytes())
            },
        )
        .await
    }
}
