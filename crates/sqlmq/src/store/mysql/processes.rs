//! The process registry's statements (the body is `store/body/processes.rs`).

use super::micros;
use crate::store::body::ProcessSql;

pub(super) const SQL: ProcessSql = ProcessSql {
    register: "INSERT INTO {p}processes \
        (id, kind, host, pid, queues, started_at, heartbeat_at, expires_at) \
        VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), \
        DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)) \
        ON DUPLICATE KEY UPDATE queues = VALUES(queues), heartbeat_at = VALUES(heartbeat_at), \
        expires_at = VALUES(expires_at)",
    heartbeat: "UPDATE {p}processes SET heartbeat_at = UTC_TIMESTAMP(6), \
        expires_at = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND) WHERE id = ?",
    dead: "SELECT id, queues FROM {p}processes FORCE INDEX (expiry) \
        WHERE expires_at < UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT 100",
    prune: "DELETE FROM {p}processes WHERE id = ? AND expires_at < UTC_TIMESTAMP(6)",
    deregister: "DELETE FROM {p}processes WHERE id = ?",
    list: concat!(
        "SELECT id, kind, host, pid, queues, ",
        micros!("started_at"),
        ", ",
        micros!("heartbeat_at"),
        ", TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) FROM {p}processes \
        ORDER BY started_at"
    ),
};
