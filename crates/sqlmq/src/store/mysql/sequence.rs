//! Publishing and sequencing: how offsets stay dense and never skip a late committer.
//!
//! `publish` writes a row into `topic_pending` only: no offset yet, no shared row touched, so
//! concurrent producers scale like plain INSERTs and commit in any order. A *sequencing step*
//! then gives committed pending rows their offsets:
//!
//! 1. lock the partition's counter row (`topic_partitions`, `FOR UPDATE`): one step per
//!    partition at a time, whichever process runs it (the lock is the sequencer's lease, held
//!    only for the step's transaction);
//! 2. read pending rows of the partition with `FOR UPDATE SKIP LOCKED`: rows whose producer has
//!    not committed are still locked by their inserts, so they are skipped, not waited for;
//! 3. copy them into `topic_log` with the next offsets, server-side (bodies never travel), delete
//!    them from `topic_pending`, advance the counter; commit. Steps 1 and 2 are one round trip,
//!    step 3 another (see `script.rs`). The copy's `SELECT` is a locking
//!    read (`FOR UPDATE`): at READ COMMITTED a plain `INSERT … SELECT` reads through a fresh
//!    read view, and a row whose producer's commit the server has not yet made visible to new
//!    views would be silently left out (then deleted by the next statement: a lost record and an
//!    empty offset). A locking read reads the newest committed version of the rows this step
//!    already holds, whatever the views, and would wait rather than skip. The step still checks
//!    that the copy logged as many rows as it took offsets (`Script::expect_changed`, in the
//!    same script), and starts again if not.
//!
//! Offsets become visible only through these serialized commits, each covering a dense range
//! after the previous one: a reader that sees offset N also sees every offset below N, and a
//! producer that commits late simply gets a later offset (the no skipped offsets guarantee of the guide (docs/guide/src/guarantees.md)). Ids already in the log
//! (an idempotent retry that raced with sequencing) are dropped from `topic_pending` instead of
//! being logged twice.

use std::collections::HashSet;

use sqlx::{MySqlConnection, Row};

use super::script::{Lit, Script, changed_other_than_expected};
use super::{MySqlStore, micros};
use crate::domain::MessageId;
use crate::domain::{Error, Result};
use crate::failpoints::hit;
use crate::store::Publish;
use crate::store::body::{Columns, Statement};
use crate::store::rows::PendingBatch;
use crate::store::statements::padded;
use crate::store::statements::{MAX_LIST, bucket};
use std::collections::BTreeMap;

pub(crate) const INSERT_PENDING: &str = "INSERT INTO {p}topic_pending \
    (topic_id, partition_no, id, msg_key, headers, body, published_at) VALUES {list}";
const PENDING_ROW: &str = "(?,?,?,?,?,?,UTC_TIMESTAMP(6))";
/// Placeholders per pending row.
const PENDING_PARAMS: usize = 6;
/// Ids of `ids` already in the log or pending (idempotent publish).
pub(crate) const KNOWN_IDS: &str = "SELECT id FROM {p}topic_log FORCE INDEX (id) WHERE id IN ({list}) \
    UNION ALL SELECT id FROM {p}topic_pending FORCE INDEX (id) WHERE id IN ({list})";

/// A record published but not sequenced yet (its producer committed; no offset so far).
pub(crate) const PENDING_BY_ID: &str = "SELECT topic_id, partition_no FROM {p}topic_pending \
    FORCE INDEX (id) WHERE id = ?";
pub(crate) const PENDING_PARTITIONS: &str = "SELECT partition_no, COUNT(*) FROM {p}topic_pending \
    FORCE INDEX (PRIMARY) WHERE topic_id = ? GROUP BY partition_no";

/// Lock the counters of partitions (`{list}` of them, after the topic), in partition order:
/// `partition_no, next_offset, sequencing time`.
pub(crate) const LOCK_COUNTERS: &str = concat!(
    "SELECT partition_no, next_offset, ",
    micros!("GREATEST(last_at, UTC_TIMESTAMP(6))"),
    " FROM {p}topic_partitions FORCE INDEX (PRIMARY) WHERE topic_id = ? ",
    "AND partition_no IN ({list}) ORDER BY partition_no FOR UPDATE"
);
/// Committed pending rows of partitions (topic, `{list}` of partitions, limit), in partition
/// then id order: `partition_no, id, body length, whether the log holds the id`.
pub(crate) const CLAIM_PENDING: &str = "SELECT p.partition_no, p.id, LENGTH(p.body), \
    l.id IS NOT NULL FROM {p}topic_pending p FORCE INDEX (PRIMARY) \
    LEFT JOIN {p}topic_log l FORCE INDEX (id) ON l.id = p.id \
    WHERE p.topic_id = ? AND p.partition_no IN ({list}) ORDER BY p.partition_no, p.id LIMIT ? \
    FOR UPDATE SKIP LOCKED";
pub(crate) const LOG_PENDING: &str = "INSERT INTO {p}topic_log (topic_id, partition_no, msg_offset, \
    id, msg_key, headers, body, published_at, sequenced_at) \
    SELECT p.topic_id, p.partition_no, v.o, p.id, p.msg_key, p.headers, p.body, p.published_at, \
    DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND) \
    FROM ({rows}) v STRAIGHT_JOIN {p}topic_pending p FORCE INDEX (PRIMARY) \
    ON p.topic_id = ? AND p.partition_no = ? AND p.id = v.id FOR UPDATE";
const OFFSET_ROW: &str = "SELECT CAST(? AS BINARY) AS id, CAST(? AS SIGNED) AS o";
pub(crate) const DELETE_PENDING: &str =
    "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}topic_pending t FORCE INDEX (id) ON t.id = v.id";
const ADVANCE: &str = "UPDATE {p}topic_partitions SET next_offset = next_offset + ?, \
    bytes = bytes + ?, last_at = DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND) \
    WHERE topic_id = ? AND partition_no = ?";

impl Publish for sqlx::MySql {
    /// Which of `ids` are already published (logged or pending).
    async fn known_topic_ids(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        ids: &[MessageId],
    ) -> Result<HashSet<MessageId>> {
        let mut known = HashSet::new();
        for chunk in ids.chunks(MAX_LIST / 2) {
            let n = bucket(chunk.len());
            let mut q = sqlx::query(store.st.list(KNOWN_IDS, "?", n));
            for _ in 0..2 {
                for id in padded(chunk) {
                    q = q.bind(id.bytes());
                }
            }
            for row in q.fetch_all(&mut *conn).await? {
                known.insert(row.id_at(0)?);
            }
        }
        Ok(known)
    }

    /// Insert pending rows (no offsets yet).
    async fn insert_pending(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        batch: &PendingBatch<'_>,
    ) -> Result<()> {
        let topic_id = batch.topic_id;
        store
            .insert_values(
                conn,
                INSERT_PENDING,
                PENDING_ROW,
                PENDING_PARAMS,
                batch.rows,
                |q, r| {
                    q.arg(topic_id)
                        .arg(r.partition)
                        .arg(r.id.bytes())
                        .arg(r.key)
                        .arg(r.headers.as_deref().map(str::as_bytes))
                        .arg(r.body)
                },
            )
            .await
    }

    /// One sequencing step for some partitions (see the module docs), inside the caller's
    /// transaction. Returns how many pending rows it consumed (logged or dropped as
    /// duplicates).
    async fn sequence_step(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        topic_id: i32,
        partitions: &[i32],
        limit: usize,
    ) -> Result<usize> {
        if partitions.is_empty() {
            return Ok(0);
        }
        // Two round trips: the counters' locks with the claim of the pending rows, then the
        // copies, their checks, the deletes and the counters' advances (see `script.rs`).
        let t = i64::from(topic_id);
        let parts: Vec<Lit<'_>> = partitions.iter().map(|&p| Lit::Int(p.into())).collect();
        let mut read = Script::new(store);
        let mut args = vec![Lit::Int(t)];
        args.extend(&parts);
        read.push(&store.st.list_text(LOCK_COUNTERS, "?", parts.len()), &args);
        args.push(Lit::Int(limit as i64));
        read.push(&store.st.list_text(CLAIM_PENDING, "?", parts.len()), &args);
        let rows = read.fetch_in(conn).await?;
        // A counter's row has three columns, each pending row four.
        let mut counters: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
        for row in rows.iter().filter(|r| r.len() == 3) {
            counters.insert(row.try_get(0)?, (row.try_get(1)?, row.try_get(2)?));
        }
        if counters.is_empty() {
            return Ok(0); // no such partition (yet): nothing to sequence
        }
        hit("sequence.locked").await;
        // Per partition: every claimed id, the fresh ones (not in the log yet), their bytes.
        // Rows of a partition without a counter are left alone, as a step of that partition
        // alone would leave them.
        let mut claimed: BTreeMap<i32, (Vec<MessageId>, i64)> = BTreeMap::new();
        let mut all = Vec::new();
        for row in rows.iter().filter(|r| r.len() == 4) {
            let partition: i32 = row.try_get(0)?;
            if !counters.contains_key(&partition) {
                continue;
            }
            let id = row.id_at(1)?;
            all.push(id);
            if row.try_get::<i64, _>(3)? == 0 {
                let (fresh, bytes) = claimed.entry(partition).or_default();
                fresh.push(id);
                *bytes += row.try_get::<Option<i64>, _>(2)?.unwrap_or(0);
            }
        }
        if all.is_empty() {
            return Ok(0);
        }
        hit("sequence.claimed").await;
        let mut write = Script::new(store);
        for (&partition, (fresh, bytes)) in &claimed {
            let (next_offset, now_us) = counters[&partition];
            let p = i64::from(partition);
            // Exact sizes, never padding: a repeated row would be inserted twice.
            let mut offset = next_offset;
            for chunk in fresh.chunks(MAX_LIST) {
                let mut args = vec![Lit::Int(now_us)];
                for (i, id) in chunk.iter().enumerate() {
                    args.extend([Lit::Bytes(id.bytes()), Lit::Int(offset + i as i64)]);
                }
                args.extend([Lit::Int(t), Lit::Int(p)]);
                write.push(
                    &store.st.list_text(LOG_PENDING, OFFSET_ROW, chunk.len()),
                    &args,
                );
                // Cannot fail while the copy is a locking read of rows this step holds (see
                // the module docs); kept as a last guard because logging fewer rows than
                // offsets taken would leave a hole, and the DELETE below would then lose the
                // record: the script stops here and the step starts again instead.
                write.expect_changed(chunk.len());
                offset += chunk.len() as i64;
            }
            write.push(
                store.st.get(ADVANCE).as_str(),
                &[
                    Lit::Int(fresh.len() as i64),
                    Lit::Int(*bytes),
                    Lit::Int(now_us),
                    Lit::Int(t),
                    Lit::Int(p),
                ],
            );
        }
        for chunk in all.chunks(MAX_LIST) {
            let ids: Vec<Lit<'_>> = chunk.iter().map(|id| Lit::Bytes(id.bytes())).collect();
            write.push(&store.st.list_text(DELETE_PENDING, "", chunk.len()), &ids);
        }
        match write.run_in(conn).await {
            Ok(()) => Ok(all.len()),
            Err(e) if changed_other_than_expected(&e) => {
                metrics::counter!(crate::telemetry::catalogue::SEQUENCE_RETRIES.name())
                    .increment(1);
                Err(Error::retry_transaction(
                    "a pending record locked by the sequencer was not yet visible to its copy",
                ))
            }
            Err(e) => Err(e),
        }
    }

    /// Committed records without an offset yet, by partition.
    async fn pending_partitions(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        topic_id: i32,
    ) -> Result<BTreeMap<i32, i64>> {
        let rows = sqlx::query(store.st.get(PENDING_PARTITIONS))
            .bind(topic_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }

    /// The topic and partition of a record still waiting for its offset.
    async fn pending_by_id(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        id: MessageId,
    ) -> Result<Option<(i32, i32)>> {
        let row = sqlx::query(store.st.get(PENDING_BY_ID))
            .bind(id.bytes())
            .fetch_optional(&mut *conn)
            .await?;
        row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
    }
}
