//! The cluster-group claim's statements. The claim itself (which records, in which order, with
//! which tokens: due retries first, strict order, retention floors) is the engine's
//! (`topic/claim.rs`); these are its reads and writes, in one `BEGIN IMMEDIATE` transaction.
//!
//! What is simpler than on MySQL: the claim's transaction has the database to itself, so
//! nothing needs locking, skipping or waiting for.
//!
//! - due retries are taken and deleted in one statement (`DELETE … RETURNING`);
//! - a cursor with work is simply read: no other claim can move it before this transaction
//!   commits, so there are no busy cursors to skip, and no waiting for one;
//! - a lease being written by another claim cannot exist meanwhile: `held` is a plain read.
//!
//! Offsets are handed out only below the partition's end (`topic_partitions.next_offset`),
//! which only committed publishes advance, each over a dense range (`publish.rs`): a cursor
//! never passes an offset that is not logged.

use std::collections::{HashMap, HashSet};

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection};

use super::{SqliteStore, headers_at, id_at, insert_values, now_us, opt_text_at};
use crate::domain::{MessageId, Result};
use crate::store::GroupClaim;
use crate::store::rows::{Cursor, CursorScan, DueRetry, LoggedRow, NewGroupLeases};
use crate::store::statements::{MAX_LIST, bucket, padded};

/// Take (delete) up to `?2` due retries of group `?1`, soonest first; `run_at` comes back for
/// that order (`RETURNING` gives rows in no particular order).
const TAKE_RETRIES: &str = concat!(
    "DELETE FROM {p}group_retries WHERE group_id = ?1 AND id IN (SELECT id FROM {p}group_retries ",
    "WHERE group_id = ?1 AND run_at <= ",
    now_us!(),
    " ORDER BY run_at, id LIMIT ?2) ",
    "RETURNING id, partition_no, msg_offset, attempts, token, ",
    now_us!(),
    ", run_at"
);
/// Up to `?5` cursors of group `?2` with work among partitions `[?3, ?4)` of topic `?1`, with
/// their partitions' end and first retained offset.
const CURSORS_WITH_WORK: &str = concat!(
    "SELECT c.partition_no, c.next_offset, c.high_offset, tp.next_offset, tp.low_offset, ",
    now_us!(),
    " FROM {p}group_cursors c JOIN {p}topic_partitions tp ",
    "ON tp.topic_id = ?1 AND tp.partition_no = c.partition_no ",
    "WHERE c.group_id = ?2 AND c.partition_no >= ?3 AND c.partition_no < ?4 ",
    "AND c.next_offset < tp.next_offset ORDER BY c.partition_no LIMIT ?5"
);
const LOG_RANGE: &str = "SELECT partition_no, msg_offset, id, msg_key, headers, body, \
    published_at FROM {p}topic_log WHERE topic_id = ? AND partition_no = ? \
    AND msg_offset >= ? AND msg_offset < ? ORDER BY msg_offset";
/// Records by (partition, offset): an `IN` list of row values (padding repeats a position,
/// which `IN` matches once). Through a subquery: older SQLite versions (3.40) look up a bare
/// `IN (VALUES …)` of row values by the first key column only, reading the whole topic; this
/// form gets the whole primary key on every version.
const LOG_AT: &str = "SELECT partition_no, msg_offset, id, msg_key, headers, body, \
    published_at FROM {p}topic_log WHERE topic_id = ? \
    AND (partition_no, msg_offset) IN (SELECT column1, column2 FROM (VALUES {list}))";
const POSITION_ROW: &str = "(?,?)";
/// Leases already held on ids about to be leased again (after a reset back or a replay).
const HELD: &str = "SELECT id FROM {p}group_leases WHERE group_id = ? AND id IN ({list})";
/// The last token each offset of a range had (re-delivery after a reset back).
const PAST_TOKENS: &str = "SELECT msg_offset, token FROM {p}group_history \
    WHERE group_id = ? AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?";
/// Partitions with a record in flight or waiting to retry (strict order).
const OCCUPIED: &str = "SELECT partition_no FROM {p}group_leases \
    WHERE group_id = ? AND partition_no IN ({list}) UNION SELECT partition_no \
    FROM {p}group_retries WHERE group_id = ? AND partition_no IN ({list})";
const INSERT_LEASES: &str = "INSERT INTO {p}group_leases (group_id, id, partition_no, msg_offset, \
    token, attempts, lease_until, claimed_at, owner) VALUES {list}";
const LEASE_ROW: &str = "(?,?,?,?,?,?,?,?,?)";

/// Cursors read per statement when the first one did not fill the claim.
const MORE_CURSORS: i64 = 3;

fn decode_cursor(row: &SqliteRow) -> Result<Cursor> {
    Ok(Cursor {
        partition: row.try_get(0)?,
        next: row.try_get(1)?,
        high: row.try_get(2)?,
        end: row.try_get(3)?,
        low: row.try_get(4)?,
        now_us: row.try_get(5)?,
    })
}

/// Decode `partition_no, msg_offset, id, msg_key, headers, body, published_at`.
fn decode_logged(row: &SqliteRow) -> Result<LoggedRow> {
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

impl GroupClaim<Sqlite> for SqliteStore {
    /// Take up to `n` due retries of the group, soonest first: deleted as they are read.
    async fn take_due_retries(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        n: usize,
    ) -> Result<Vec<DueRetry>> {
        let rows = sqlx::query(self.st.get(TAKE_RETRIES))
            .bind(group_id)
            .bind(n as i64)
            .fetch_all(&mut *conn)
            .await?;
        let mut taken = rows
            .iter()
            .map(|row| {
                let retry = DueRetry {
                    id: id_at(row, 0)?,
                    partition: row.try_get(1)?,
                    offset: row.try_get(2)?,
                    attempts: row.try_get(3)?,
                    token: row.try_get(4)?,
                    now_us: row.try_get(5)?,
                };
                Ok((row.try_get::<i64, _>(6)?, retry))
            })
            .collect::<Result<Vec<_>>>()?;
        taken.sort_by_key(|(run_at, r)| (*run_at, r.id));
        Ok(taken.into_iter().map(|(_, r)| r).collect())
    }

    /// Which of `ids` the group has in flight (no claim can be writing one meanwhile).
    async fn held(
        &self,
        conn: &mut SqliteConnection,
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

    /// The records at `(partition, offset)` positions (those retention has not removed).
    async fn records_at(
        &self,
        conn: &mut SqliteConnection,
        topic_id: i32,
        positions: &[(i32, i64)],
    ) -> Result<Vec<LoggedRow>> {
        let mut out = Vec::with_capacity(positions.len());
        for chunk in positions.chunks(MAX_LIST) {
            let mut q =
                sqlx::query(self.st.list(LOG_AT, POSITION_ROW, bucket(chunk.len()))).bind(topic_id);
            for (partition, offset) in padded(chunk) {
                q = q.bind(*partition).bind(*offset);
            }
            for row in q.fetch_all(&mut *conn).await? {
                out.push(decode_logged(&row)?);
            }
        }
        Ok(out)
    }

    /// Cursors with work: the first from `scan.start` on (wrapping), then a few more if they
    /// do not hold `scan.want` records. None is ever busy: the claim has the database to
    /// itself.
    async fn lock_cursors(
        &self,
        conn: &mut SqliteConnection,
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
            |found: &[Cursor]| -> i64 { found.iter().map(|c| c.end - c.next.max(c.low)).sum() };
        let mut found: Vec<Cursor> = Vec::new();
        let mut limit = 1;
        'ranges: for (lo, hi) in ranges {
            let mut from = lo;
            while from < hi {
                let rows = sqlx::query(self.st.get(CURSORS_WITH_WORK))
                    .bind(topic_id)
                    .bind(group_id)
                    .bind(from)
                    .bind(hi)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await?;
                let got = rows.len() as i64;
                for row in &rows {
                    let c = decode_cursor(row)?;
                    from = c.partition + 1;
                    found.push(c);
                }
                if available(&found) >= want as i64 {
                    break 'ranges;
                }
                if got < limit {
                    break; // nothing more with work in this range
                }
                limit = MORE_CURSORS;
            }
        }
        Ok(found)
    }

    /// Partitions among `parts` with a record in flight or waiting to retry.
    async fn occupied(
        &self,
        conn: &mut SqliteConnection,
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

    /// The records of one partition in `[from, to)`.
    async fn log_range(
        &self,
        conn: &mut SqliteConnection,
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

    async fn past_tokens(
        &self,
        conn: &mut SqliteConnection,
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

    /// Write the lease rows of a claim's deliveries.
    async fn insert_group_leases(
        &self,
        conn: &mut SqliteConnection,
        new: &NewGroupLeases<'_>,
    ) -> Result<()> {
        insert_values(
            &self.st,
            conn,
            INSERT_LEASES,
            LEASE_ROW,
            9,
            new.deliveries,
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
}

/// The query plans of the hot statements of topics and groups on the bundled SQLite: each reads
/// its table by a key (never a `SCAN` of a table), and lookups by position use the whole
/// primary key.
#[cfg(test)]
mod plans {
    use sqlx::{AssertSqlSafe, Connection, Row, SqlStr, SqliteConnection};

    use super::super::{group_settle, publish, stream};
    use super::*;
    use crate::store::{Schema, Server};

    /// The plan's lines (`EXPLAIN QUERY PLAN`; parameters left unbound are NULL).
    async fn plan(conn: &mut SqliteConnection, sql: SqlStr) -> Vec<String> {
        let explain = format!("EXPLAIN QUERY PLAN {}", sql.as_str());
        sqlx::query(AssertSqlSafe(explain))
            .fetch_all(&mut *conn)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>(3))
            .collect()
    }

    #[tokio::test]
    async fn hot_statements_read_by_key() {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        let store = SqliteStore::new("sqlmq_");
        store.migrate(&mut conn).await.unwrap();
        let st = &store.st;
        let cases: Vec<(&str, SqlStr, &str)> = vec![
            (
                "publish: take offsets",
                st.get(publish::TAKE_OFFSETS),
                "PRIMARY KEY (topic_id=? AND partition_no=?)",
            ),
            (
                "publish: known ids",
                st.list(publish::KNOWN_IDS, "?", 4),
                "sqlite_autoindex_sqlmq_topic_log_1 (id=?)",
            ),
            (
                "broadcast read",
                st.get(stream::READ_FROM),
                "PRIMARY KEY (topic_id=? AND partition_no=? AND msg_offset>?)",
            ),
            (
                "claim: due retries",
                st.get(TAKE_RETRIES),
                "sqlmq_group_retries_due (group_id=? AND run_at<?)",
            ),
            (
                "claim: cursors with work",
                st.get(CURSORS_WITH_WORK),
                "PRIMARY KEY (topic_id=? AND partition_no=?)",
            ),
            (
                "claim: records at positions",
                st.list(LOG_AT, POSITION_ROW, 4),
                "PRIMARY KEY (topic_id=? AND partition_no=? AND msg_offset=?)",
            ),
            (
                "claim: log range",
                st.get(LOG_RANGE),
                "PRIMARY KEY (topic_id=? AND partition_no=? AND msg_offset>? AND msg_offset<?)",
            ),
            (
                "claim: held",
                st.list(HELD, "?", 4),
                "PRIMARY KEY (group_id=? AND id=?)",
            ),
            (
                "claim: occupied",
                st.list(OCCUPIED, "?", 4),
                "sqlmq_group_retries_part (group_id=? AND partition_no=?)",
            ),
            (
                "settle: leases",
                st.list(group_settle::SQL.lock_leases, "?", 4),
                "PRIMARY KEY (group_id=? AND id=?)",
            ),
            (
                "settle: delete leases",
                st.list(group_settle::SQL.delete_leases, "?", 4),
                "PRIMARY KEY (group_id=? AND id=?)",
            ),
            (
                "settle: history events",
                st.list(group_settle::HISTORY_EVENTS, group_settle::POSITION_ROW, 4),
                "PRIMARY KEY (group_id=? AND partition_no=? AND msg_offset=?)",
            ),
            (
                "expiry: expired leases",
                st.get(group_settle::SQL.claim_expired),
                "sqlmq_group_leases_expiry (group_id=? AND lease_until<?)",
            ),
        ];
        for (name, sql, expect) in cases {
            let lines = plan(&mut conn, sql).await;
            assert!(
                lines.iter().any(|l| l.contains(expect)),
                "{name}: expected {expect:?} in {lines:#?}"
            );
            // Scans of the statement's own lists of values are fine.
            let own = |l: &str| {
                l.contains("CONSTANT ROWS")
                    || l.contains("VALUES CLAUSE")
                    || l.starts_with("SCAN (subquery")
            };
            assert!(
                !lines.iter().any(|l| l.starts_with("SCAN ") && !own(l)),
                "{name}: a table scan in {lines:#?}"
            );
        }
    }
}
