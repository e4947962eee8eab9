//! The process registry's statements (the body is `store/body/processes.rs`).

use super::now_us;
use crate::store::body::ProcessSql;

pub(super) const SQL: ProcessSql = ProcessSql {
    register: concat!(
        "INSERT INTO {p}processes ",
        "(id, kind, host, pid, queues, started_at, heartbeat_at, expires_at) VALUES (?, ?, ?, ?, ?, ",
        now_us!(),
        ", ",
        now_us!(),
        ", ",
        now_us!(),
        " + ?) ON CONFLICT (id) DO UPDATE SET queues = excluded.queues, ",
        "heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at"
    ),
    heartbeat: concat!(
        "UPDATE {p}processes SET heartbeat_at = ",
        now_us!(),
        ", expires_at = ",
        now_us!(),
        " + ? WHERE id = ?"
    ),
    dead: concat!(
        "SELECT id, queues FROM {p}processes WHERE expires_at < ",
        now_us!(),
        " ORDER BY expires_at LIMIT 100"
    ),
    prune: concat!(
        "DELETE FROM {p}processes WHERE id = ? AND expires_at < ",
        now_us!()
    ),
    deregister: "DELETE FROM {p}processes WHERE id = ?",
    list: concat!(
        "SELECT id, kind, host, pid, queues, started_at, heartbeat_at, ",
        now_us!(),
        " - heartbeat_at FROM {p}processes ORDER BY started_at"
    ),
};
