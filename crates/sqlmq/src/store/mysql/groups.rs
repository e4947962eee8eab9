//! The consumer group statements (the body is `store/body/groups.rs`).

use crate::store::body::GroupSql;

pub(super) const SQL: GroupSql = GroupSql {
    insert: "INSERT IGNORE INTO {p}consumer_groups \
        (topic_id, name, mode, max_attempts, backoff, consume_timeout_ms, created_at) \
        VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))",
    set_cursors: "INSERT INTO {p}group_cursors \
        (group_id, partition_no, next_offset, high_offset) VALUES {list} \
        ON DUPLICATE KEY UPDATE next_offset = VALUES(next_offset), \
        high_offset = GREATEST(high_offset, VALUES(next_offset))",
    add_cursors: "INSERT IGNORE INTO {p}group_cursors \
        (group_id, partition_no, next_offset, high_offset) \
        SELECT g.id, tp.partition_no, 0, 0 FROM {p}consumer_groups g \
        JOIN {p}topic_partitions tp ON tp.topic_id = g.topic_id WHERE g.topic_id = ?",
    upsert_limits: "INSERT INTO {p}group_limits (group_id, rate_count, rate_window_us) \
        VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE rate_count = VALUES(rate_count), \
        rate_window_us = VALUES(rate_window_us)",
    lock_limits: "SELECT rate_count, rate_window_us FROM {p}group_limits \
        WHERE group_id = ? FOR UPDATE",
    delete: &[
        "DELETE FROM {p}member_dead WHERE group_id = ? LIMIT 1000",
        "DELETE FROM {p}group_leases WHERE group_id = ? LIMIT 1000",
        "DELETE FROM {p}group_retries WHERE group_id = ? LIMIT 1000",
        "DELETE FROM {p}group_dead WHERE group_id = ? LIMIT 1000",
        "DELETE FROM {p}group_history WHERE group_id = ? LIMIT 1000",
        "DELETE FROM {p}group_positions WHERE group_id = ? LIMIT 1000",
        "DELETE FROM {p}group_cursors WHERE group_id = ? LIMIT 1000",
        "DELETE FROM {p}group_deliveries WHERE group_id = ? LIMIT 1000",
        "DELETE FROM {p}group_limits WHERE group_id = ?",
        "DELETE FROM {p}consumer_groups WHERE id = ?",
    ],
};
