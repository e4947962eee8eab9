//! Per-key concurrency (`QueueConfig::concurrency_limit`): at most N messages of one
//! concurrency key admitted at once — in `ready`, `scheduled` (a delay or a retry's backoff) or
//! `leases` — the others waiting in `blocked`, in send order.
//!
//! It is the key protocol of `keys.rs` with N heads instead of one. A concurrency key is
//! stored where an ordering key is (the messages' and leases' `ordering_key`, `blocked`),
//! marked by a first byte [`SLOT_MARK`] that no ordering key can have (keys refuse control
//! characters): every path that lets an ordering key move on — ack, dead-lettering, cancel,
//! take, purge — reaches [`SqlStore::release_keys`], which hands marked keys over to
//! [`SqlStore::release_slots`], once per key and in key order (as sends lock them). So a slot is released in the transaction that ends its
//! message, and messages without a concurrency key pay nothing.
//!
//! A `key_slots` row, per (queue, key) with admitted or waiting messages, holds `busy` (the
//! messages admitted) and `next_seq` (the numbering of those waiting). Every admission and
//! release first takes that row's lock with an upsert (on SQLite the write transaction has the
//! database to itself), so they run one after the other per key and `busy` is exact:
//!
//! - a send admits its messages while `busy` is under the limit and nobody waits (a waiting
//!   message goes first: the line is FIFO), the rest wait with the next sequence numbers;
//! - a release lowers `busy` and admits the oldest waiting messages into the free slots (more
//!   than one when the limit was raised or removed since), and drops the row when nothing is
//!   admitted or waiting.
//!
//! The limit is read in the same transaction, so a changed limit applies from the next
//! admission of each key.

use super::{Columns, SqlStore, Statement};
use crate::domain::{Delivery, Message, MessageId, Result};
use crate::store::Backend;
use crate::store::rows::{Entry, Keyed};

/// The first byte of a stored concurrency key.
pub(crate) const SLOT_MARK: char = '\0';
/// The first byte of a tracked message's stored key (`flows.rs`), before its line key if it
/// has one. Keys refuse control characters, so no key starts with it.
pub(crate) const FLOW_MARK: char = '\u{1}';
/// Most waiting messages one release or send admits (a removed limit admits the rest at the
/// next releases, in short transactions).
const FILL_STEP: i64 = 100;
/// Most `key_slots` rows one repair pass looks at.
const REPAIR_PAGE: i64 = 500;

const LIMIT: &str = "SELECT concurrency_limit FROM {p}queue_limits WHERE queue_id = ?";
const SLOT: &str = "SELECT busy, next_seq FROM {p}key_slots WHERE queue_id = ? AND slot_key = ?";
const SET_SLOT: &str =
    "UPDATE {p}key_slots SET busy = ?, next_seq = ? WHERE queue_id = ? AND slot_key = ?";
const DROP_SLOT: &str = "DELETE FROM {p}key_slots WHERE queue_id = ? AND slot_key = ?";
const SLOTS_AFTER: &str = "SELECT slot_key FROM {p}key_slots WHERE queue_id = ? AND slot_key > ? \
    ORDER BY slot_key LIMIT ?";
/// Messages of a key that are admitted (queue, key, tracked key, three times: the key as
/// stored, and behind the flow mark). One statement, so one read of the database: a message
/// moving between these tables is counted once.
const ADMITTED: &str = "SELECT \
    (SELECT COUNT(*) FROM {p}ready r JOIN {p}messages m ON m.id = r.id \
        WHERE r.queue_id = ? AND m.ordering_key IN (?, ?)) \
    + (SELECT COUNT(*) FROM {p}scheduled s JOIN {p}messages m ON m.id = s.id \
        WHERE s.queue_id = ? AND m.ordering_key IN (?, ?)) \
    + (SELECT COUNT(*) FROM {p}leases l WHERE l.queue_id = ? AND l.ordering_key IN (?, ?))";

/// The stored form of a concurrency key: marked.
pub(crate) fn slot_key(concurrency: &str) -> String {
    format!("{SLOT_MARK}{concurrency}")
}

/// The stored form of a message's key: its ordering key, or its concurrency key marked; a
/// tracked message's (`flows.rs`) behind the flow mark, even when it has no key.
pub(crate) fn stored_key(
    ordering: Option<&str>,
    concurrency: Option<&str>,
    tracked: bool,
) -> Option<String> {
    let line = match (ordering, concurrency) {
        (Some(k), _) => Some(k.to_owned()),
        (None, Some(k)) => Some(slot_key(k)),
        (None, None) => None,
    };
    if tracked {
        Some(format!("{FLOW_MARK}{}", line.unwrap_or_default()))
    } else {
        line
    }
}

/// The stored key of a claimed message.
pub(crate) fn stored_key_of(d: &Delivery) -> Option<String> {
    stored_key(
        d.ordering_key.as_deref(),
        d.concurrency_key.as_deref(),
        d.tracked,
    )
}

/// The stored key of a message to send.
pub(crate) fn stored_key_of_message(m: &Message) -> Option<String> {
    stored_key(
        m.ordering_key.as_deref(),
        m.concurrency_key.as_deref(),
        m.tracked(),
    )
}

/// The key of the line a message to send waits in (its stored key without the flow mark).
pub(crate) fn line_key_of_message(m: &Message) -> Option<String> {
    stored_key(
        m.ordering_key.as_deref(),
        m.concurrency_key.as_deref(),
        false,
    )
}

/// A stored key back as (ordering key, concurrency key, tracked).
pub(crate) fn split_key(stored: Option<String>) -> (Option<String>, Option<String>, bool) {
    let (line, tracked) = match stored {
        Some(k) if k.starts_with(FLOW_MARK) => {
            let rest = &k[FLOW_MARK.len_utf8()..];
            ((!rest.is_empty()).then(|| rest.to_owned()), true)
        }
        other => (other, false),
    };
    match line {
        Some(k) if k.starts_with(SLOT_MARK) => {
            (None, Some(k[SLOT_MARK.len_utf8()..].to_owned()), tracked)
        }
        other => (other, None, tracked),
    }
}

/// A stored key (as bytes) as (tracked, the key of its line, if any).
pub(crate) fn line_key(stored: &[u8]) -> (bool, Option<&[u8]>) {
    match stored.split_first() {
        Some((&b, rest)) if b == FLOW_MARK as u8 => (true, (!rest.is_empty()).then_some(rest)),
        _ => (false, Some(stored)),
    }
}

/// Whether a stored key (as bytes) is a concurrency key.
pub(crate) fn is_slot_key(stored: &[u8]) -> bool {
    stored.first() == Some(&(SLOT_MARK as u8))
}

impl<B: Backend> SqlStore<B> {
    /// The queue's per-key limit (`None`: unlimited).
    async fn slot_limit(&self, conn: &mut B::Connection, queue_id: i32) -> Result<i64> {
        let row = self.query(LIMIT).arg(queue_id).first(conn).await?;
        let limit = match row {
            Some(r) => r.col::<Option<i64>>(0)?,
            None => None,
        };
        Ok(limit.unwrap_or(i64::MAX))
    }

    /// Lock `key`'s row, creating it empty when missing: `(busy, next_seq)`.
    async fn lock_slot(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
    ) -> Result<(i64, i64)> {
        self.query(B::KEYS.upsert_slot)
            .arg(queue_id)
            .arg(key)
            .run(conn)
            .await?;
        let row = self.query(SLOT).arg(queue_id).arg(key).first(conn).await?;
        match row {
            Some(r) => Ok((r.col(0)?, r.col(1)?)),
            None => Ok((0, 0)),
        }
    }

    /// Admit up to `room` of `key`'s oldest waiting messages. Returns how many, and whether
    /// the line is now empty.
    async fn admit_waiting(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
        room: i64,
    ) -> Result<(i64, bool)> {
        if room <= 0 {
            return Ok((0, false));
        }
        let asked = room.min(FILL_STEP);
        let rows = self
            .query(B::KEYS.first_waiting)
            .arg(queue_id)
            .arg(key)
            .arg(asked)
            .rows(conn)
            .await?;
        let mut admitted = Vec::with_capacity(rows.len());
        for row in &rows {
            let entry = Entry {
                id: row.id_at(0)?,
                priority: row.col(1)?,
                attempts: row.col(2)?,
                token: row.col(3)?,
            };
            admitted.push((entry, row.col::<i64>(4)?));
        }
        let ids: Vec<MessageId> = admitted.iter().map(|(e, _)| e.id).collect();
        self.exec_id_list(conn, B::ADMIN.delete_blocked, &ids)
            .await?;
        self.place(conn, queue_id, &admitted).await?;
        Ok((admitted.len() as i64, (admitted.len() as i64) < asked))
    }

    /// Store `busy` and `next_seq` of `key`, or drop its row when nothing is admitted and
    /// nothing waits.
    async fn save_slot(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
        (busy, next_seq): (i64, i64),
        line_empty: bool,
    ) -> Result<()> {
        if busy <= 0 && line_empty {
            self.query(DROP_SLOT)
                .arg(queue_id)
                .arg(key)
                .run(conn)
                .await?;
        } else {
            self.query(SET_SLOT)
                .arg(busy.max(0))
                .arg(next_seq)
                .arg(queue_id)
                .arg(key)
                .run(conn)
                .await?;
        }
        Ok(())
    }

    /// Enqueue messages with concurrency keys (`items[].key` stored, marked): each is admitted
    /// if its key has a free slot and nobody waits, otherwise it waits in line.
    pub(crate) async fn enqueue_slotted(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        items: Vec<Keyed>,
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let limit = self.slot_limit(conn, queue_id).await?;
        // Sorted by key so that concurrent batches lock key rows in one order (fewer deadlocks).
        let mut by_key: std::collections::BTreeMap<&str, Vec<&Keyed>> = Default::default();
        for item in &items {
            by_key.entry(item.key.as_str()).or_default().push(item);
        }
        let mut admitted = Vec::new();
        let mut waiting = Vec::new();
        for (key, group) in by_key {
            let key_bytes = key.as_bytes();
            let (mut busy, mut next_seq) = self.lock_slot(conn, queue_id, key_bytes).await?;
            // Someone may wait while a slot is free (the limit was raised): they go first.
            let (before, mut line_empty) = self
                .admit_waiting(conn, queue_id, key_bytes, limit.saturating_sub(busy))
                .await?;
            busy += before;
            for item in group {
                if line_empty && busy < limit {
                    admitted.push((item.entry, item.delay_us));
                    busy += 1;
                } else {
                    waiting.push((key, next_seq, item));
                    next_seq += 1;
                    line_empty = false;
                }
            }
            self.save_slot(conn, queue_id, key_bytes, (busy, next_seq), line_empty)
                .await?;
        }
        self.place(conn, queue_id, &admitted).await?;
        self.insert_blocked(conn, queue_id, &waiting).await
    }

    /// Messages admitted under concurrency keys are gone (acked, dead-lettered, cancelled,
    /// taken): `(key, how many)`, in key order. Free their slots and admit the oldest waiting
    /// messages into the free slots.
    pub(crate) async fn release_slots(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        keys: &[(&[u8], i64)],
    ) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let limit = self.slot_limit(conn, queue_id).await?;
        for &(key, n) in keys {
            let (busy, next_seq) = self.lock_slot(conn, queue_id, key).await?;
            let busy = (busy - n).max(0);
            let (admitted, line_empty) = self
                .admit_waiting(conn, queue_id, key, limit.saturating_sub(busy))
                .await?;
            self.save_slot(conn, queue_id, key, (busy + admitted, next_seq), line_empty)
                .await?;
        }
        Ok(())
    }

    /// Count again what each concurrency key of the queue has admitted (after a purge, which
    /// deletes messages without releasing their slots), and admit waiting messages into the
    /// slots that freed. Returns how many keys changed.
    pub(crate) async fn repair_slots(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<usize> {
        let limit = self.slot_limit(conn, queue_id).await?;
        let mut after: Vec<u8> = Vec::new();
        let mut changed = 0;
        loop {
            let rows = self
                .query(SLOTS_AFTER)
                .arg(queue_id)
                .arg(after.as_slice())
                .arg(REPAIR_PAGE)
                .rows(conn)
                .await?;
            for row in &rows {
                let key: Vec<u8> = row.col(0)?;
                let (busy, next_seq) = self.lock_slot(conn, queue_id, &key).await?;
                let tracked = [&[FLOW_MARK as u8][..], &key].concat();
                let counted = self
                    .query(ADMITTED)
                    .arg(queue_id)
                    .arg(key.as_slice())
                    .arg(tracked.as_slice())
                    .arg(queue_id)
                    .arg(key.as_slice())
                    .arg(tracked.as_slice())
                    .arg(queue_id)
                    .arg(key.as_slice())
                    .arg(tracked.as_slice())
                    .first(conn)
                    .await?
                    .map(|r| r.col::<i64>(0))
                    .transpose()?
                    .unwrap_or(0);
                let (admitted, line_empty) = self
                    .admit_waiting(conn, queue_id, &key, limit.saturating_sub(counted))
                    .await?;
                changed += usize::from(counted != busy || admitted > 0);
                self.save_slot(
                    conn,
                    queue_id,
                    &key,
                    (counted + admitted, next_seq),
                    line_empty,
                )
                .await?;
                after = key;
            }
            if (rows.len() as i64) < REPAIR_PAGE {
                return Ok(changed);
            }
        }
    }
}
