//! The operator statements (the body is `store/body/admin.rs`): no locks to take, the write
//! transaction has the database to itself.

use super::now_us;
use crate::store::body::AdminSql;

pub(super) const SQL: AdminSql = AdminSql {
    // The oldest ready message is among the first of each priority (ids are time-ordered):
    // one `MIN(id)` per priority over `ready`'s primary key, then one lookup each.
    oldest_ready: concat!(
        "SELECT ",
        now_us!(),
        " - MIN(m.created_at) FROM ",
        "(SELECT priority, MIN(id) AS id FROM {p}ready WHERE queue_id = ? GROUP BY priority) h ",
        "JOIN {p}messages m ON m.id = h.id"
    ),
    lock_message: "SELECT queue_id, priority, ordering_key FROM {p}messages WHERE id = ?",
    delete_blocked: "DELETE FROM {p}blocked WHERE id IN ({list})",
    delete_dead: "DELETE FROM {p}dead WHERE id IN ({list})",
    purge_ready: "SELECT priority, id FROM {p}ready WHERE queue_id = ? LIMIT ?",
    delete_ready: "DELETE FROM {p}ready WHERE (queue_id, priority, id) IN (VALUES {list})",
    ready_key_row: "(?,?,?)",
    purge_by_id: [
        "SELECT id FROM {p}scheduled WHERE queue_id = ? LIMIT ?",
        "SELECT id FROM {p}blocked WHERE queue_id = ? LIMIT ?",
        "SELECT id FROM {p}leases WHERE queue_id = ? LIMIT ?",
        "SELECT id FROM {p}dead WHERE queue_id = ? LIMIT ?",
    ],
};
