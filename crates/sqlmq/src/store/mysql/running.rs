//! Statements of running messages: cancels and progress (the body is `store/body/running.rs`).

use super::micros;
use crate::store::body::RunningSql;

pub(super) const SQL: RunningSql = RunningSql {
    // The lease row read locked (a plain INSERT … SELECT would only share-lock it), so that an
    // ack under way finishes first or finds it gone.
    move_lease: "INSERT INTO {p}cancels (id, queue_id, token, lease_until, cancelled_at, reason) \
        SELECT id, queue_id, token, lease_until, UTC_TIMESTAMP(6), ? FROM {p}leases \
        WHERE id = ? AND queue_id = ? FOR UPDATE",
    ended_cancels: "SELECT id, token FROM {p}cancels \
        WHERE queue_id = ? AND lease_until <= UTC_TIMESTAMP(6) \
        ORDER BY lease_until LIMIT ? FOR UPDATE SKIP LOCKED",
    any_ended_cancel: "SELECT 1 FROM {p}cancels \
        WHERE queue_id = ? AND lease_until <= UTC_TIMESTAMP(6) LIMIT 1",
    set_progress: "INSERT INTO {p}progress (id, queue_id, token, value, updated_at) \
        SELECT l.id, l.queue_id, l.token, v.value, UTC_TIMESTAMP(6) \
        FROM (SELECT ? AS value) v JOIN {p}leases l ON l.id = ? AND l.token = ? \
        ON DUPLICATE KEY UPDATE token = VALUES(token), value = VALUES(value), \
        updated_at = VALUES(updated_at)",
    progress: concat!(
        "SELECT p.value, ",
        micros!("p.updated_at"),
        " FROM {p}progress p JOIN {p}leases l ON l.id = p.id AND l.token = p.token \
        WHERE p.id = ?"
    ),
    queue_progress: concat!(
        "SELECT p.id, p.value, ",
        micros!("p.updated_at"),
        " FROM {p}progress p JOIN {p}leases l ON l.id = p.id AND l.token = p.token \
        WHERE p.queue_id = ? ORDER BY p.id LIMIT ?"
    ),
};
