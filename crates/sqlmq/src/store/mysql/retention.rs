//! The retention statements (the body is `store/body/retention.rs`). The reads name their
//! index (`FORCE INDEX`); `SUM` of lengths is a `DECIMAL`, cast back to an integer.

use crate::store::body::RetentionSql;

pub(super) const SQL: RetentionSql = RetentionSql {
    body_sizes: "SELECT msg_offset, LENGTH(body) FROM {p}topic_log \
        FORCE INDEX (PRIMARY) WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? \
        ORDER BY msg_offset LIMIT ?",
    range_bytes: "SELECT COUNT(*), CAST(COALESCE(SUM(LENGTH(body)), 0) AS SIGNED) \
        FROM {p}topic_log FORCE INDEX (PRIMARY) WHERE topic_id = ? AND partition_no = ? \
        AND msg_offset >= ? AND msg_offset < ?",
    raise_low: "UPDATE {p}topic_partitions \
        SET low_offset = GREATEST(low_offset, ?), bytes = GREATEST(bytes - ?, 0) \
        WHERE topic_id = ? AND partition_no = ?",
    group_cursors: "SELECT g.id, g.mode, c.partition_no, c.next_offset \
        FROM {p}consumer_groups g JOIN {p}group_cursors c FORCE INDEX (PRIMARY) \
        ON c.group_id = g.id WHERE g.topic_id = ?",
};
