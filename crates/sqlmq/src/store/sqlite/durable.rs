//! Durable execution's statements (the body is `store/body/durable.rs`). No locking reads:
//! a write transaction has the database to itself, so an emit and a run registering its wait
//! never interleave.

use super::now_us;
use crate::store::body::DurableSql;

pub(super) const SQL: DurableSql = DurableSql {
    journal: concat!(
        "SELECT seq, name, kind, state, result, wake_at, wake_at - ",
        now_us!(),
        ", recorded_at FROM {p}run_steps WHERE message_id = ? ORDER BY seq"
    ),
    // `now + NULL` is NULL: a row without a wake time.
    record: concat!(
        "INSERT INTO {p}run_steps ",
        "(message_id, seq, name, kind, state, wake_at, result, recorded_at) ",
        "SELECT ?, ?, ?, ?, ?, ",
        now_us!(),
        " + ?, ?, ",
        now_us!(),
        " FROM {p}leases WHERE id = ? AND token = ?"
    ),
    drop_expired_event: concat!(
        "DELETE FROM {p}events WHERE name = ? AND expires_at < ",
        now_us!()
    ),
    emit: concat!(
        "INSERT OR IGNORE INTO {p}events (name, payload, emitted_at, expires_at) VALUES (?, ?, ",
        now_us!(),
        ", ",
        now_us!(),
        " + ?)"
    ),
    event_locked: concat!(
        "SELECT payload, emitted_at FROM {p}events WHERE name = ? AND expires_at >= ",
        now_us!()
    ),
    wait: concat!(
        "INSERT OR IGNORE INTO {p}event_waits (name, message_id, queue_id, since) VALUES (?, ?, ?, ",
        now_us!(),
        ")"
    ),
    waiters: "SELECT message_id, queue_id FROM {p}event_waits WHERE name = ?",
    scheduled_row: "SELECT id, priority, attempts, token FROM {p}scheduled WHERE id = ?",
    prune_events: concat!(
        "DELETE FROM {p}events WHERE name IN (SELECT name FROM {p}events WHERE expires_at < ",
        now_us!(),
        " ORDER BY expires_at LIMIT ?)"
    ),
    awaited: "SELECT name, COUNT(*), MIN(since) AS first FROM {p}event_waits \
        GROUP BY name ORDER BY first LIMIT ?",
    waiting_runs: "SELECT w.message_id, q.name, w.since FROM {p}event_waits w \
        JOIN {p}queues q ON q.id = w.queue_id WHERE w.name = ? ORDER BY w.since LIMIT ?",
    message_locked: "SELECT 1 FROM {p}messages WHERE id = ?",
    leases_locked: "SELECT id, token FROM {p}leases WHERE id IN ({list})",
    insert_done: "INSERT INTO {p}run_steps \
        (message_id, seq, name, kind, state, wake_at, result, recorded_at) VALUES {list}",
    done_row: concat!("(?, ?, ?, 0, 2, NULL, ?, ", now_us!(), ")"),
};
