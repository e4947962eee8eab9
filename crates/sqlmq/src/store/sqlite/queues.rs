//! Queue rows' statements (the body is `store/body/queues.rs`).

use super::now_us;
use crate::store::body::QueueSql;

pub(super) const SQL: QueueSql = QueueSql {
    upsert: concat!(
        "INSERT INTO {p}queues ",
        "(name, paused, max_attempts, backoff, dedup_window_ms, fair, created_at, updated_at) ",
        "VALUES (?, 0, ?, ?, ?, ?, ",
        now_us!(),
        ", ",
        now_us!(),
        ") ON CONFLICT (name) DO UPDATE SET max_attempts = excluded.max_attempts, ",
        "backoff = excluded.backoff, dedup_window_ms = excluded.dedup_window_ms, ",
        "fair = excluded.fair, ",
        "updated_at = excluded.updated_at"
    ),
    set_paused: concat!(
        "UPDATE {p}queues SET paused = ?, updated_at = ",
        now_us!(),
        " WHERE name = ?"
    ),
    upsert_limits: "INSERT INTO {p}queue_limits \
        (queue_id, max_in_flight, rate_count, rate_window_us, concurrency_limit, \
        key_rate_count, key_rate_window_us) VALUES (?, ?, ?, ?, ?, ?, ?) \
        ON CONFLICT (queue_id) DO UPDATE SET max_in_flight = excluded.max_in_flight, \
        rate_count = excluded.rate_count, rate_window_us = excluded.rate_window_us, \
        concurrency_limit = excluded.concurrency_limit, key_rate_count = excluded.key_rate_count, \
        key_rate_window_us = excluded.key_rate_window_us",
};
