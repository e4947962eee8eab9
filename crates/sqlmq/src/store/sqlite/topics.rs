//! The topic statements (the body is `store/body/topics.rs`). SQLite has no `DELETE … LIMIT`:
//! a deletion step takes its keys from a limited subquery (`?1`, the topic id, used twice).
//! There is no pending table: records are logged at publish (`publish.rs`).

use super::now_us;
use crate::store::body::TopicSql;

pub(super) const SQL: TopicSql = TopicSql {
    upsert: concat!(
        "INSERT INTO {p}topics (name, partitions, retention_ms, retention_bytes, ",
        "retention_keeps_unconsumed, strict_order, created_at, updated_at) ",
        "VALUES (?, ?, ?, ?, ?, ?, ",
        now_us!(),
        ", ",
        now_us!(),
        ") ON CONFLICT (name) DO UPDATE SET partitions = max(partitions, excluded.partitions), ",
        "retention_ms = excluded.retention_ms, retention_bytes = excluded.retention_bytes, ",
        "retention_keeps_unconsumed = excluded.retention_keeps_unconsumed, ",
        "strict_order = excluded.strict_order, updated_at = excluded.updated_at"
    ),
    add_partitions: "INSERT OR IGNORE INTO {p}topic_partitions \
        (topic_id, partition_no, next_offset, low_offset, bytes, last_at) VALUES {list}",
    partition_row: concat!("(?, ?, 0, 0, 0, ", now_us!(), ")"),
    delete: &[
        "DELETE FROM {p}topic_log WHERE topic_id = ?1 AND (partition_no, msg_offset) IN \
         (SELECT partition_no, msg_offset FROM {p}topic_log WHERE topic_id = ?1 \
         ORDER BY partition_no, msg_offset LIMIT 1000)",
        "DELETE FROM {p}topic_partitions WHERE topic_id = ?1 AND partition_no IN \
         (SELECT partition_no FROM {p}topic_partitions WHERE topic_id = ?1 LIMIT 1000)",
        "DELETE FROM {p}topics WHERE id = ?1",
    ],
};
