//! A cluster group's dead letters, waiting retries and replays: the statements (the body is
//! `store/body/group_dead.rs`). A redrive locks the dead rows before it moves them; lists of
//! ids that feed a write are derived tables (`{ids}`, see `statements::ID_ROW`).

use super::micros;
use crate::store::body::GroupDeadSql;

pub(super) const SQL: GroupDeadSql = GroupDeadSql {
    list_dead: concat!(
        "SELECT d.id, d.partition_no, d.msg_offset, d.attempts, ",
        micros!("d.died_at"),
        ", l.msg_key, l.headers, l.body, ",
        micros!("l.published_at"),
        ", h.events FROM {p}group_dead d FORCE INDEX (died) ",
        "LEFT JOIN {p}topic_log l FORCE INDEX (PRIMARY) ON l.topic_id = ? ",
        "AND l.partition_no = d.partition_no AND l.msg_offset = d.msg_offset ",
        "LEFT JOIN {p}group_history h FORCE INDEX (PRIMARY) ON h.group_id = d.group_id ",
        "AND h.partition_no = d.partition_no AND h.msg_offset = d.msg_offset ",
        "WHERE d.group_id = ? ORDER BY d.died_at, d.id LIMIT ?"
    ),
    lock_dead: "SELECT id FROM {p}group_dead FORCE INDEX (PRIMARY) \
        WHERE group_id = ? AND id IN ({list}) FOR UPDATE",
    dead_to_retries: "INSERT INTO {p}group_retries \
        (group_id, id, partition_no, msg_offset, run_at, attempts, token) \
        SELECT d.group_id, d.id, d.partition_no, d.msg_offset, UTC_TIMESTAMP(6), 0, d.token \
        FROM ({ids}) v STRAIGHT_JOIN {p}group_dead d FORCE INDEX (PRIMARY) \
        ON d.group_id = ? AND d.id = v.id \
        ON DUPLICATE KEY UPDATE run_at = VALUES(run_at), attempts = 0",
    delete_dead: "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}group_dead t \
        FORCE INDEX (PRIMARY) ON t.group_id = ? AND t.id = v.id",
    oldest_dead: "SELECT id FROM {p}group_dead FORCE INDEX (died) WHERE group_id = ? \
        ORDER BY died_at, id LIMIT ?",
    list_retries: concat!(
        "SELECT id, partition_no, msg_offset, attempts, ",
        micros!("run_at"),
        " FROM {p}group_retries FORCE INDEX (due) WHERE group_id = ? ORDER BY run_at, id LIMIT ?"
    ),
    retry_now: "UPDATE {p}group_retries SET run_at = UTC_TIMESTAMP(6) \
        WHERE group_id = ? AND id IN ({list})",
    count_range: "SELECT COUNT(*) FROM {p}topic_log FORCE INDEX (PRIMARY) \
        WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?",
    replay_range: "INSERT INTO {p}group_retries \
        (group_id, id, partition_no, msg_offset, run_at, attempts, token) \
        SELECT ?, l.id, l.partition_no, l.msg_offset, UTC_TIMESTAMP(6), 0, COALESCE(h.token, 0) \
        FROM {p}topic_log l FORCE INDEX (PRIMARY) \
        LEFT JOIN {p}group_history h FORCE INDEX (PRIMARY) ON h.group_id = ? \
        AND h.partition_no = l.partition_no AND h.msg_offset = l.msg_offset \
        WHERE l.topic_id = ? AND l.partition_no = ? AND l.msg_offset >= ? AND l.msg_offset < ? \
        ON DUPLICATE KEY UPDATE run_at = VALUES(run_at), attempts = 0",
};
