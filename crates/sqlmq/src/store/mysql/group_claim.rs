//! The cluster-group claim's statements. The claim itself (which records, in which order, with
//! which tokens: due retries first, strict order, retention floors) is the engine's
//! (`topic/claim.rs`); these are its reads and writes, in one short READ COMMITTED transaction:
//!
//! - due retries of the group, `FOR UPDATE SKIP LOCKED` through `(group_id, run_at, id)`;
//! - cursors with work, `FOR UPDATE SKIP LOCKED`, from a given partition on: a cursor row is
//!   the lock on handing out its partition's next offsets, so two members never take the same
//!   offset, and a member finding a partition busy moves on to another. The partition's end
//!   (`topic_partitions.next_offset`) is read by a subquery, which a locking read does not
//!   lock: claims never contend with sequencing. Only when every partition with work is locked
//!   does the claim wait for one (a queue of claims, instead of members polling a lock);
//! - the records of the offsets taken, by primary key range; the cursors move past them;
//! - one lease row per record, with a fencing token.
//!
//! Offsets are handed out only below the partition's end, which advances only by sequencing
//! commits covering dense ranges, so a cursor can never pass an offset that is not yet visible.

use std::collections::{HashMap, HashSet};

use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::{MySqlStore, headers_at, id_at, insert_values, micros, opt_text_at};
use crate::domain::MessageId;
use crate::domain::Result;
use crate::store::GroupClaim;
use crate::store::body::GroupIds;
use crate::store::rows::Cursor;
use crate::store::rows::CursorScan;
use crate::store::rows::DueRetry;
use crate::store::rows::LoggedRow;
use crate::store::rows::NewGroupLeases;
use crate::store::statements::padded;
use crate::store::statements::{MAX_LIST, bucket, split_into_buckets};
use sqlx::MySql;

pub(crate) const CLAIM_RETRIES: &str = concat!(
    "SELECT id, partition_no, msg_offset, attempts, token, ",
    micros!("UTC_TIMESTAMP(6)"),
    " FROM {p}group_retries FORCE INDEX (due) WHERE group_id = ? AND run_at <= UTC_TIMESTAMP(6) ",
    "ORDER BY run_at, id LIMIT ? FOR UPDATE SKIP LOCKED"
);
/// Columns of a cursor with its partition's end and first retained offset.
macro_rules! cursor_columns {
    () => {
        concat!(
            "SELECT c.partition_no, c.next_offset, c.high_offset, ",
            "(SELECT tp.next_offset FROM {p}topic_partitions tp ",
            "WHERE tp.topic_id = ? AND tp.partition_no = c.partition_no), ",
            "(SELECT tp.low_offset FROM {p}topic_partitions tp ",
            "WHERE tp.topic_id = ? AND tp.partition_no = c.partition_no), ",
            micros!("UTC_TIMESTAMP(6)"),
            " FROM {p}group_cursors c FORCE INDEX (PRIMARY) WHERE c.group_id = ? "
        )
    };
}
/// Lock up to `?` cursors with work among partitions `[?, ?)`, skipping busy ones.
pub(crate) const LOCK_CURSORS: &str = concat!(
    cursor_columns!(),
    "AND c.partition_no >= ? AND c.partition_no < ? AND c.next_offset < ",
    "(SELECT tp.next_offset FROM {p}topic_partitions tp ",
    "WHERE tp.topic_id = ? AND tp.partition_no = c.partition_no) ",
    "ORDER BY c.partition_no LIMIT ? FOR UPDATE SKIP LOCKED"
);
/// A partition with work whose cursor someone else holds (a plain read).
pub(crate) const BUSY_CURSOR: &str = "SELECT c.partition_no FROM {p}group_cursors c FORCE INDEX (PRIMARY) \
    WHERE c.group_id = ? AND c.next_offset < (SELECT tp.next_offset FROM {p}topic_partitions tp \
    WHERE tp.topic_id = ? AND tp.partition_no = c.partition_no) LIMIT 1";
/// Wait for one cursor's lock.
pub(crate) const WAIT_CURSOR: &str =
    concat!(cursor_columns!(), "AND c.partition_no = ? FOR UPDATE");
/// A partition's end and first offset, read after waiting for its cursor.
pub(crate) const PARTITION_NOW: &str = "SELECT next_offset, low_offset FROM {p}topic_partitions \
    WHERE topic_id = ? AND partition_no = ?";
pub(crate) const LOG_RANGE: &str = concat!(
    "SELECT partition_no, msg_offset, id, msg_key, headers, body, ",
    micros!("published_at"),
    " FROM {p}topic_log FORCE INDEX (PRIMARY) WHERE topic_id = ? AND partition_no = ? ",
    "AND msg_offset >= ? AND msg_offset < ? ORDER BY msg_offset"
);
/// Records by (partition, offset): exact buckets only (a padded row would come back twice).
pub(crate) const LOG_AT: &str = concat!(
    "SELECT l.partition_no, l.msg_offset, l.id, l.msg_key, l.headers, l.body, ",
    micros!("l.published_at"),
    " FROM ({rows}) v STRAIGHT_JOIN {p}topic_log l FORCE INDEX (PRIMARY) ",
    "ON l.topic_id = ? AND l.partition_no = v.p AND l.msg_offset = v.o"
);
pub(crate) const POSITION_ROW: &str = "SELECT CAST(? AS SIGNED) AS p, CAST(? AS SIGNED) AS o";
/// Leases already held on ids about to be leased again (after a reset back or a replay).
pub(crate) const HELD: &str = "SELECT id FROM {p}group_leases FORCE INDEX (PRIMARY) \
    WHERE group_id = ? AND id IN ({list}) FOR UPDATE";
/// The last token each offset of a range had (re-delivery after a reset back).
pub(crate) const PAST_TOKENS: &str = "SELECT msg_offset, token FROM {p}group_history FORCE INDEX (PRIMARY) \
    WHERE group_id = ? AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
/// Partitions with a record in flight or waiting to retry (strict order).
pub(crate) const OCCUPIED: &str = "SELECT DISTINCT partition_no FROM {p}group_leases FORCE INDEX (part) \
    WHERE group_id = ? AND partition_no IN ({list}) UNION SELECT DISTINCT partition_no \
    FROM {p}group_retries FORCE INDEX (part) WHERE group_id = ? AND partition_no IN ({list})";
pub(crate) const DELETE_RETRIES: &str = "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}group_retries t \
    FORCE INDEX (PRIMARY) ON t.group_id = ? AND t.id = v.id";
const INSERT_LEASES: &str = "INSERT INTO {p}group_leases (group_id, id, partition_no, msg_offset, \
    token, attempts, lease_until, claimed_at, owner) VALUES {list}";
const LEASE_ROW: &str = "(?,?,?,?,?,?,DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND),\
    DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND),?)";

/// Cursors locked per statement when the first one locked did not fill the claim.
const MORE_CURSORS: i64 = 3;

fn decode_cursor(row: &MySqlRow) -> Result<Cursor> {
    Ok(Cursor {
        partition: row.try_get(0)?,
        next: row.try_get(1)?,
        high: row.try_get(2)?,
        end: row.try_get::<Option<i64>, _>(3)?.unwrap_or(0),
        low: row.try_get::<Option<i64>, _>(4)?.unwrap_or(0),
        now_us: row.try_get(5)?,
    })
}

impl GroupClaim<MySql> for MySqlStore {
    /// Take up to `n` due retries of the group: locked (`SKIP LOCKED`) and deleted.
    async fn take_due_retries(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        n: usize,
    ) -> Result<Vec<DueRetry>> {
        let rows = sqlx::query(self.st.get(CLAIM_RETRIES))
            .bind(group_id)
            .bind(n as i64)
            .fetch_all(&mut *conn)
            .await?;
        let retries = rows
            .iter()
            .map(|row| {
                Ok(DueRetry {
                    id: id_at(row, 0)?,
                    partition: row.try_get(1)?,
                    offset: row.try_get(2)?,
                    attempts: row.try_get(3)?,
                    token: row.try_get(4)?,
                    now_us: row.try_get(5)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if !retries.is_empty() {
            let ids: Vec<MessageId> = retries.iter().map(|r| r.id).collect();
            self.exec_group_ids(conn, DELETE_RETRIES, GroupIds::GroupLast, group_id, &ids)
                .await?;
        }
        Ok(retries)
    }

    /// Write the lease rows of a claim's deliveries.
    async fn insert_group_leases(
        &self,
        conn: &mut MySqlConnection,
        new: &NewGroupLeases<'_>,
    ) -> Result<()> {
        insert_values(
            &self.st,
            conn,
            INSERT_LEASES,
            LEASE_ROW,
            new.deliveries,
            MAX_LIST,
            |q, d| {
                q.bind(new.group_id)
                    .bind(d.id.bytes())
                    .bind(d.partition.unwrap_or(0) as i32)
                    .bind(d.offset.unwrap_or(0))
                    .bind(d.token as i64)
                    .bind(d.attempt as i32)
                    .bind(new.until_us)
                    .bind(new.claimed_us)
                    .bind(new.owner.as_bytes())
            },
        )
        .await
    }

    /// Lock cursors with work: the first from `scan.start` on (wrapping), then a few more if
    /// they do not hold `scan.want` records; when all are busy, wait for one.
    async fn lock_cursors(
        &self,
        conn: &mut MySqlConnection,
        scan: &CursorScan,
    ) -> Result<Vec<Cursor>> {
        let CursorScan {
            group_id,
            topic_id,
            partitions,
            start,
            want,
        } = *scan;
        // `partitions` may be stale (partitions only grow): the first range is open-ended.
        let start = start.rem_euclid(partitions.max(1) as i32);
        let mut ranges = vec![(start, i32::MAX)];
        if start > 0 {
            ranges.push((0, start));
        }
        let available =
            |locked: &[Cursor]| -> i64 { locked.iter().map(|c| c.end - c.next.max(c.low)).sum() };
        let mut locked: Vec<Cursor> = Vec::new();
        let mut limit = 1;
        'ranges: for (lo, hi) in ranges {
            let mut from = lo;
            while from < hi {
                let rows = sqlx::query(self.st.get(LOCK_CURSORS))
                    .bind(topic_id)
                    .bind(topic_id)
                    .bind(group_id)
                    .bind(from)
                    .bind(hi)
                    .bind(topic_id)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await?;
                let got = rows.len() as i64;
                for row in &rows {
                    let c = decode_cursor(row)?;
                    from = c.partition + 1;
                    locked.push(c);
                }
                if available(&locked) >= want as i64 {
                    break 'ranges;
                }
                if got < limit {
                    break; // nothing more with work in this range
                }
                limit = MORE_CURSORS;
            }
        }
        if !locked.is_empty() {
            return Ok(locked);
        }
        // Every partition with work is being claimed by someone else: queue up for one.
        let busy = sqlx::query(self.st.get(BUSY_CURSOR))
            .bind(group_id)
            .bind(topic_id)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(busy) = busy else {
            return Ok(Vec::new());
        };
        let partition: i32 = busy.try_get(0)?;
        let Some(row) = sqlx::query(self.st.get(WAIT_CURSOR))
            .bind(topic_id)
            .bind(topic_id)
            .bind(group_id)
            .bind(partition)
            .fetch_optional(&mut *conn)
            .await?
        else {
            return Ok(Vec::new());
        };
        let mut c = decode_cursor(&row)?;
        // The subqueries read the partition before the wait: read its end again.
        if let Some(p) = sqlx::query(self.st.get(PARTITION_NOW))
            .bind(topic_id)
            .bind(partition)
            .fetch_optional(&mut *conn)
            .await?
        {
            c.end = p.try_get(0)?;
            c.low = p.try_get(1)?;
        }
        Ok(if c.next.max(c.low) < c.end || c.next < c.low {
            vec![c]
        } else {
            Vec::new()
        })
    }

    /// Partitions among `parts` with a record in flight or waiting to retry.
    async fn occupied(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        parts: &[i32],
    ) -> Result<HashSet<i32>> {
        let mut out = HashSet::new();
        for chunk in parts.chunks(MAX_LIST) {
            let mut q = sqlx::query(self.st.list(OCCUPIED, "?", bucket(chunk.len())));
            for _ in 0..2 {
                q = q.bind(group_id);
                for p in padded(chunk) {
                    q = q.bind(*p);
                }
            }
            for row in q.fetch_all(&mut *conn).await? {
                out.insert(row.try_get::<i32, _>(0)?);
            }
        }
        Ok(out)
    }

    /// Which of `ids` the group has in flight (locking: waits for a lease being written).
    async fn held(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<HashSet<MessageId>> {
        let mut out = HashSet::new();
        for chunk in ids.chunks(MAX_LIST) {
            let mut q = sqlx::query(self.st.list(HELD, "?", bucket(chunk.len()))).bind(group_id);
            for id in padded(chunk) {
                q = q.bind(id.bytes());
            }
            for row in q.fetch_all(&mut *conn).await? {
                out.insert(id_at(&row, 0)?);
            }
        }
        Ok(out)
    }

    async fn past_tokens(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        partition: i32,
        from: i64,
        to: i64,
    ) -> Result<HashMap<i64, i64>> {
        let rows = sqlx::query(self.st.get(PAST_TOKENS))
            .bind(group_id)
            .bind(partition)
            .bind(from)
            .bind(to)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }

    /// The records of one partition in `[from, to)`.
    async fn log_range(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        partition: i32,
        from: i64,
        to: i64,
    ) -> Result<Vec<LoggedRow>> {
        let rows = sqlx::query(self.st.get(LOG_RANGE))
            .bind(topic_id)
            .bind(partition)
            .bind(from)
            .bind(to)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(decode_logged).collect()
    }

    /// The records at `(partition, offset)` positions (those retention has not removed).
    async fn records_at(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        positions: &[(i32, i64)],
    ) -> Result<Vec<LoggedRow>> {
        let mut out = Vec::with_capacity(positions.len());
        let mut rest = positions;
        for size in split_into_buckets(positions.len(), MAX_LIST) {
            let (chunk, tail) = rest.split_at(size);
            let mut q = sqlx::query(self.st.list(LOG_AT, POSITION_ROW, size));
            for (partition, offset) in chunk {
                q = q.bind(*partition).bind(*offset);
            }
            for row in q.bind(topic_id).fetch_all(&mut *conn).await? {
                out.push(decode_logged(&row)?);
            }
            rest = tail;
        }
        Ok(out)
    }
}

/// Decode `partition_no, msg_offset, id, msg_key, headers, body, published_us`.
fn decode_logged(row: &MySqlRow) -> Result<LoggedRow> {
    Ok(LoggedRow {
        partition: row.try_get(0)?,
        offset: row.try_get(1)?,
        id: id_at(row, 2)?,
        key: opt_text_at(row, 3)?,
        headers: headers_at(row, 4)?,
        body: row.try_get(5)?,
        published_us: row.try_get(6)?,
        token: 0,
    })
}
