//! The time-driven moves' statements (the body is `store/body/maintain.rs`). No `SKIP LOCKED`:
//! each step runs in a write transaction that has the database to itself, so two sweepers run
//! one after the other and the second finds the work done.

use super::now_us;
use crate::store::body::MaintainSql;

pub(super) const SQL: MaintainSql = MaintainSql {
    any_due: concat!(
        "SELECT 1 FROM {p}scheduled WHERE queue_id = ? AND run_at <= ",
        now_us!(),
        " LIMIT 1"
    ),
    claim_due: concat!(
        "SELECT id, priority, attempts, token FROM {p}scheduled WHERE queue_id = ? AND run_at <= ",
        now_us!(),
        " ORDER BY run_at, id LIMIT ?"
    ),
    delete_scheduled: "DELETE FROM {p}scheduled WHERE id IN ({list})",
    any_expired: concat!(
        "SELECT 1 FROM {p}leases WHERE queue_id = ? AND lease_until <= ",
        now_us!(),
        " LIMIT 1"
    ),
    claim_expired: concat!(
        "SELECT id, queue_id, priority, token, attempts, ordering_key, 0 FROM {p}leases ",
        "WHERE queue_id = ? AND lease_until <= ",
        now_us!(),
        " ORDER BY lease_until LIMIT ?"
    ),
    // The queue's in-flight rows read through `leases_expiry`, filtered by owner. Rare (a
    // process died or left), so no index on the hot table for it.
    claim_owned: "SELECT id, queue_id, priority, token, attempts, ordering_key, 0 \
        FROM {p}leases WHERE queue_id = ? AND owner = ? LIMIT ?",
    claim_old_keys: concat!(
        "SELECT queue_id, idempotency_key FROM {p}dedup WHERE expires_at <= ",
        now_us!(),
        " ORDER BY expires_at LIMIT ?"
    ),
    delete_keys: "DELETE FROM {p}dedup WHERE (queue_id, idempotency_key) IN (VALUES {list})",
};
