//! Queue rows' statements (the body is `store/body/queues.rs`).

use crate::store::body::QueueSql;

pub(super) const SQL: QueueSql = QueueSql {
    upsert: "INSERT INTO {p}queues \
        (name, paused, max_attempts, backoff, dedup_window_ms, fair, created_at, updated_at) \
        VALUES (?, 0, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) \
        ON DUPLICATE KEY UPDATE max_attempts = VALUES(max_attempts), backoff = VALUES(backoff), \
        dedup_window_ms = VALUES(dedup_window_ms), fair = VALUES(fair), \
        updated_at = VALUES(updated_at)",
    set_paused: "UPDATE {p}queues SET paused = ?, updated_at = UTC_TIMESTAMP(6) WHERE name = ?",
    upsert_limits: "INSERT INTO {p}queue_limits \
        (queue_id, max_in_flight, rate_count, rate_window_us, concurrency_limit, \
        key_rate_count, key_rate_window_us) VALUES (?, ?, ?, ?, ?, ?, ?) \
        ON DUPLICATE KEY UPDATE max_in_flight = VALUES(max_in_flight), \
        rate_count = VALUES(rate_count), rate_window_us = VALUES(rate_window_us), \
        concurrency_limit = VALUES(concurrency_limit), key_rate_count = VALUES(key_rate_count), \
        key_rate_window_us = VALUES(key_rate_window_us)",
};
