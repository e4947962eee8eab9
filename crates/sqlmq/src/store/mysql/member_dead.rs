//! The member dead letters' statements (the body is `store/body/member_dead.rs`). The reads
//! name their index (`FORCE INDEX`).

use super::micros;
use crate::store::body::MemberDeadSql;

pub(super) const SQL: MemberDeadSql = MemberDeadSql {
    insert: "INSERT INTO {p}member_dead (group_id, member, id, partition_no, msg_offset, \
        attempts, died_at, errors) VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?) \
        ON DUPLICATE KEY UPDATE attempts = VALUES(attempts), died_at = VALUES(died_at), \
        errors = VALUES(errors)",
    list: concat!(
        "SELECT d.id, d.partition_no, d.msg_offset, d.attempts, ",
        micros!("d.died_at"),
        ", l.msg_key, l.headers, l.body, ",
        micros!("l.published_at"),
        ", d.errors, d.member FROM {p}member_dead d FORCE INDEX (died) ",
        "LEFT JOIN {p}topic_log l FORCE INDEX (PRIMARY) ON l.topic_id = ? ",
        "AND l.partition_no = d.partition_no AND l.msg_offset = d.msg_offset ",
        "WHERE d.group_id = ? AND (? IS NULL OR d.member = ?) ",
        "ORDER BY d.died_at, d.member, d.id LIMIT ?"
    ),
    deaths: concat!(
        "SELECT member, attempts, ",
        micros!("died_at"),
        " FROM {p}member_dead FORCE INDEX (record) WHERE group_id = ? AND id = ? ORDER BY member"
    ),
};
