//! The operator statements (the body is `store/body/admin.rs`). A purge takes its rows with
//! `SKIP LOCKED` (rows in use are skipped, the engine loops) and deletes them through derived
//! tables of keys (see `store/statements.rs` for why not `IN` lists).

use crate::store::body::AdminSql;

pub(super) const SQL: AdminSql = AdminSql {
    // The oldest ready message is among the first of each priority (ids are time-ordered): a
    // loose index scan over `ready`'s `arrival` index, then one lookup per priority.
    oldest_ready: "SELECT TIMESTAMPDIFF(MICROSECOND, MIN(m.created_at), UTC_TIMESTAMP(6)) \
        FROM (SELECT priority, MIN(id) AS id FROM {p}ready FORCE INDEX (arrival) \
        WHERE queue_id = ? GROUP BY priority) h \
        STRAIGHT_JOIN {p}messages m FORCE INDEX (PRIMARY) ON m.id = h.id",
    lock_message: "SELECT queue_id, priority, ordering_key FROM {p}messages WHERE id = ? FOR UPDATE",
    delete_blocked: "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}blocked t FORCE INDEX (id) \
        ON t.id = v.id",
    delete_dead: "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}dead t FORCE INDEX (PRIMARY) \
        ON t.id = v.id",
    purge_ready: "SELECT priority, id FROM {p}ready FORCE INDEX (PRIMARY) WHERE queue_id = ? \
        LIMIT ? FOR UPDATE SKIP LOCKED",
    delete_ready: DELETE_READY,
    ready_key_row: READY_KEY_ROW,
    purge_by_id: [
        "SELECT id FROM {p}scheduled FORCE INDEX (due) WHERE queue_id = ? LIMIT ? \
            FOR UPDATE SKIP LOCKED",
        "SELECT id FROM {p}blocked FORCE INDEX (PRIMARY) WHERE queue_id = ? LIMIT ? \
            FOR UPDATE SKIP LOCKED",
        "SELECT id FROM {p}leases FORCE INDEX (expiry) WHERE queue_id = ? LIMIT ? \
            FOR UPDATE SKIP LOCKED",
        "SELECT id FROM {p}dead FORCE INDEX (queue_died) WHERE queue_id = ? LIMIT ? \
            FOR UPDATE SKIP LOCKED",
    ],
};

/// Delete `ready` rows by their `arrival` key (a cancel, a purge): what finds a ready row by
/// its message knows no virtual start time. The claim's and the take's moves know it and
/// delete by primary key (`claim.rs`).
pub(super) const DELETE_READY: &str = "DELETE t FROM ({rows}) v STRAIGHT_JOIN {p}ready t \
    FORCE INDEX (arrival) ON t.queue_id = v.q AND t.priority = v.p AND t.id = v.id";
/// One row of [`DELETE_READY`]'s derived table: a `ready` row's `arrival` key.
pub(super) const READY_KEY_ROW: &str =
    "SELECT CAST(? AS SIGNED) AS q, CAST(? AS SIGNED) AS p, CAST(? AS BINARY) AS id";
