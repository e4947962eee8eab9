//! Where a cluster group stands: the statements (the body is `store/body/group_state.rs`).
//! Plain reads, on the reader connections.

use super::now_us;
use crate::store::body::GroupStateSql;

pub(super) const SQL: GroupStateSql = GroupStateSql {
    leases_by_partition: "SELECT partition_no, COUNT(*), MIN(msg_offset) \
        FROM {p}group_leases WHERE group_id = ? GROUP BY partition_no",
    retries_by_partition: "SELECT partition_no, COUNT(*), MIN(msg_offset) \
        FROM {p}group_retries WHERE group_id = ? GROUP BY partition_no",
    dead_by_partition: "SELECT partition_no, COUNT(*), MIN(msg_offset) \
        FROM {p}group_dead WHERE group_id = ? GROUP BY partition_no",
    published_at: concat!(
        "SELECT published_at, ",
        now_us!(),
        " FROM {p}topic_log WHERE topic_id = ? AND partition_no = ? AND msg_offset = ?"
    ),
    lease_of: "SELECT token, attempts, owner, claimed_at, lease_until \
        FROM {p}group_leases WHERE group_id = ? AND id = ?",
    retry_of: "SELECT attempts, run_at FROM {p}group_retries WHERE group_id = ? AND id = ?",
    dead_of: "SELECT attempts, died_at FROM {p}group_dead WHERE group_id = ? AND id = ?",
    history_of: "SELECT state, attempts, events, settled_at FROM {p}group_history \
        WHERE group_id = ? AND partition_no = ? AND msg_offset = ?",
    // The group's in-flight rows.
    held_too_long: concat!(
        "SELECT id, partition_no, msg_offset, token, owner, ",
        now_us!(),
        " - claimed_at FROM {p}group_leases WHERE group_id = ? AND claimed_at < ",
        now_us!(),
        " - ?"
    ),
};
