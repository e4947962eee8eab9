//! Enqueue: idempotency keys, message rows, and routing into `ready`/`scheduled`/`blocked`.
//!
//! What SQLite makes simpler than MySQL: the batch runs in a write transaction that has the
//! database to itself, so no concurrent sender of the same idempotency key can commit between
//! our read of `dedup` and our insert. The MySQL backend's retry loop for that race is gone, and
//! a key whose window has passed is simply overwritten by the upsert that records the new one
//! (MySQL deletes it first). A caller's own transaction opened with a deferred `BEGIN` is safe
//! too: its first write fails with `SQLITE_BUSY_SNAPSHOT` (retryable) if another connection
//! wrote since its read.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::{Row, Sqlite, SqliteConnection};

use super::keys::Keyed;
use super::{SqliteStore, id_at, insert_values, now_us};
use crate::domain::{Error, Message, MessageId, Result, Sent};
use crate::store::Enqueue;
use crate::store::resend::{PendingRow, mark_known, pending_ids, skip_known};
use crate::store::rows::{Entry, SendBatch};
use crate::store::statements::{MAX_LIST, bucket, padded};

const INSERT_MESSAGES: &str = "INSERT INTO {p}messages \
    (id, queue_id, priority, ordering_key, idempotency_key, headers, body, created_at) VALUES {list}";
const MESSAGE_ROW: &str = concat!("(?,?,?,?,?,?,?,", now_us!(), ")");
/// Placeholders per message row.
const MESSAGE_PARAMS: usize = 7;

const INSERT_READY: &str =
    "INSERT INTO {p}ready (queue_id, priority, id, attempts, token) VALUES {list}";
const READY_ROW: &str = "(?,?,?,?,?)";
const READY_PARAMS: usize = 5;

const INSERT_SCHEDULED: &str =
    "INSERT INTO {p}scheduled (id, queue_id, priority, run_at, attempts, token) VALUES {list}";
const SCHEDULED_ROW: &str = concat!("(?,?,?,", now_us!(), " + ?,?,?)");
const SCHEDULED_PARAMS: usize = 6;

const SELECT_DEDUP: &str = concat!(
    "SELECT idempotency_key, id, expires_at > ",
    now_us!(),
    " FROM {p}dedup WHERE queue_id = ? AND idempotency_key IN ({list})"
);
/// Record new idempotency keys; a row left over from a passed window is replaced.
const UPSERT_DEDUP: &str = "INSERT INTO {p}dedup (queue_id, idempotency_key, id, expires_at) \
    VALUES {list} ON CONFLICT (queue_id, idempotency_key) \
    DO UPDATE SET id = excluded.id, expires_at = excluded.expires_at";
const DEDUP_ROW: &str = concat!("(?,?,?,", now_us!(), " + ?)");
const DEDUP_PARAMS: usize = 4;

/// Which of a list of ids are stored messages.
const ANY_MESSAGE: &str = "SELECT id FROM {p}messages WHERE id IN ({list})";

/// Bytes one message row adds to an INSERT (a generous estimate).
fn row_bytes(m: &Message, headers: Option<&String>) -> usize {
    64 + m.body.len()
        + headers.map_or(0, String::len)
        + m.ordering_key.as_ref().map_or(0, String::len)
        + m.idempotency_key.as_ref().map_or(0, String::len)
}

impl Enqueue<Sqlite> for SqliteStore {
    /// Enqueue `msgs` into `queue` inside the caller's transaction. Returns one [`Sent`] per
    /// message, in order. Statements are split to respect `budget` bytes and SQLite's parameter
    /// limit; atomicity comes from the enclosing transaction.
    async fn send(&self, conn: &mut SqliteConnection, batch: &SendBatch<'_>) -> Result<Vec<Sent>> {
        let SendBatch {
            queue_id,
            dedup_window,
            messages: msgs,
            budget,
        } = *batch;
        let mut out: Vec<Sent> = msgs
            .iter()
            .map(|m| Sent {
                id: m.id,
                duplicate: false,
            })
            .collect();
        let mut fresh = self
            .check_idempotency(conn, queue_id, dedup_window, msgs, &mut out)
            .await?;
        if fresh.is_empty() {
            return Ok(out);
        }
        // Ids sent before (or twice in this batch) are no-ops returning the original.
        let known = self
            .insert_messages(conn, queue_id, msgs, &fresh, budget)
            .await?;
        mark_known(known, &mut out, &mut fresh);

        let mut placed = Vec::new();
        let mut keyed = Vec::new();
        for m in fresh.iter().map(|&i| &msgs[i]) {
            let entry = Entry {
                id: m.id,
                priority: m.priority,
                attempts: 0,
                token: 0,
            };
            let delay_us = m.delay.as_micros().min(i64::MAX as u128) as i64;
            match &m.ordering_key {
                None => placed.push((entry, delay_us)),
                Some(key) => keyed.push(Keyed {
                    key: key.clone(),
                    entry,
                    delay_us,
                }),
            }
        }
        self.place(conn, queue_id, &placed).await?;
        self.enqueue_keyed(conn, queue_id, keyed).await?;
        Ok(out)
    }

    /// None: SQLite runs in this process, so a send pays no round trips to save.
    type SendScript = std::convert::Infallible;

    fn prepare_send_script(&self, _batch: &SendBatch<'_>) -> Result<Option<Self::SendScript>> {
        Ok(None)
    }

    async fn send_script(
        &self,
        _conn: &mut SqliteConnection,
        script: &Self::SendScript,
    ) -> Result<()> {
        match *script {}
    }

    /// How many of `ids` are stored messages (one writer: no COMMIT can be in flight here).
    async fn count_stored_messages(
        &self,
        conn: &mut SqliteConnection,
        ids: &[MessageId],
    ) -> Result<usize> {
        Ok(super::fetch_id_list(&self.st, conn, ANY_MESSAGE, ids)
            .await?
            .len())
    }
}

impl SqliteStore {
    /// Insert the rows of `msgs[fresh]`, in statements bounded by `budget` bytes and the
    /// parameter limit. Returns the indices (into `msgs`) of messages not inserted because
    /// their id is stored already or repeats an earlier one of the batch (see `store/resend.rs`).
    async fn insert_messages(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        msgs: &[Message],
        fresh: &[usize],
        budget: usize,
    ) -> Result<Vec<usize>> {
        let headers: Vec<Option<String>> = fresh
            .iter()
            .map(|&i| &msgs[i])
            .map(|m| {
                (!m.headers.is_empty())
                    .then(|| serde_json::to_string(&m.headers))
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        let mut rows: Vec<PendingRow<'_>> = fresh
            .iter()
            .zip(headers.iter().map(Option::as_ref))
            .map(|(&i, h)| (i, &msgs[i], h))
            .collect();
        let mut known = Vec::new();
        let mut start = 0;
        while start < rows.len() {
            // Greedy chunk under the byte budget (at least one row: a single message is already
            // checked against the payload limit, which is below the budget); `insert_values`
            // splits it further for the parameter limit.
            let mut end = start;
            let mut bytes = 0;
            while end < rows.len() {
                let b = row_bytes(rows[end].1, rows[end].2);
                if end > start && bytes + b > budget {
                    break;
                }
                bytes += b;
                end += 1;
            }
            let inserted = insert_values(
                &self.st,
                conn,
                INSERT_MESSAGES,
                MESSAGE_ROW,
                MESSAGE_PARAMS,
                &rows[start..end],
                |q, (_, m, h)| {
                    q.bind(m.id.bytes())
                        .bind(queue_id)
                        .bind(m.priority)
                        .bind(m.ordering_key.as_deref().map(str::as_bytes))
                        .bind(m.idempotency_key.as_deref().map(str::as_bytes))
                        .bind(h.map(|s| s.as_bytes()))
                        .bind(m.body.as_slice())
                },
            )
            .await;
            match inserted {
                Ok(()) => start = end,
                Err(e) if e.is_duplicate_key() => {
                    let ids = pending_ids(&rows, start);
                    let found = super::fetch_id_list(&self.st, conn, ANY_MESSAGE, &ids).await?;
                    let stored = found.iter().map(|r| id_at(r, 0)).collect::<Result<_>>()?;
                    skip_known(e, &mut rows, start, &stored, &mut known)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(known)
    }

    /// Put entries into `ready` (no delay left) or `scheduled` (delay in microseconds).
    pub(crate) async fn place(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        entries: &[(Entry, i64)],
    ) -> Result<()> {
        let (now, later): (Vec<_>, Vec<_>) = entries.iter().partition(|(_, delay)| *delay <= 0);
        insert_values(
            &self.st,
            conn,
            INSERT_READY,
            READY_ROW,
            READY_PARAMS,
            &now,
            |q, (e, _)| {
                q.bind(queue_id)
                    .bind(e.priority)
                    .bind(e.id.bytes())
                    .bind(e.attempts)
                    .bind(e.token)
            },
        )
        .await?;
        insert_values(
            &self.st,
            conn,
            INSERT_SCHEDULED,
            SCHEDULED_ROW,
            SCHEDULED_PARAMS,
            &later,
            |q, (e, d)| {
                q.bind(e.id.bytes())
                    .bind(queue_id)
                    .bind(e.priority)
                    .bind(*d)
                    .bind(e.attempts)
                    .bind(e.token)
            },
        )
        .await
    }

    /// Resolve idempotency keys: fills `out` for duplicates and returns the indices of the
    /// messages to insert, in order, after recording their keys.
    async fn check_idempotency(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        dedup_window: Duration,
        msgs: &[Message],
        out: &mut [Sent],
    ) -> Result<Vec<usize>> {
        let mut fresh = Vec::with_capacity(msgs.len());
        let mut first_with_key: HashMap<&str, usize> = HashMap::new();
        let mut in_batch_dups = Vec::new();
        let mut keyed = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            match m.idempotency_key.as_deref() {
                None => fresh.push(i),
                Some(k) => match first_with_key.get(k) {
                    Some(&first) => in_batch_dups.push((i, first)),
                    None => {
                        first_with_key.insert(k, i);
                        keyed.push(i);
                    }
                },
            }
        }
        if keyed.is_empty() {
            return Ok(fresh);
        }
        let window_us = dedup_window.as_micros().min(i64::MAX as u128) as i64;
        let key_of = |i: usize| msgs[i].idempotency_key.as_deref().unwrap_or_default();

        let existing = self
            .existing_dedup(conn, queue_id, keyed.iter().map(|&i| key_of(i)))
            .await?;
        let mut new_keys = Vec::new();
        for &i in &keyed {
            match existing.get(key_of(i)) {
                Some(&(id, true)) => {
                    out[i] = Sent {
                        id,
                        duplicate: true,
                    }
                }
                // Unknown, or remembered from a window that has passed: a new message.
                Some(&(_, false)) | None => new_keys.push(i),
            }
        }
        insert_values(
            &self.st,
            conn,
            UPSERT_DEDUP,
            DEDUP_ROW,
            DEDUP_PARAMS,
            &new_keys,
            |q, &i| {
                q.bind(queue_id)
                    .bind(key_of(i).as_bytes())
                    .bind(msgs[i].id.bytes())
                    .bind(window_us)
            },
        )
        .await?;
        for (dup, first) in in_batch_dups {
            out[dup] = Sent {
                id: out[first].id,
                duplicate: true,
            };
        }
        fresh.append(&mut new_keys);
        fresh.sort_unstable();
        Ok(fresh)
    }

    /// Idempotency keys of `queue_id` already recorded: key -> (message id, still in window).
    async fn existing_dedup<'k>(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        keys: impl Iterator<Item = &'k str>,
    ) -> Result<HashMap<String, (MessageId, bool)>> {
        let keys: Vec<&str> = keys.collect();
        let mut found = HashMap::new();
        for chunk in keys.chunks(MAX_LIST) {
            let mut q =
                sqlx::query(self.st.list(SELECT_DEDUP, "?", bucket(chunk.len()))).bind(queue_id);
            for k in padded(chunk) {
                q = q.bind(k.as_bytes());
            }
            for row in q.fetch_all(&mut *conn).await? {
                let key = String::from_utf8(row.try_get::<Vec<u8>, _>(0)?)
                    .map_err(|e| Error::Corrupt(format!("idempotency key: {e}")))?;
                found.insert(key, (id_at(&row, 1)?, row.try_get::<i64, _>(2)? != 0));
            }
        }
        Ok(found)
    }
}
