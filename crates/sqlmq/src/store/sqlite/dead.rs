//! A queue's dead letters' statements (the body is `store/body/dead.rs`): no row locks, a
//! redrive runs in a write transaction that has the database to itself.

use crate::store::body::DeadSql;

pub(super) const SQL: DeadSql = DeadSql {
    list: "SELECT d.id, d.attempts, d.died_at, m.created_at, m.errors, m.ordering_key, \
        m.headers, m.body FROM {p}dead d JOIN {p}messages m ON m.id = d.id WHERE d.queue_id = ? \
        ORDER BY d.died_at, d.id LIMIT ?",
    claim_oldest: "SELECT d.id, d.queue_id, d.priority, d.token, m.ordering_key \
        FROM {p}dead d JOIN {p}messages m ON m.id = d.id \
        WHERE d.queue_id = ? ORDER BY d.died_at, d.id LIMIT ?",
    claim_ids: "SELECT d.id, d.queue_id, d.priority, d.token, m.ordering_key \
        FROM {p}dead d JOIN {p}messages m ON m.id = d.id WHERE d.id IN ({list})",
};
