//! Strict per-key FIFO (the ordering guarantee of the README): a keyed message is handed out only when every earlier message
//! with its key has been acked, dead-lettered or cancelled.
//!
//! For each (queue, key) with pending messages, a `key_heads` row names the *head*: the one message of
//! the key that lives in `ready`, `scheduled` or `leases`. The others wait in `blocked`, numbered
//! by `seq`. Producers take the `key_heads` row lock (an upsert) before adding to `blocked`, and the
//! release of a head takes the same lock before reading `blocked`, so the successor is always
//! read after every producer that got ahead of the release has committed: the seq order is the
//! commit order of the producers, and a key is never left without a head while messages wait.
//! The row exists exactly while the key has pending messages, so a fresh upsert (the row's
//! `head_id` is our message) means "no predecessor".

use std::collections::BTreeMap;

use sqlx::{MySqlConnection, Row};

use super::{MySqlStore, id_at, insert_values};
use crate::domain::MessageId;
use crate::domain::{Error, Result};
use crate::store::rows::Entry;
use crate::store::statements::padded;
use crate::store::statements::{MAX_LIST, bucket};

const UPSERT_KEYS: &str = "INSERT INTO {p}key_heads (queue_id, ordering_key, next_seq, head_id) \
    VALUES {list} ON DUPLICATE KEY UPDATE next_seq = next_seq + VALUES(next_seq)";
const KEY_ROW: &str = "(?,?,?,?)";
pub(crate) const SELECT_KEYS: &str = "SELECT ordering_key, next_seq, head_id FROM {p}key_heads FORCE INDEX (PRIMARY) \
    WHERE queue_id = ? AND ordering_key IN ({list})";
const INSERT_BLOCKED: &str = "INSERT INTO {p}blocked \
    (queue_id, ordering_key, seq, id, priority, run_at, attempts, token) VALUES {list}";
const BLOCKED_ROW: &str = "(?,?,?,?,?,DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND),?,?)";

pub(crate) const LOCK_KEY: &str =
    "SELECT head_id FROM {p}key_heads WHERE queue_id = ? AND ordering_key = ? FOR UPDATE";
pub(crate) const NEXT_BLOCKED: &str = "SELECT seq, id, priority, attempts, token, \
    GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), run_at), 0) \
    FROM {p}blocked FORCE INDEX (PRIMARY) WHERE queue_id = ? AND ordering_key = ? ORDER BY seq LIMIT 1 FOR UPDATE";
pub(crate) const DELETE_BLOCKED_SEQ: &str =
    "DELETE FROM {p}blocked WHERE queue_id = ? AND ordering_key = ? AND seq = ?";
pub(crate) const SET_HEAD: &str =
    "UPDATE {p}key_heads SET head_id = ? WHERE queue_id = ? AND ordering_key = ?";
pub(crate) const DELETE_KEY: &str =
    "DELETE FROM {p}key_heads WHERE queue_id = ? AND ordering_key = ?";
pub(crate) const ORPHANED_KEYS: &str = "SELECT k.ordering_key, k.head_id FROM {p}key_heads k FORCE INDEX (PRIMARY) \
    LEFT JOIN {p}messages m ON m.id = k.head_id \
    WHERE k.queue_id = ? AND m.id IS NULL LIMIT 500";

/// A keyed message to enqueue.
pub(crate) struct Keyed {
    pub key: String,
    pub entry: Entry,
    /// Delay still to wait once it becomes the head, in microseconds.
    pub delay_us: i64,
}

impl MySqlStore {
    /// Enqueue keyed messages: each becomes its key's head if the key has no pending message,
    /// otherwise it waits in `blocked` behind the messages already there.
    pub(crate) async fn enqueue_keyed(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        items: Vec<Keyed>,
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        // Sorted by key so that concurrent batches lock key rows in one order (fewer deadlocks).
        let mut by_key: BTreeMap<String, Vec<Keyed>> = BTreeMap::new();
        for item in items {
            by_key.entry(item.key.clone()).or_default().push(item);
        }
        let groups: Vec<(&String, &Vec<Keyed>)> = by_key.iter().collect();
        insert_values(
            &self.st,
            conn,
            UPSERT_KEYS,
            KEY_ROW,
            &groups,
            MAX_LIST,
            |q, (key, group)| {
                q.bind(queue_id)
                    .bind(key.as_bytes())
                    .bind(group.len() as i64)
                    .bind(group[0].entry.id.bytes())
            },
        )
        .await?;

        let mut counters: BTreeMap<Vec<u8>, (i64, MessageId)> = BTreeMap::new();
        for chunk in groups.chunks(MAX_LIST) {
            let mut q =
                sqlx::query(self.st.list(SELECT_KEYS, "?", bucket(chunk.len()))).bind(queue_id);
            for (key, _) in padded(chunk) {
                q = q.bind(key.as_bytes());
            }
            for row in q.fetch_all(&mut *conn).await? {
                counters.insert(row.try_get(0)?, (row.try_get(1)?, id_at(&row, 2)?));
            }
        }

        let mut heads = Vec::new();
        let mut blocked = Vec::new();
        for (key, group) in groups {
            let &(next_seq, head) = counters
                .get(key.as_bytes())
                .ok_or_else(|| Error::Corrupt(format!("ordering key {key:?} vanished")))?;
            // Our rows take the last group.len() sequence numbers.
            let first_seq = next_seq - group.len() as i64 + 1;
            for (i, item) in group.iter().enumerate() {
                if i == 0 && head == item.entry.id {
                    heads.push((item.entry, item.delay_us));
                } else {
                    blocked.push((key.as_str(), first_seq + i as i64, item));
                }
            }
        }
        self.place(conn, queue_id, &heads).await?;
        insert_values(
            &self.st,
            conn,
            INSERT_BLOCKED,
            BLOCKED_ROW,
            &blocked,
            MAX_LIST,
            |q, (key, seq, item)| {
                q.bind(queue_id)
                    .bind(key.as_bytes())
                    .bind(*seq)
                    .bind(item.entry.id.bytes())
                    .bind(item.entry.priority)
                    .bind(item.delay_us)
                    .bind(item.entry.attempts)
                    .bind(item.entry.token)
            },
        )
        .await
    }

    /// The head `head` of `key` is gone (acked, dead-lettered, cancelled): make the next blocked
    /// message the head, or drop the key when none waits. A no-op when `head` is not the key's
    /// current head, so releasing twice is harmless.
    pub(crate) async fn release_key(
        &self,
        conn: &mut MySqlConnection,
        queue_id: i32,
        key: &[u8],
        head: MessageId,
    ) -> Result<()> {
        let row = sqlx::query(self.st.get(LOCK_KEY))
            .bind(queue_id)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?;
        match row {
            Some(row) if id_at(&row, 0)? == head => {}
            _ => return Ok(()),
        }
        let next = sqlx::query(self.st.get(NEXT_BLOCKED))
            .bind(queue_id)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(next) = next else {
            sqlx::query(self.st.get(DELETE_KEY))
                .bind(queue_id)
                .bind(key)
                .execute(&mut *conn)
                .await?;
            return Ok(());
        };
        let seq: i64 = next.try_get(0)?;
        let entry = Entry {
            id: id_at(&next, 1)?,
            priority: next.try_get(2)?,
            attempts: next.try_get(3)?,
            token: next.try_get(4)?,
        };
        let delay_us: i64 = next.try_get(5)?;
        sqlx::query(self.st.get(DELETE_BLOCKED_SEQ))
            .bind(queue_id)
            .bind(key)
            .bind(seq)
            .execute(&mut *conn)
            .await?;
        sqlx::query(self.st.get(SET_HEAD))
            .bind(entry.id.bytes())
            .bind(queue_id)
            .bind(key)
            .execute(&mut *conn)
            .await?;
        self.place(conn, queue_id, &[(entry, delay_us)]).await
    }
}
