//! The time-driven moves' statements (the body is `store/body/maintain.rs`): each takes its
//! rows with `SKIP LOCKED` through the index of its order, so any number of sweepers may run.

use crate::store::body::MaintainSql;

pub(super) const SQL: MaintainSql = MaintainSql {
    any_due: "SELECT 1 FROM {p}scheduled FORCE INDEX (due) \
        WHERE queue_id = ? AND run_at <= UTC_TIMESTAMP(6) LIMIT 1",
    claim_due: "SELECT id, priority, attempts, token FROM {p}scheduled FORCE INDEX (due) \
        WHERE queue_id = ? AND run_at <= UTC_TIMESTAMP(6) ORDER BY run_at, id LIMIT ? \
        FOR UPDATE SKIP LOCKED",
    delete_scheduled: "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}scheduled t FORCE INDEX (PRIMARY) \
        ON t.id = v.id",
    any_expired: "SELECT 1 FROM {p}leases FORCE INDEX (expiry) \
        WHERE queue_id = ? AND lease_until <= UTC_TIMESTAMP(6) LIMIT 1",
    claim_expired: "SELECT id, queue_id, priority, token, attempts, ordering_key, 0 \
        FROM {p}leases FORCE INDEX (expiry) WHERE queue_id = ? AND lease_until <= UTC_TIMESTAMP(6) \
        ORDER BY lease_until LIMIT ? FOR UPDATE SKIP LOCKED",
    // The queue's in-flight rows (bounded by its consumers' concurrency) read through
    // `expiry`, filtered by owner. Rare (a process died or left), so no index on the hot table
    // for it.
    claim_owned: "SELECT id, queue_id, priority, token, attempts, ordering_key, 0 \
        FROM {p}leases FORCE INDEX (expiry) WHERE queue_id = ? AND owner = ? \
        LIMIT ? FOR UPDATE SKIP LOCKED",
    claim_old_keys: "SELECT queue_id, idempotency_key FROM {p}dedup FORCE INDEX (expiry) \
        WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED",
    delete_keys: "DELETE t FROM ({rows}) v STRAIGHT_JOIN {p}dedup t FORCE INDEX (PRIMARY) \
        ON t.queue_id = v.q AND t.idempotency_key = v.k",
};
