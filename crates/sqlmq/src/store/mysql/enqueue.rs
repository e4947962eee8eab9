//! Enqueue's statements (the body is `store/body/enqueue.rs`), and the one-round-trip send
//! (`send_script.rs`) behind [`ScriptedSend`].

use super::MySqlStore;
use super::send_script::SendScript;
use crate::domain::Result;
use crate::store::ScriptedSend;
use crate::store::body::EnqueueSql;
use crate::store::rows::SendBatch;

pub(super) const SQL: EnqueueSql = EnqueueSql {
    insert_messages: "INSERT INTO {p}messages \
        (id, queue_id, priority, ordering_key, idempotency_key, headers, body, fairness_key, \
        created_at) VALUES {list}",
    message_row: "(?,?,?,?,?,?,?,?,UTC_TIMESTAMP(6))",
    scheduled_row: "(?,?,?,DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND),?,?)",
    select_keys: "SELECT idempotency_key, id, expires_at > UTC_TIMESTAMP(6) \
        FROM {p}dedup FORCE INDEX (PRIMARY) WHERE queue_id = ? AND idempotency_key IN ({list})",
    forget_keys: "DELETE t FROM ({rows}) v STRAIGHT_JOIN {p}dedup t FORCE INDEX (PRIMARY) \
        ON t.queue_id = v.q AND t.idempotency_key = v.k WHERE t.expires_at <= UTC_TIMESTAMP(6)",
    key_row: DEDUP_KEY_ROW,
    record_row: "(?,?,?,DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND))",
    stored: "SELECT id FROM {p}messages FORCE INDEX (PRIMARY) WHERE id IN ({list})",
    // A locking read: it waits for the row locks of a transaction whose COMMIT may still be
    // in flight on the lost connection (an ack's deletes, a send's inserts), then answers.
    stored_locking: "SELECT id FROM {p}messages FORCE INDEX (PRIMARY) WHERE id IN ({list}) \
        LOCK IN SHARE MODE",
    set_timing: "UPDATE {p}messages SET \
        deadline_at = TIMESTAMPADD(MICROSECOND, ?, '1970-01-01 00:00:00'), run_timeout_us = ? \
        WHERE id = ?",
    waiting_ready: "SELECT r.priority, r.attempts, r.token FROM {p}messages m FORCE INDEX (PRIMARY) \
        STRAIGHT_JOIN {p}ready r FORCE INDEX (arrival) \
        ON r.queue_id = m.queue_id AND r.priority = m.priority AND r.id = m.id \
        WHERE m.id = ? AND m.queue_id = ? FOR UPDATE",
    extend_key: "UPDATE {p}dedup SET expires_at = \
        GREATEST(expires_at, DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)) \
        WHERE queue_id = ? AND idempotency_key = ?",
};

/// The plain messages' rows of the one-statement send (`send_script.rs`): no fairness key.
pub(super) const INSERT_MESSAGES: &str = "INSERT INTO {p}messages \
    (id, queue_id, priority, ordering_key, idempotency_key, headers, body, created_at) VALUES {list}";
pub(super) const MESSAGE_ROW: &str = "(?,?,?,?,?,?,?,UTC_TIMESTAMP(6))";
/// One row of a derived table of `dedup` primary keys.
pub(super) const DEDUP_KEY_ROW: &str = "SELECT CAST(? AS SIGNED) AS q, CAST(? AS BINARY) AS k";

impl ScriptedSend for sqlx::MySql {
    type SendScript = SendScript;

    fn prepare_send_script(
        store: &MySqlStore,
        batch: &SendBatch<'_>,
    ) -> Result<Option<SendScript>> {
        store.script_for(batch)
    }

    async fn send_script(
        store: &MySqlStore,
        conn: &mut sqlx::MySqlConnection,
        script: &SendScript,
    ) -> Result<()> {
        store.run_send_script(conn, script).await
    }
}
