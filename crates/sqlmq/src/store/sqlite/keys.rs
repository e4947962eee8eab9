//! Strict per-key FIFO (the ordering guarantee of the README): a keyed message is handed out
//! only when every earlier message with its key has been acked, dead-lettered or cancelled.
//!
//! The rows are those of the MySQL backend: for each (queue, key) with pending messages, a
//! `key_heads` row names the *head*, the one message of the key that lives in `ready`,
//! `scheduled` or `leases`; the others wait in `blocked`, numbered by `seq`. The row exists
//! exactly while the key has pending messages, so an upsert that leaves our message as
//! `head_id` means "no predecessor".
//!
//! What SQLite makes simpler: every statement here runs in a write transaction that has the
//! database to itself, so producers and the release of a head cannot interleave, and the
//! MySQL backend's row locks (`FOR UPDATE`) and lock ordering are not needed: `seq` order is
//! commit order by construction. The upsert returns the counters it leaves (`RETURNING`), and
//! the release takes the next blocked message with one `DELETE … RETURNING`.

use std::collections::BTreeMap;

use sqlx::{Row, SqliteConnection};

use super::{MAX_PARAMS, SqliteStore, id_at, insert_values, now_us};
use crate::domain::{Error, MessageId, Result};
use crate::store::rows::Entry;
use crate::store::statements::split_into_buckets;

const UPSERT_KEYS: &str = "INSERT INTO {p}key_heads (queue_id, ordering_key, next_seq, head_id) \
    VALUES {list} ON CONFLICT (queue_id, ordering_key) \
    DO UPDATE SET next_seq = next_seq + excluded.next_seq \
    RETURNING ordering_key, next_seq, head_id";
const KEY_ROW: &str = "(?,?,?,?)";
const KEY_PARAMS: usize = 4;

const INSERT_BLOCKED: &str = "INSERT INTO {p}blocked \
    (queue_id, ordering_key, seq, id, priority, run_at, attempts, token) VALUES {list}";
const BLOCKED_ROW: &str = concat!("(?,?,?,?,?,", now_us!(), " + ?,?,?)");
const BLOCKED_PARAMS: usize = 8;

const HEAD_OF: &str = "SELECT head_id FROM {p}key_heads WHERE queue_id = ?1 AND ordering_key = ?2";
/// Take the first blocked message of a key, with the delay it still has to wait.
const TAKE_NEXT_BLOCKED: &str = concat!(
    "DELETE FROM {p}blocked WHERE queue_id = ?1 AND ordering_key = ?2 AND seq = ",
    "(SELECT MIN(seq) FROM {p}blocked WHERE queue_id = ?1 AND ordering_key = ?2) ",
    "RETURNING id, priority, attempts, token, max(run_at - ",
    now_us!(),
    ", 0)"
);
const SET_HEAD: &str =
    "UPDATE {p}key_heads SET head_id = ?3 WHERE queue_id = ?1 AND ordering_key = ?2";
const DELETE_KEY: &str = "DELETE FROM {p}key_heads WHERE queue_id = ?1 AND ordering_key = ?2";
/// Keys whose head message no longer exists (at most 500 per call; the caller loops).
pub(crate) const ORPHANED_KEYS: &str = "SELECT k.ordering_key, k.head_id FROM {p}key_heads k \
    WHERE k.queue_id = ? AND NOT EXISTS (SELECT 1 FROM {p}messages m WHERE m.id = k.head_id) \
    LIMIT 500";

/// A keyed message to enqueue.
pub(crate) struct Keyed {
    pub key: String,
    pub entry: Entry,
    /// Delay still to wait once it becomes the head, in microseconds.
    pub delay_us: i64,
}

impl SqliteStore {
    /// Enqueue keyed messages: each becomes its key's head if the key has no pending message,
    /// otherwise it waits in `blocked` behind the messages already there.
    pub(crate) async fn enqueue_keyed(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        items: Vec<Keyed>,
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let mut by_key: BTreeMap<String, Vec<Keyed>> = BTreeMap::new();
        for item in items {
            by_key.entry(item.key.clone()).or_default().push(item);
        }
        let groups: Vec<(&String, &Vec<Keyed>)> = by_key.iter().collect();

        // One upsert per bucket of keys: each key's counter grows by its messages here, and
        // the row comes back with the counter and the head it has now.
        let mut counters: BTreeMap<Vec<u8>, (i64, MessageId)> = BTreeMap::new();
        let mut rest = &groups[..];
        for size in split_into_buckets(groups.len(), MAX_PARAMS / KEY_PARAMS) {
            let (chunk, tail) = rest.split_at(size);
            let mut q = sqlx::query(self.st.list(UPSERT_KEYS, KEY_ROW, size));
            for (key, group) in chunk {
                q = q
                    .bind(queue_id)
                    .bind(key.as_bytes())
                    .bind(group.len() as i64)
                    .bind(group[0].entry.id.bytes());
            }
            for row in q.fetch_all(&mut *conn).await? {
                counters.insert(row.try_get(0)?, (row.try_get(1)?, id_at(&row, 2)?));
            }
            rest = tail;
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
            BLOCKED_PARAMS,
            &blocked,
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
        conn: &mut SqliteConnection,
        queue_id: i32,
        key: &[u8],
        head: MessageId,
    ) -> Result<()> {
        let row = sqlx::query(self.st.get(HEAD_OF))
            .bind(queue_id)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?;
        match row {
            Some(row) if id_at(&row, 0)? == head => {}
            _ => return Ok(()),
        }
        let next = sqlx::query(self.st.get(TAKE_NEXT_BLOCKED))
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
        let entry = Entry {
            id: id_at(&next, 0)?,
            priority: next.try_get(1)?,
            attempts: next.try_get(2)?,
            token: next.try_get(3)?,
        };
        let delay_us: i64 = next.try_get(4)?;
        sqlx::query(self.st.get(SET_HEAD))
            .bind(queue_id)
            .bind(key)
            .bind(entry.id.bytes())
            .execute(&mut *conn)
            .await?;
        self.place(conn, queue_id, &[(entry, delay_us)]).await
    }
}
