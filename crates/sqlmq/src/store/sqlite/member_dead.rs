//! The member dead letters' statements (the body is `store/body/member_dead.rs`).

use super::now_us;
use crate::store::body::MemberDeadSql;

pub(super) const SQL: MemberDeadSql = MemberDeadSql {
    insert: concat!(
        "INSERT INTO {p}member_dead (group_id, member, id, partition_no, msg_offset, attempts, ",
        "died_at, errors) VALUES (?, ?, ?, ?, ?, ?, ",
        now_us!(),
        ", ?) ON CONFLICT (group_id, member, id) DO UPDATE SET attempts = excluded.attempts, ",
        "died_at = excluded.died_at, errors = excluded.errors"
    ),
    list: concat!(
        "SELECT d.id, d.partition_no, d.msg_offset, d.attempts, d.died_at, ",
        "l.msg_key, l.headers, l.body, l.published_at, d.errors, d.member FROM {p}member_dead d ",
        "LEFT JOIN {p}topic_log l ON l.topic_id = ? ",
        "AND l.partition_no = d.partition_no AND l.msg_offset = d.msg_offset ",
        "WHERE d.group_id = ? AND (? IS NULL OR d.member = ?) ",
        "ORDER BY d.died_at, d.member, d.id LIMIT ?"
    ),
    deaths: "SELECT member, attempts, died_at FROM {p}member_dead \
        WHERE group_id = ? AND id = ? ORDER BY member",
};
