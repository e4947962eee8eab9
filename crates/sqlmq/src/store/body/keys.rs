//! Strict per-key FIFO (the ordering guarantee of the guide (docs/guide/src/guarantees.md)): a keyed message is handed out
//! only when every earlier message with its key has been acked, dead-lettered or cancelled.
//!
//! For each (queue, key) with pending messages, a `key_heads` row names the *head*: the one
//! message of the key that lives in `ready`, `scheduled` or `leases`. The others wait in
//! `blocked`, numbered by `seq`. Producers take the `key_heads` row lock (an upsert) before
//! adding to `blocked`, and the release of a head takes the same lock before reading
//! `blocked`, so the successor is always read after every producer that got ahead of the
//! release has committed: the seq order is the commit order of the producers, and a key is
//! never left without a head while messages wait. (On SQLite the write transaction has the
//! database to itself, which gives the same order without row locks.) The row exists exactly
//! while the key has pending messages, so an upsert that leaves our message as `head_id` means
//! "no predecessor".

use std::collections::BTreeMap;

use super::flows::Ending;
use super::slots::{is_slot_key, line_key, stored_key_of};
use super::{Columns, SqlStore, Statement};
use crate::domain::{Delivery, Error, MessageId, Result};
use crate::store::Backend;
use crate::store::rows::{Entry, Keyed};
use crate::store::statements::{MAX_LIST, bucket, padded};

/// The key protocol's statements that differ by backend.
pub struct KeySql {
    /// Count messages into their keys (`{list}` of [`KeySql::key_row`]: queue, key, how many,
    /// the first one's id), creating a key's row with that message as its head; a key that
    /// has a row keeps its head and its `next_seq` grows by the count.
    pub upsert_keys: &'static str,
    /// One row of [`KeySql::upsert_keys`].
    pub key_row: &'static str,
    /// The counters of keys (queue, `{list}` of keys): `ordering_key, next_seq, head_id`.
    pub select_keys: &'static str,
    /// One row of [`INSERT_BLOCKED`]: queue, key, seq, id, priority, delay (µs), attempts,
    /// token.
    pub blocked_row: &'static str,
    /// A key's head, its row locked (queue, key): `head_id`.
    pub lock_key: &'static str,
    /// A key's first blocked message, locked (queue, key): `seq, id, priority, attempts,
    /// token, delay still to wait (µs, at least 0)`.
    pub next_blocked: &'static str,
    /// Create a concurrency key's `key_slots` row, empty, unless it exists, and lock it either
    /// way (queue, key).
    pub upsert_slot: &'static str,
    /// A concurrency key's oldest waiting messages, locked (queue, key, n): `id, priority,
    /// attempts, token, delay still to wait (µs, at least 0)`.
    pub first_waiting: &'static str,
    /// Keys of a queue whose head message no longer exists, at most 500 (queue):
    /// `ordering_key, head_id`.
    pub orphaned_keys: &'static str,
}

const INSERT_BLOCKED: &str = "INSERT INTO {p}blocked \
    (queue_id, ordering_key, seq, id, priority, run_at, attempts, token) VALUES {list}";
const BLOCKED_PARAMS: usize = 8;
const KEY_PARAMS: usize = 4;
pub(crate) const DELETE_BLOCKED_SEQ: &str =
    "DELETE FROM {p}blocked WHERE queue_id = ? AND ordering_key = ? AND seq = ?";
pub(crate) const SET_HEAD: &str =
    "UPDATE {p}key_heads SET head_id = ? WHERE queue_id = ? AND ordering_key = ?";
pub(crate) const DELETE_KEY: &str =
    "DELETE FROM {p}key_heads WHERE queue_id = ? AND ordering_key = ?";

impl<B: Backend> SqlStore<B> {
    /// Enqueue keyed messages: each becomes its key's head if the key has no pending message,
    /// otherwise it waits in `blocked` behind the messages already there.
    pub(crate) async fn enqueue_keyed(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        items: Vec<Keyed>,
    ) -> Result<()> {
        let (slotted, items): (Vec<Keyed>, Vec<Keyed>) = items
            .into_iter()
            .partition(|k| is_slot_key(k.key.as_bytes()));
        self.enqueue_slotted(conn, queue_id, slotted).await?;
        if items.is_empty() {
            return Ok(());
        }
        // Sorted by key so that concurrent batches lock key rows in one order (fewer deadlocks).
        let mut by_key: BTreeMap<String, Vec<Keyed>> = BTreeMap::new();
        for item in items {
            by_key.entry(item.key.clone()).or_default().push(item);
        }
        let groups: Vec<(&String, &Vec<Keyed>)> = by_key.iter().collect();
        self.insert_values(
            conn,
            B::KEYS.upsert_keys,
            B::KEYS.key_row,
            KEY_PARAMS,
            &groups,
            |q, (key, group)| {
                q.arg(queue_id)
                    .arg(key.as_bytes())
                    .arg(group.len() as i64)
                    .arg(group[0].entry.id.bytes())
            },
        )
        .await?;

        let mut counters: BTreeMap<Vec<u8>, (i64, MessageId)> = BTreeMap::new();
        for chunk in groups.chunks(MAX_LIST) {
            let mut q = self
                .list_query(B::KEYS.select_keys, "?", bucket(chunk.len()))
                .arg(queue_id);
            for (key, _) in padded(chunk) {
                q = q.arg(key.as_bytes());
            }
            for row in q.rows(conn).await? {
                counters.insert(row.col(0)?, (row.col(1)?, row.id_at(2)?));
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
        self.insert_blocked(conn, queue_id, &blocked).await
    }

    /// Put messages in their keys' lines: (stored key, sequence number, message).
    pub(crate) async fn insert_blocked(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        blocked: &[(&str, i64, &Keyed)],
    ) -> Result<()> {
        self.insert_values(
            conn,
            INSERT_BLOCKED,
            B::KEYS.blocked_row,
            BLOCKED_PARAMS,
            blocked,
            |q, (key, seq, item)| {
                q.arg(queue_id)
                    .arg(key.as_bytes())
                    .arg(*seq)
                    .arg(item.entry.id.bytes())
                    .arg(item.entry.priority)
                    .arg(item.delay_us)
                    .arg(item.entry.attempts)
                    .arg(item.entry.token)
            },
        )
        .await
    }

    /// The head `head` of `key` is gone (acked, dead-lettered, cancelled): make the next blocked
    /// message the head, or drop the key when none waits. A no-op when `head` is not the key's
    /// current head, so releasing twice is harmless. A concurrency key (`slots.rs`) frees one
    /// of its slots instead.
    pub(crate) async fn release_key(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
        head: MessageId,
    ) -> Result<()> {
        if is_slot_key(key) {
            return self.release_slots(conn, queue_id, &[(key, 1)]).await;
        }
        let row = self
            .query(B::KEYS.lock_key)
            .arg(queue_id)
            .arg(key)
            .first(conn)
            .await?;
        match row {
            Some(row) if row.id_at(0)? == head => {}
            _ => return Ok(()),
        }
        let next = self
            .query(B::KEYS.next_blocked)
            .arg(queue_id)
            .arg(key)
            .first(conn)
            .await?;
        let Some(next) = next else {
            self.query(DELETE_KEY)
                .arg(queue_id)
                .arg(key)
                .run(conn)
                .await?;
            return Ok(());
        };
        let seq: i64 = next.col(0)?;
        let entry = Entry {
            id: next.id_at(1)?,
            priority: next.col(2)?,
            attempts: next.col(3)?,
            token: next.col(4)?,
        };
        let delay_us: i64 = next.col(5)?;
        self.query(DELETE_BLOCKED_SEQ)
            .arg(queue_id)
            .arg(key)
            .arg(seq)
            .run(conn)
            .await?;
        self.query(SET_HEAD)
            .arg(entry.id.bytes())
            .arg(queue_id)
            .arg(key)
            .run(conn)
            .await?;
        self.place(conn, queue_id, &[(entry, delay_us)]).await
    }

    /// Let the ordering keys of `gone` (deliveries removed for good: taken) move on to their
    /// next messages.
    pub(crate) async fn release_keys_of(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        gone: &[Delivery],
    ) -> Result<()> {
        let gone = gone
            .iter()
            .filter_map(|d| Some((stored_key_of(d)?.into_bytes(), d.id)));
        self.release_keys(conn, queue_id, gone.collect(), Ending::Acked)
            .await
    }

    /// Let the keys of messages that are gone move on: `(stored key, message)` pairs, all
    /// ended the same way. Keys are taken in key order — the order producers lock them in —
    /// so that two batches ending messages of the same keys never wait for each other's rows
    /// in a cycle; a concurrency key is released once, by how many of its messages ended.
    /// Tracked messages (the flow mark) then record their end (`flows.rs`).
    pub(crate) async fn release_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        mut gone: Vec<(Vec<u8>, MessageId)>,
        ending: Ending,
    ) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        let mut tracked = Vec::new();
        for (key, id) in &mut gone {
            if let (true, line) = line_key(key) {
                tracked.push((*id, ending));
                *key = line.map(<[u8]>::to_vec).unwrap_or_default();
            }
        }
        gone.retain(|(key, _)| !key.is_empty());
        gone.sort();
        let mut slots: Vec<(&[u8], i64)> = Vec::new();
        for (key, id) in &gone {
            if is_slot_key(key) {
                match slots.last_mut() {
                    Some((last, n)) if *last == key.as_slice() => *n += 1,
                    _ => slots.push((key, 1)),
                }
            } else {
                self.release_key(conn, queue_id, key, *id).await?;
            }
        }
        self.release_slots(conn, queue_id, &slots).await?;
        self.end_flow(conn, tracked).await
    }

    /// Release the keys of `queue_id` whose head message no longer exists (after a purge, or
    /// any path that removed a head without releasing it), and count concurrency keys' slots
    /// again. Returns how many were repaired.
    pub(crate) async fn repair_orphaned_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<usize> {
        let slots = self.repair_slots(conn, queue_id).await?;
        let rows = self
            .query(B::KEYS.orphaned_keys)
            .arg(queue_id)
            .rows(conn)
            .await?;
        for row in &rows {
            let key: Vec<u8> = row.col(0)?;
            self.release_key(conn, queue_id, &key, row.id_at(1)?)
                .await?;
        }
        Ok(rows.len() + slots)
    }
}
