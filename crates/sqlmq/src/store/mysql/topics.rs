//! The topic statements (the body is `store/body/topics.rs`). `DELETE … ORDER BY … LIMIT`
//! deletes a topic's rows in primary-key order; the pending table is MySQL's only.

use crate::store::body::TopicSql;

pub(super) const SQL: TopicSql = TopicSql {
    upsert: "INSERT INTO {p}topics (name, partitions, retention_ms, retention_bytes, \
        retention_keeps_unconsumed, strict_order, created_at, updated_at) \
        VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) \
        ON DUPLICATE KEY UPDATE partitions = GREATEST(partitions, VALUES(partitions)), \
        retention_ms = VALUES(retention_ms), retention_bytes = VALUES(retention_bytes), \
        retention_keeps_unconsumed = VALUES(retention_keeps_unconsumed), \
        strict_order = VALUES(strict_order), updated_at = VALUES(updated_at)",
    add_partitions: "INSERT IGNORE INTO {p}topic_partitions \
        (topic_id, partition_no, next_offset, low_offset, bytes, last_at) VALUES {list}",
    partition_row: "(?, ?, 0, 0, 0, UTC_TIMESTAMP(6))",
    delete: &[
        "DELETE FROM {p}topic_log WHERE topic_id = ? \
         ORDER BY topic_id, partition_no, msg_offset LIMIT 1000",
        "DELETE FROM {p}topic_pending WHERE topic_id = ? \
         ORDER BY topic_id, partition_no, id LIMIT 1000",
        "DELETE FROM {p}topic_partitions WHERE topic_id = ? LIMIT 1000",
        "DELETE FROM {p}topics WHERE id = ?",
    ],
};
