//! The cluster-group claim's statements (the body is `store/body/group_claim.rs`; the claim's
//! decisions are the engine's, `topic/claim.rs`). They run in one short READ COMMITTED
//! transaction:
//!
//! - due retries of the group, `FOR UPDATE SKIP LOCKED` through `(group_id, run_at, id)`;
//! - cursors with work, `FOR UPDATE SKIP LOCKED`, from a given partition on: a cursor row is
//!   the lock on handing out its partition's next offsets, so two members never take the same
//!   offset, and a member finding a partition busy moves on to another. The partition's end
//!   (`topic_partitions.next_offset`) is read by a subquery, which a locking read does not
//!   lock: claims never contend with sequencing. Only when every partition with work is locked
//!   does the claim wait for one (`busy_cursor`, then `wait_cursor`);
//! - the records of the offsets taken, by primary key range; the cursors move past them;
//! - one lease row per record, with a fencing token.
//!
//! Offsets are handed out only below the partition's end, which advances only by sequencing
//! commits covering dense ranges, so a cursor can never pass an offset that is not yet visible.
//! Lists of positions and of ids to delete are derived tables driving a `STRAIGHT_JOIN`
//! (`statements::ID_ROW`).

use super::micros;
use crate::store::body::{GroupClaimSql, cursor_select, partition_end};

/// Columns of a cursor with its partition's end and first retained offset: topic id, topic
/// id, group id.
macro_rules! cursor_columns {
    () => {
        concat!(
            cursor_select!(),
            micros!("UTC_TIMESTAMP(6)"),
            " FROM {p}group_cursors c FORCE INDEX (PRIMARY) WHERE c.group_id = ? "
        )
    };
}

pub(super) const SQL: GroupClaimSql = GroupClaimSql {
    claim_retries: concat!(
        "SELECT id, partition_no, msg_offset, attempts, token, ",
        micros!("UTC_TIMESTAMP(6)"),
        " FROM {p}group_retries FORCE INDEX (due) WHERE group_id = ? ",
        "AND run_at <= UTC_TIMESTAMP(6) ORDER BY run_at, id LIMIT ? FOR UPDATE SKIP LOCKED"
    ),
    delete_retries: "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}group_retries t \
        FORCE INDEX (PRIMARY) ON t.group_id = ? AND t.id = v.id",
    held: "SELECT id FROM {p}group_leases FORCE INDEX (PRIMARY) \
        WHERE group_id = ? AND id IN ({list}) FOR UPDATE",
    log_at: concat!(
        "SELECT l.partition_no, l.msg_offset, l.id, l.msg_key, l.headers, l.body, ",
        micros!("l.published_at"),
        " FROM ({rows}) v STRAIGHT_JOIN {p}topic_log l FORCE INDEX (PRIMARY) ",
        "ON l.topic_id = ? AND l.partition_no = v.p AND l.msg_offset = v.o"
    ),
    position_row: "SELECT CAST(? AS SIGNED) AS p, CAST(? AS SIGNED) AS o",
    lock_cursors: concat!(
        cursor_columns!(),
        "AND c.partition_no >= ? AND c.partition_no < ? AND c.next_offset < ",
        partition_end!(),
        " ORDER BY c.partition_no LIMIT ? FOR UPDATE SKIP LOCKED"
    ),
    busy_cursor: concat!(
        "SELECT c.partition_no FROM {p}group_cursors c FORCE INDEX (PRIMARY) ",
        "WHERE c.group_id = ? AND c.next_offset < ",
        partition_end!(),
        " LIMIT 1"
    ),
    wait_cursor: concat!(cursor_columns!(), "AND c.partition_no = ? FOR UPDATE"),
    occupied: "SELECT DISTINCT partition_no FROM {p}group_leases FORCE INDEX (part) \
        WHERE group_id = ? AND partition_no IN ({list}) UNION SELECT DISTINCT partition_no \
        FROM {p}group_retries FORCE INDEX (part) WHERE group_id = ? AND partition_no IN ({list})",
    log_range: concat!(
        "SELECT partition_no, msg_offset, id, msg_key, headers, body, ",
        micros!("published_at"),
        " FROM {p}topic_log FORCE INDEX (PRIMARY) WHERE topic_id = ? AND partition_no = ? ",
        "AND msg_offset >= ? AND msg_offset < ? ORDER BY msg_offset"
    ),
    past_tokens: "SELECT msg_offset, token FROM {p}group_history FORCE INDEX (PRIMARY) \
        WHERE group_id = ? AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?",
    lease_row: "(?,?,?,?,?,?,DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND),\
        DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND),?)",
};
