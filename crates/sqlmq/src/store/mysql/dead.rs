//! A queue's dead letters' statements (the body is `store/body/dead.rs`).

use super::micros;
use crate::store::body::DeadSql;

pub(super) const SQL: DeadSql = DeadSql {
    list: concat!(
        "SELECT d.id, d.attempts, ",
        micros!("d.died_at"),
        ", ",
        micros!("m.created_at"),
        ", m.errors, m.ordering_key, m.headers, m.body ",
        "FROM {p}dead d FORCE INDEX (queue_died) STRAIGHT_JOIN {p}messages m ON m.id = d.id ",
        "WHERE d.queue_id = ? ORDER BY d.died_at, d.id LIMIT ?"
    ),
    claim_oldest: "SELECT d.id, d.queue_id, d.priority, d.token, m.ordering_key \
        FROM {p}dead d FORCE INDEX (queue_died) STRAIGHT_JOIN {p}messages m ON m.id = d.id \
        WHERE d.queue_id = ? ORDER BY d.died_at, d.id LIMIT ? FOR UPDATE SKIP LOCKED",
    claim_ids: "SELECT d.id, d.queue_id, d.priority, d.token, m.ordering_key \
        FROM {p}dead d FORCE INDEX (PRIMARY) STRAIGHT_JOIN {p}messages m ON m.id = d.id \
        WHERE d.id IN ({list}) FOR UPDATE",
};
