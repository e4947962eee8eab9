//! The consumer group statements (the body is `store/body/groups.rs`). SQLite has no
//! `DELETE … LIMIT`: a deletion step takes its keys from a limited subquery (`?1`, the group
//! id, used twice). In an upsert's `SET`, the bare column names read the row's old values.

use super::now_us;
use crate::store::body::GroupSql;

pub(super) const SQL: GroupSql = GroupSql {
    insert: concat!(
        "INSERT OR IGNORE INTO {p}consumer_groups ",
        "(topic_id, name, mode, max_attempts, backoff, consume_timeout_ms, created_at) ",
        "VALUES (?, ?, ?, ?, ?, ?, ",
        now_us!(),
        ")"
    ),
    set_cursors: "INSERT INTO {p}group_cursors \
        (group_id, partition_no, next_offset, high_offset) VALUES {list} \
        ON CONFLICT (group_id, partition_no) DO UPDATE SET next_offset = excluded.next_offset, \
        high_offset = max(high_offset, excluded.next_offset)",
    add_cursors: "INSERT OR IGNORE INTO {p}group_cursors \
        (group_id, partition_no, next_offset, high_offset) \
        SELECT g.id, tp.partition_no, 0, 0 FROM {p}consumer_groups g \
        JOIN {p}topic_partitions tp ON tp.topic_id = g.topic_id WHERE g.topic_id = ?",
    upsert_limits: "INSERT INTO {p}group_limits (group_id, rate_count, rate_window_us) \
        VALUES (?, ?, ?) ON CONFLICT (group_id) DO UPDATE SET rate_count = excluded.rate_count, \
        rate_window_us = excluded.rate_window_us",
    // One writer at a time: the transaction that reads has the database to itself.
    lock_limits: "SELECT rate_count, rate_window_us FROM {p}group_limits WHERE group_id = ?",
    delete: &[
        "DELETE FROM {p}member_dead WHERE group_id = ?1 AND (member, id) IN \
         (SELECT member, id FROM {p}member_dead WHERE group_id = ?1 LIMIT 1000)",
        "DELETE FROM {p}group_leases WHERE group_id = ?1 AND id IN \
         (SELECT id FROM {p}group_leases WHERE group_id = ?1 LIMIT 1000)",
        "DELETE FROM {p}group_retries WHERE group_id = ?1 AND id IN \
         (SELECT id FROM {p}group_retries WHERE group_id = ?1 LIMIT 1000)",
        "DELETE FROM {p}group_dead WHERE group_id = ?1 AND id IN \
         (SELECT id FROM {p}group_dead WHERE group_id = ?1 LIMIT 1000)",
        "DELETE FROM {p}group_history WHERE group_id = ?1 AND (partition_no, msg_offset) IN \
         (SELECT partition_no, msg_offset FROM {p}group_history WHERE group_id = ?1 LIMIT 1000)",
        "DELETE FROM {p}group_positions WHERE group_id = ?1 AND (member, partition_no) IN \
         (SELECT member, partition_no FROM {p}group_positions WHERE group_id = ?1 LIMIT 1000)",
        "DELETE FROM {p}group_cursors WHERE group_id = ?1 AND partition_no IN \
         (SELECT partition_no FROM {p}group_cursors WHERE group_id = ?1 LIMIT 1000)",
        "DELETE FROM {p}group_deliveries WHERE group_id = ?1 AND id IN \
         (SELECT id FROM {p}group_deliveries WHERE group_id = ?1 LIMIT 1000)",
        "DELETE FROM {p}group_limits WHERE group_id = ?1",
        "DELETE FROM {p}consumer_groups WHERE id = ?1",
    ],
};
