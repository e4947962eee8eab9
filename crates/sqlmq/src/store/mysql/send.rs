//! Enqueue: idempotency keys, message rows, and routing into `ready`/`scheduled`/`blocked`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sqlx::{MySqlConnection, Row};

use super::admin::ANY_MESSAGE;
use super::keys::Keyed;
use super::maintain::DEDUP_KEY_ROW;
use super::{MySqlStore, id_at, insert_values};
use crate::domain::{Error, Result};
use crate::domain::{Message, MessageId, Sent};
use crate::store::Enqueue;
use crate::store::resend::{PendingRow, mark_known, pending_ids, skip_known};
use crate::store::rows::Entry;
use crate::store::rows::SendBatch;
use crate::store::statements::padded;
use crate::store::statements::{MAX_LIST, bucket};
use sqlx::MySql;

pub(super) const INSERT_MESSAGES: &str = "INSERT INTO {p}messages \
    (id, queue_id, priority, ordering_key, idempotency_key, headers, body, created_at) VALUES {list}";
pub(super) const MESSAGE_ROW: &str = "(?,?,?,?,?,?,?,UTC_TIMESTAMP(6))";
/// [`ANY_MESSAGE`] as a locking read, for the resolver of an unknown COMMIT.
const RESOLVE_MESSAGES: &str =
    "SELECT id FROM {p}messages FORCE INDEX (PRIMARY) WHERE id IN ({list}) LOCK IN SHARE MODE";
/// Placeholders per message row; MySQL allows 65 535 per statement.
const MESSAGE_PARAMS: usize = 7;

pub(super) const INSERT_READY: &str =
    "INSERT INTO {p}ready (queue_id, priority, id, attempts, token) VALUES {list}";
pub(super) const READY_ROW: &str = "(?,?,?,?,?)";

const INSERT_SCHEDULED: &str =
    "INSERT INTO {p}scheduled (id, queue_id, priority, run_at, attempts, token) VALUES {list}";
const SCHEDULED_ROW: &str = "(?,?,?,DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND),?,?)";

pub(crate) const SELECT_DEDUP: &str = "SELECT idempotency_key, id, expires_at > UTC_TIMESTAMP(6) \
    FROM {p}dedup FORCE INDEX (PRIMARY) WHERE queue_id = ? AND idempotency_key IN ({list})";
pub(crate) const DELETE_STALE_DEDUP: &str = "DELETE t FROM ({rows}) v STRAIGHT_JOIN {p}dedup t FORCE INDEX (PRIMARY) \
    ON t.queue_id = v.q AND t.idempotency_key = v.k WHERE t.expires_at <= UTC_TIMESTAMP(6)";
const INSERT_DEDUP: &str =
    "INSERT INTO {p}dedup (queue_id, idempotency_key, id, expires_at) VALUES {list}";
const DEDUP_ROW: &str = "(?,?,?,DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND))";

/// How often a batch re-checks its idempotency keys after losing a race to a concurrent sender
/// of the same key (the loser's INSERT fails with 1062 once the winner commits).
const DEDUP_RACE_RETRIES: usize = 5;

/// Bytes one message row adds to an INSERT (a generous estimate: binary protocol values).
fn row_bytes(m: &Message, headers: Option<&String>) -> usize {
    64 + m.body.len()
        + headers.map_or(0, String::len)
        + m.ordering_key.as_ref().map_or(0, String::len)
        + m.idempotency_key.as_ref().map_or(0, String::len)
}

impl Enqueue<MySql> for MySqlStore {
    /// Enqueue `msgs` into `queue` inside the caller's transaction. Returns one [`Sent`] per
    /// message, in order. Statements are split to respect `budget` bytes and the placeholder
    /// limit; atomicity comes from the enclosing transaction.
    async fn send(&self, conn: &mut MySqlConnection, batch: &SendBatch<'_>) -> Result<Vec<Sent>> {
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

    type SendScript = super::send_script::SendScript;

    fn prepare_send_script(&self, batch: &SendBatch<'_>) -> Result<Option<Self::SendScript>> {
        self.script_for(batch)
    }

    async fn send_script(
        &self,
        conn: &mut MySqlConnection,
        script: &Self::SendScript,
    ) -> Result<()> {
        self.run_send_script(conn, script).await
    }

    /// A locking read: it waits for the row locks of a transaction whose COMMIT may still be
    /// in flight on the lost connection (an ack's deletes, a send's inserts), then answers.
    async fn count_stored_messages(
        &self,
        conn: &mut MySqlConnection,
        ids: &[MessageId],
    ) -> Result<usize> {
        Ok(super::fetch_id_list(&self.st, conn, RESOLVE_MESSAGES, ids)
            .await?
            .len())
    }
}

impl MySqlStore {
    /// Insert the rows of `msgs[fresh]`, in statements bounded by `budget` bytes and the
    /// placeholder limit. Returns the indices (into `msgs`) of messages not inserted because
    /// their id is stored already or repeats an earlier one of the batch (see `store/resend.rs`).
    async fn insert_messages(
        &self,
        conn: &mut MySqlConnection,
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
        let max_rows = (u16::MAX as usize / MESSAGE_PARAMS).min(MAX_LIST);
        let mut start = 0;
        while start < rows.len() {
            // Greedy chunk under the byte budget (at least one row: a single message is already
            // checked against the payload limit, which is below the budget).
            let mut end = start;
            let mut bytes = 0;
            while end < rows.len() && end - start < max_rows {
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
                &rows[start..end],
                max_rows,
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
        conn: &mut MySqlConnection,
        queue_id: i32,
        entries: &[(Entry, i64)],
    ) -> Result<()> {
        let (now, later): (Vec<_>, Vec<_>) = entries.iter().partition(|(_, delay)| *delay <= 0);
        insert_values(
            &self.st,
            conn,
            INSERT_READY,
            READY_ROW,
            &now,
            MAX_LIST,
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
            &later,
            MAX_LIST,
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
    /// messages to insert, in order. The dedup rows of new keys are inserted here, first, so
    /// that a concurrent sender of the same key waits on them and then sees a duplicate.
    async fn check_idempotency(
        &self,
        conn: &mut MySqlConnection,
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
        let ours: HashSet<MessageId> = keyed.iter().map(|&i| msgs[i].id).collect();
        let window_us = dedup_window.as_micros().min(i64::MAX as u128) as i64;
        let key_of = |i: usize| msgs[i].idempotency_key.as_deref().unwrap_or_default();

        let mut attempt = 0;
        let mut new_keys = loop {
            attempt += 1;
            let existing = self
                .existing_dedup(conn, queue_id, keyed.iter().map(|&i| key_of(i)))
                .await?;
            let mut stale = Vec::new();
            let mut to_insert = Vec::new();
            let mut new_keys = Vec::new();
            for &i in &keyed {
                match existing.get(key_of(i)) {
                    Some(&(id, _)) if ours.contains(&id) => new_keys.push(i), // inserted earlier
                    Some(&(id, true)) => {
                        out[i] = Sent {
                            id,
                            duplicate: true,
                        }
                    }
                    Some(&(_, false)) => {
                        stale.push(key_of(i));
                        to_insert.push(i);
                    }
                    None => to_insert.push(i),
                }
            }
            for chunk in stale.chunks(MAX_LIST) {
                let mut q = sqlx::query(self.st.list(
                    DELETE_STALE_DEDUP,
                    DEDUP_KEY_ROW,
                    bucket(chunk.len()),
                ));
                for k in padded(chunk) {
                    q = q.bind(queue_id).bind(k.as_bytes());
                }
                q.execute(&mut *conn).await?;
            }
            let inserted = insert_values(
                &self.st,
                conn,
                INSERT_DEDUP,
                DEDUP_ROW,
                &to_insert,
                MAX_LIST,
                |q, &i| {
                    q.bind(queue_id)
                        .bind(key_of(i).as_bytes())
                        .bind(msgs[i].id.bytes())
                        .bind(window_us)
                },
            )
            .await;
            match inserted {
                Ok(()) => {
                    new_keys.extend(to_insert);
                    break new_keys;
                }
                // A concurrent sender committed one of these keys while we looked: look again.
                // The failed statement changed nothing; earlier chunks are recognised as ours.
                Err(e) if e.is_duplicate_key() && attempt < DEDUP_RACE_RETRIES => continue,
                Err(e) => return Err(e),
            }
        };
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
        conn: &mut MySqlConnection,
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
