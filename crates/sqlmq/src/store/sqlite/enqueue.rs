//! Enqueue's statements (the body is `store/body/enqueue.rs`). A send runs in a write
//! transaction that has the database to itself, so no concurrent sender of the same
//! idempotency key can commit between the read of `dedup` and the insert; a caller's own
//! transaction opened with a deferred `BEGIN` is safe too: its first write fails with
//! `SQLITE_BUSY_SNAPSHOT` (retryable) if another connection wrote since its read.

use super::{SqliteStore, now_us};
use crate::domain::Result;
use crate::store::ScriptedSend;
use crate::store::body::EnqueueSql;
use crate::store::rows::SendBatch;

pub(super) const SQL: EnqueueSql = EnqueueSql {
    insert_messages: "INSERT INTO {p}messages \
        (id, queue_id, priority, ordering_key, idempotency_key, headers, body, fairness_key, \
        created_at) VALUES {list}",
    message_row: concat!("(?,?,?,?,?,?,?,?,", now_us!(), ")"),
    scheduled_row: concat!("(?,?,?,", now_us!(), " + ?,?,?)"),
    select_keys: concat!(
        "SELECT idempotency_key, id, expires_at > ",
        now_us!(),
        " FROM {p}dedup WHERE queue_id = ? AND idempotency_key IN ({list})"
    ),
    forget_keys: concat!(
        "DELETE FROM {p}dedup WHERE (queue_id, idempotency_key) IN (VALUES {list}) ",
        "AND expires_at <= ",
        now_us!()
    ),
    key_row: "(?,?)",
    record_row: concat!("(?,?,?,", now_us!(), " + ?)"),
    stored: STORED,
    // One writer: no COMMIT can be in flight on another connection.
    stored_locking: STORED,
    set_timing: "UPDATE {p}messages SET deadline_at = ?, run_timeout_us = ? WHERE id = ?",
    // One writer at a time: the transaction holds the database, nothing to lock.
    waiting_ready: "SELECT r.priority, r.attempts, r.token FROM {p}messages m JOIN {p}ready r \
        ON r.queue_id = m.queue_id AND r.priority = m.priority AND r.id = m.id \
        WHERE m.id = ? AND m.queue_id = ?",
    extend_key: concat!(
        "UPDATE {p}dedup SET expires_at = MAX(expires_at, ",
        now_us!(),
        " + ?) WHERE queue_id = ? AND idempotency_key = ?"
    ),
};

const STORED: &str = "SELECT id FROM {p}messages WHERE id IN ({list})";

/// None: SQLite runs in this process, so a send pays no round trips to save.
impl ScriptedSend for sqlx::Sqlite {
    type SendScript = std::convert::Infallible;

    fn prepare_send_script(
        _store: &SqliteStore,
        _batch: &SendBatch<'_>,
    ) -> Result<Option<Self::SendScript>> {
        Ok(None)
    }

    async fn send_script(
        _store: &SqliteStore,
        _conn: &mut sqlx::SqliteConnection,
        script: &Self::SendScript,
    ) -> Result<()> {
        match *script {}
    }
}
