//! A cluster group's dead letters, waiting retries and replays: the statements (the body is
//! `store/body/group_dead.rs`). A redrive reads the dead rows without locking them (MySQL's
//! `FOR UPDATE`): the transaction has the database to itself. Lists of ids are `IN` lists,
//! with the group id bound after them where MySQL's derived tables take it there.

use super::now_us;
use crate::store::body::GroupDeadSql;

pub(super) const SQL: GroupDeadSql = GroupDeadSql {
    list_dead: "SELECT d.id, d.partition_no, d.msg_offset, d.attempts, d.died_at, \
        l.msg_key, l.headers, l.body, l.published_at, h.events FROM {p}group_dead d \
        LEFT JOIN {p}topic_log l ON l.topic_id = ? \
        AND l.partition_no = d.partition_no AND l.msg_offset = d.msg_offset \
        LEFT JOIN {p}group_history h ON h.group_id = d.group_id \
        AND h.partition_no = d.partition_no AND h.msg_offset = d.msg_offset \
        WHERE d.group_id = ? ORDER BY d.died_at, d.id LIMIT ?",
    lock_dead: "SELECT id FROM {p}group_dead WHERE group_id = ? AND id IN ({list})",
    // The `WHERE` clause also keeps SQLite's parser from reading `ON CONFLICT` as a join
    // constraint.
    dead_to_retries: concat!(
        "INSERT INTO {p}group_retries (group_id, id, partition_no, msg_offset, run_at, attempts, ",
        "token) SELECT group_id, id, partition_no, msg_offset, ",
        now_us!(),
        ", 0, token FROM {p}group_dead WHERE id IN ({list}) AND group_id = ? ",
        "ON CONFLICT (group_id, id) DO UPDATE SET run_at = excluded.run_at, attempts = 0"
    ),
    delete_dead: "DELETE FROM {p}group_dead WHERE id IN ({list}) AND group_id = ?",
    oldest_dead: "SELECT id FROM {p}group_dead WHERE group_id = ? ORDER BY died_at, id LIMIT ?",
    list_retries: "SELECT id, partition_no, msg_offset, attempts, run_at \
        FROM {p}group_retries WHERE group_id = ? ORDER BY run_at, id LIMIT ?",
    retry_now: concat!(
        "UPDATE {p}group_retries SET run_at = ",
        now_us!(),
        " WHERE group_id = ? AND id IN ({list})"
    ),
    count_range: "SELECT COUNT(*) FROM {p}topic_log \
        WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?",
    replay_range: concat!(
        "INSERT INTO {p}group_retries (group_id, id, partition_no, msg_offset, run_at, attempts, ",
        "token) SELECT ?, l.id, l.partition_no, l.msg_offset, ",
        now_us!(),
        ", 0, COALESCE(h.token, 0) FROM {p}topic_log l ",
        "LEFT JOIN {p}group_history h ON h.group_id = ? ",
        "AND h.partition_no = l.partition_no AND h.msg_offset = l.msg_offset ",
        "WHERE l.topic_id = ? AND l.partition_no = ? AND l.msg_offset >= ? AND l.msg_offset < ? ",
        "ON CONFLICT (group_id, id) DO UPDATE SET run_at = excluded.run_at, attempts = 0"
    ),
};
