//! Statements of running messages: cancels and progress (the body is `store/body/running.rs`).
//! No locking reads: a write transaction has the database to itself.

use super::now_us;
use crate::store::body::RunningSql;

pub(super) const SQL: RunningSql = RunningSql {
    move_lease: concat!(
        "INSERT INTO {p}cancels (id, queue_id, token, lease_until, cancelled_at, reason) ",
        "SELECT id, queue_id, token, lease_until, ",
        now_us!(),
        ", ? FROM {p}leases WHERE id = ? AND queue_id = ?"
    ),
    ended_cancels: concat!(
        "SELECT id, token FROM {p}cancels WHERE queue_id = ? AND lease_until <= ",
        now_us!(),
        " ORDER BY lease_until LIMIT ?"
    ),
    any_ended_cancel: concat!(
        "SELECT 1 FROM {p}cancels WHERE queue_id = ? AND lease_until <= ",
        now_us!(),
        " LIMIT 1"
    ),
    // `WHERE true`: SQLite's parser needs it between an INSERT's SELECT and its upsert clause.
    set_progress: concat!(
        "INSERT INTO {p}progress (id, queue_id, token, value, updated_at) ",
        "SELECT l.id, l.queue_id, l.token, v.value, ",
        now_us!(),
        " FROM (SELECT ? AS value) v JOIN {p}leases l ON l.id = ? AND l.token = ? WHERE true ",
        "ON CONFLICT (id) DO UPDATE SET token = excluded.token, value = excluded.value, ",
        "updated_at = excluded.updated_at"
    ),
    progress: "SELECT p.value, p.updated_at FROM {p}progress p \
        JOIN {p}leases l ON l.id = p.id AND l.token = p.token WHERE p.id = ?",
    queue_progress: "SELECT p.id, p.value, p.updated_at FROM {p}progress p \
        JOIN {p}leases l ON l.id = p.id AND l.token = p.token \
        WHERE p.queue_id = ? ORDER BY p.id LIMIT ?",
};
