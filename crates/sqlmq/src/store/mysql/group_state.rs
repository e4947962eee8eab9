//! Where a cluster group stands: the statements (the body is `store/body/group_state.rs`).
//! Each reads its table through the index named.

use super::micros;
use crate::store::body::GroupStateSql;

pub(super) const SQL: GroupStateSql = GroupStateSql {
    leases_by_partition: "SELECT partition_no, COUNT(*), MIN(msg_offset) \
        FROM {p}group_leases FORCE INDEX (part) WHERE group_id = ? GROUP BY partition_no",
    retries_by_partition: "SELECT partition_no, COUNT(*), MIN(msg_offset) \
        FROM {p}group_retries FORCE INDEX (part) WHERE group_id = ? GROUP BY partition_no",
    dead_by_partition: "SELECT partition_no, COUNT(*), MIN(msg_offset) \
        FROM {p}group_dead FORCE INDEX (PRIMARY) WHERE group_id = ? GROUP BY partition_no",
    published_at: concat!(
        "SELECT ",
        micros!("published_at"),
        ", ",
        micros!("UTC_TIMESTAMP(6)"),
        " FROM {p}topic_log FORCE INDEX (PRIMARY) ",
        "WHERE topic_id = ? AND partition_no = ? AND msg_offset = ?"
    ),
    lease_of: concat!(
        "SELECT token, attempts, owner, ",
        micros!("claimed_at"),
        ", ",
        micros!("lease_until"),
        " FROM {p}group_leases FORCE INDEX (PRIMARY) WHERE group_id = ? AND id = ?"
    ),
    retry_of: concat!(
        "SELECT attempts, ",
        micros!("run_at"),
        " FROM {p}group_retries FORCE INDEX (PRIMARY) WHERE group_id = ? AND id = ?"
    ),
    dead_of: concat!(
        "SELECT attempts, ",
        micros!("died_at"),
        " FROM {p}group_dead FORCE INDEX (PRIMARY) WHERE group_id = ? AND id = ?"
    ),
    history_of: concat!(
        "SELECT state, attempts, events, ",
        micros!("settled_at"),
        " FROM {p}group_history FORCE INDEX (PRIMARY) ",
        "WHERE group_id = ? AND partition_no = ? AND msg_offset = ?"
    ),
    // The group's in-flight rows.
    held_too_long: "SELECT id, partition_no, msg_offset, token, owner, \
        TIMESTAMPDIFF(MICROSECOND, claimed_at, UTC_TIMESTAMP(6)) \
        FROM {p}group_leases FORCE INDEX (PRIMARY) WHERE group_id = ? \
        AND claimed_at < DATE_SUB(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)",
};
