//! Durable execution's statements (the body is `store/body/durable.rs`).

use super::micros;
use crate::store::body::DurableSql;

pub(super) const SQL: DurableSql = DurableSql {
    journal: concat!(
        "SELECT seq, name, kind, state, result, ",
        micros!("wake_at"),
        ", TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), wake_at), ",
        micros!("recorded_at"),
        " FROM {p}run_steps WHERE message_id = ? ORDER BY seq"
    ),
    // `DATE_ADD` of a NULL interval is NULL: a row without a wake time.
    record: "INSERT INTO {p}run_steps \
        (message_id, seq, name, kind, state, wake_at, result, recorded_at) \
        SELECT ?, ?, ?, ?, ?, DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND), ?, \
        UTC_TIMESTAMP(6) FROM {p}leases WHERE id = ? AND token = ?",
    drop_expired_event: "DELETE FROM {p}events WHERE name = ? AND expires_at < UTC_TIMESTAMP(6)",
    emit: "INSERT IGNORE INTO {p}events (name, payload, emitted_at, expires_at) \
        VALUES (?, ?, UTC_TIMESTAMP(6), DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND))",
    // A locking read waits for an emit of the name that has not committed yet: a run
    // registering its wait then sees the event rather than sleeping through it.
    event_locked: concat!(
        "SELECT payload, ",
        micros!("emitted_at"),
        " FROM {p}events WHERE name = ? AND expires_at >= UTC_TIMESTAMP(6) LOCK IN SHARE MODE"
    ),
    wait: "INSERT IGNORE INTO {p}event_waits (name, message_id, queue_id, since) \
        VALUES (?, ?, ?, UTC_TIMESTAMP(6))",
    // Locking: waits for a run registering its wait that has not committed yet, which is then
    // woken too.
    waiters: "SELECT message_id, queue_id FROM {p}event_waits WHERE name = ? FOR UPDATE",
    scheduled_row: "SELECT id, priority, attempts, token FROM {p}scheduled WHERE id = ? FOR UPDATE",
    prune_events: "DELETE FROM {p}events WHERE expires_at < UTC_TIMESTAMP(6) \
        ORDER BY expires_at LIMIT ?",
    awaited: concat!(
        "SELECT name, COUNT(*), MIN(",
        micros!("since"),
        ") AS first FROM {p}event_waits GROUP BY name ORDER BY first LIMIT ?"
    ),
    waiting_runs: concat!(
        "SELECT w.message_id, q.name, ",
        micros!("w.since"),
        " FROM {p}event_waits w JOIN {p}queues q ON q.id = w.queue_id \
        WHERE w.name = ? ORDER BY w.since LIMIT ?"
    ),
    message_locked: "SELECT 1 FROM {p}messages WHERE id = ? LOCK IN SHARE MODE",
    leases_locked: "SELECT id, token FROM {p}leases WHERE id IN ({list}) LOCK IN SHARE MODE",
    insert_done: "INSERT INTO {p}run_steps \
        (message_id, seq, name, kind, state, wake_at, result, recorded_at) VALUES {list}",
    done_row: "(?, ?, ?, 0, 2, NULL, ?, UTC_TIMESTAMP(6))",
};
