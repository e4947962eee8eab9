//! Enqueue's statements: idempotency keys, message rows, and putting messages in line
//! (`ready`, `scheduled`, or behind their key). Which to run, and in what order, is the
//! engine's (`queue/enqueue.rs`).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::fair::{INSERT_READY_FAIR, READY_FAIR_PARAMS, READY_FAIR_ROW};
use super::slots::stored_key_of_message;
use super::{Columns, SqlStore, Statement};
use crate::domain::{Error, MessageId, Result, micros_of};
use crate::store::Backend;
use crate::store::rows::{Entry, MessageRow};
use crate::store::statements::{MAX_LIST, bucket, padded};

/// Enqueue's statements that differ by backend.
pub struct EnqueueSql {
    /// Insert messages (`{list}` of [`EnqueueSql::message_row`]).
    pub insert_messages: &'static str,
    /// One message row: id, queue, priority, ordering key, idempotency key, headers, body,
    /// fairness key (the creation time is the database clock's).
    pub message_row: &'static str,
    /// One row of [`INSERT_SCHEDULED`]: id, queue, priority, delay (µs), attempts, token.
    pub scheduled_row: &'static str,
    /// Recorded idempotency keys (queue, `{list}` of keys): `idempotency_key, id, whether its
    /// window is still open`.
    pub select_keys: &'static str,
    /// Delete recorded keys whose window has passed (`{rows}`/`{list}` of
    /// [`EnqueueSql::key_row`]: queue, key).
    pub forget_keys: &'static str,
    /// One (queue, key) of a list of `dedup` primary keys.
    pub key_row: &'static str,
    /// One row of [`INSERT_KEYS`]: queue, key, message id, window (µs).
    pub record_row: &'static str,
    /// Which of a list of ids are stored messages (`{list}` of ids): `id`.
    pub stored: &'static str,
    /// [`EnqueueSql::stored`] for the resolver of an unknown COMMIT: it waits for the row locks
    /// of a transaction whose COMMIT may still be in flight (on a server).
    pub stored_locking: &'static str,
    /// Give a message its deadline and run timeout: deadline (µs since the epoch, or NULL),
    /// run timeout (µs, or NULL), id.
    pub set_timing: &'static str,
    /// A message's `ready` row, locked (waiting for a claim that holds it) where the backend
    /// locks rows (id, queue): `priority, attempts, token`.
    pub waiting_ready: &'static str,
    /// Keep a recorded key at least this long from now (µs, queue, key).
    pub extend_key: &'static str,
}

/// Forget a recorded key if it still names this message (queue, key, id): the key moves on.
const UNRECORD_KEY: &str =
    "DELETE FROM {p}dedup WHERE queue_id = ? AND idempotency_key = ? AND id = ?";
/// A replacement's body and headers (body, headers, id).
const REPLACE_CONTENT: &str = "UPDATE {p}messages SET body = ?, headers = ? WHERE id = ?";

pub(crate) const INSERT_READY: &str =
    "INSERT INTO {p}ready (queue_id, priority, id, attempts, token) VALUES {list}";
pub(crate) const READY_ROW: &str = "(?,?,?,?,?)";
const READY_PARAMS: usize = 5;
const INSERT_SCHEDULED: &str =
    "INSERT INTO {p}scheduled (id, queue_id, priority, run_at, attempts, token) VALUES {list}";
const SCHEDULED_PARAMS: usize = 6;
const INSERT_KEYS: &str =
    "INSERT INTO {p}dedup (queue_id, idempotency_key, id, expires_at) VALUES {list}";
const KEY_PARAMS: usize = 4;

/// Enqueue: the statements of a send, in the caller's transaction (the engine's
/// `queue/enqueue.rs` decides which to run: idempotency keys first, then the message rows,
/// then each message where it belongs).
impl<B: Backend> SqlStore<B> {
    /// The idempotency keys of `queue_id` among `keys` that are recorded: key → (the message
    /// id recorded, whether its window is still open).
    pub(crate) async fn recorded_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        keys: &[&str],
    ) -> Result<HashMap<String, (MessageId, bool)>> {
        let mut found = HashMap::new();
        let rows = self
            .fetch_key_list(conn, B::ENQUEUE.select_keys, queue_id, keys)
            .await?;
        for row in rows {
            let key = String::from_utf8(row.col::<Vec<u8>>(0)?)
                .map_err(|e| Error::Corrupt(format!("idempotency key: {e}")))?;
            found.insert(key, (row.id_at(1)?, row.col::<i64>(2)? != 0));
        }
        Ok(found)
    }

    /// Forget recorded idempotency keys (whose window has passed) so that they can be
    /// recorded again.
    pub(crate) async fn forget_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        keys: &[&str],
    ) -> Result<()> {
        for chunk in keys.chunks(MAX_LIST) {
            let mut q = self.list_query(
                B::ENQUEUE.forget_keys,
                B::ENQUEUE.key_row,
                bucket(chunk.len()),
            );
            for k in padded(chunk) {
                q = q.arg(queue_id).arg(k.as_bytes());
            }
            q.run(conn).await?;
        }
        Ok(())
    }

    /// Record idempotency keys (key, the message it names) for `window`. A key recorded
    /// meanwhile by a concurrent sender fails it with a duplicate-key error; the failed
    /// statement wrote nothing.
    pub(crate) async fn record_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        keys: &[(&str, MessageId)],
        window: Duration,
    ) -> Result<()> {
        let window_us = micros_of(window);
        self.insert_values(
            conn,
            INSERT_KEYS,
            B::ENQUEUE.record_row,
            KEY_PARAMS,
            keys,
            |q, (key, id)| {
                q.arg(queue_id)
                    .arg(key.as_bytes())
                    .arg(id.bytes())
                    .arg(window_us)
            },
        )
        .await
    }

    /// Insert message rows with one statement: at most [`MAX_LIST`] rows, a bucket size (see
    /// `statements.rs`). An id stored already fails it with a duplicate-key error, and the
    /// failed statement inserted nothing (earlier statements of the transaction stay).
    ///
    /// [`MAX_LIST`]: super::statements::MAX_LIST
    pub(crate) async fn insert_messages(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        rows: &[MessageRow<'_>],
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut q = self.list_query(
            B::ENQUEUE.insert_messages,
            B::ENQUEUE.message_row,
            rows.len(),
        );
        for (m, headers) in rows {
            q = q
                .arg(m.id.bytes())
                .arg(queue_id)
                .arg(m.priority)
                .arg(stored_key_of_message(m).as_deref().map(str::as_bytes))
                .arg(m.idempotency_key.as_deref().map(str::as_bytes))
                .arg(headers.map(str::as_bytes))
                .arg(m.body.as_slice())
                .arg(m.fairness_key.as_deref().map(str::as_bytes));
        }
        q.run(conn).await?;
        Ok(())
    }

    /// Give messages just inserted their deadlines and run timeouts: `(id, deadline (µs since
    /// the epoch), run timeout (µs))`, one statement each (few messages have them).
    pub(crate) async fn set_timing(
        &self,
        conn: &mut B::Connection,
        timed: &[(MessageId, Option<i64>, Option<i64>)],
    ) -> Result<()> {
        for (id, deadline_us, run_timeout_us) in timed {
            self.query(B::ENQUEUE.set_timing)
                .arg(*deadline_us)
                .arg(*run_timeout_us)
                .arg(id.bytes())
                .run(conn)
                .await?;
        }
        Ok(())
    }

    /// Forget that `key` names message `id` (when it still does): the key is free to name
    /// another. False when it names another already (a concurrent sender moved it).
    pub(crate) async fn unrecord_key(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &str,
        id: MessageId,
    ) -> Result<bool> {
        let n = self
            .query(UNRECORD_KEY)
            .arg(queue_id)
            .arg(key.as_bytes())
            .arg(id.bytes())
            .run(conn)
            .await?;
        Ok(n > 0)
    }

    /// Keep recorded `key` of `queue_id` at least `window` from now: a replaced message waits
    /// on, and its key must keep naming it.
    pub(crate) async fn extend_key(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &str,
        window: Duration,
    ) -> Result<()> {
        self.query(B::ENQUEUE.extend_key)
            .arg(micros_of(window))
            .arg(queue_id)
            .arg(key.as_bytes())
            .run(conn)
            .await?;
        Ok(())
    }

    /// Replace waiting message `id` of `queue_id` (the queue its key belongs to): lock its
    /// `scheduled` or `ready` row (a claim holding it is waited for), give it `body` and
    /// `headers`, and put it back in line
    /// due `delay_us` from now with its priority, attempts and token. False, changing nothing,
    /// when it does not wait there (claimed, dead, blocked, gone).
    pub(crate) async fn replace_waiting(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        id: MessageId,
        (body, headers): (&[u8], Option<&str>),
        delay_us: i64,
    ) -> Result<bool> {
        // `scheduled` first: due messages move from there to `ready` (housekeeping's
        // promotion), so a message promoted between the two reads is found in the second.
        let entry = match self.take_scheduled(conn, id).await? {
            Some(entry) => entry,
            None => {
                let Some(row) = self
                    .query(B::ENQUEUE.waiting_ready)
                    .arg(id.bytes())
                    .arg(queue_id)
                    .first(conn)
                    .await?
                else {
                    return Ok(false);
                };
                let entry = Entry {
                    id,
                    priority: row.col(0)?,
                    attempts: row.col(1)?,
                    token: row.col(2)?,
                };
                self.delete_ready_row(conn, queue_id, entry.priority, id)
                    .await?;
                entry
            }
        };
        self.query(REPLACE_CONTENT)
            .arg(body)
            .arg(headers.map(str::as_bytes))
            .arg(id.bytes())
            .run(conn)
            .await?;
        self.place(conn, queue_id, &[(entry, delay_us)]).await?;
        Ok(true)
    }

    /// Which of `ids` are stored messages (a plain read that sees the transaction's own rows).
    pub(crate) async fn stored_messages(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> Result<HashSet<MessageId>> {
        let rows = self.fetch_id_list(conn, B::ENQUEUE.stored, ids).await?;
        rows.iter().map(|r| r.id_at(0)).collect()
    }

    /// Put messages in line: `ready` when no delay is left, else `scheduled` (delay in µs).
    /// On a fair queue each message going to `ready` gets its start time (`fair.rs`).
    pub(crate) async fn place(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        entries: &[(Entry, i64)],
    ) -> Result<()> {
        let (now, later): (Vec<_>, Vec<_>) = entries.iter().partition(|(_, delay)| *delay <= 0);
        if !now.is_empty() && self.is_fair(conn, queue_id).await? {
            let starts = self.start_times(conn, queue_id, &now).await?;
            let rows: Vec<_> = now.iter().zip(starts).collect();
            self.insert_values(
                conn,
                INSERT_READY_FAIR,
                READY_FAIR_ROW,
                READY_FAIR_PARAMS,
                &rows,
                |q, ((e, _), start)| {
                    q.arg(queue_id)
                        .arg(e.priority)
                        .arg(e.id.bytes())
                        .arg(e.attempts)
                        .arg(e.token)
                        .arg(*start)
                },
            )
            .await?;
        } else {
            self.insert_values(
                conn,
                INSERT_READY,
                READY_ROW,
                READY_PARAMS,
                &now,
                |q, (e, _)| {
                    q.arg(queue_id)
                        .arg(e.priority)
                        .arg(e.id.bytes())
                        .arg(e.attempts)
                        .arg(e.token)
                },
            )
            .await?;
        }
        self.insert_values(
            conn,
            INSERT_SCHEDULED,
            B::ENQUEUE.scheduled_row,
            SCHEDULED_PARAMS,
            &later,
            |q, (e, d)| {
                q.arg(e.id.bytes())
                    .arg(queue_id)
                    .arg(e.priority)
                    .arg(*d)
                    .arg(e.attempts)
                    .arg(e.token)
            },
        )
        .await
    }

    /// How many of `ids` (distinct) are stored messages (resolves a COMMIT with unknown
    /// outcome). The read must wait for a transaction that still holds those rows: when the client lost the
    /// connection right after sending COMMIT, the server may not have finished that COMMIT
    /// (or noticed the lost connection and rolled back) by the time the question arrives on
    /// another connection, and a consistent read would answer from before it.
    pub(crate) async fn count_stored_messages(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> Result<usize> {
        let rows = self
            .fetch_id_list(conn, B::ENQUEUE.stored_locking, ids)
            .await?;
        Ok(rows.len())
    }
}
