//! The retention statements (the body is `store/body/retention.rs`).

use crate::store::body::RetentionSql;

pub(super) const SQL: RetentionSql = RetentionSql {
    body_sizes: "SELECT msg_offset, length(body) FROM {p}topic_log \
        WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? ORDER BY msg_offset LIMIT ?",
    range_bytes: "SELECT COUNT(*), COALESCE(SUM(length(body)), 0) FROM {p}topic_log \
        WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?",
    raise_low: "UPDATE {p}topic_partitions \
        SET low_offset = max(low_offset, ?), bytes = max(bytes - ?, 0) \
        WHERE topic_id = ? AND partition_no = ?",
    group_cursors: "SELECT g.id, g.mode, c.partition_no, c.next_offset \
        FROM {p}consumer_groups g JOIN {p}group_cursors c ON c.group_id = g.id \
        WHERE g.topic_id = ?",
};
