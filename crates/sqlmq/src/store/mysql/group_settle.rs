//! Settling a cluster group's claims: the statements (the body is
//! `store/body/group_settle.rs`).
//!
//! Each statement locks the lease rows it reads (`FOR UPDATE` by primary key; the releases
//! `SKIP LOCKED` through the `expiry` index), so that an ack and a release of the same record
//! serialise. The history upsert appends the new event to the stored ones and keeps the last
//! [`GROUP_EVENTS_KEPT`](crate::domain::GROUP_EVENTS_KEPT) in SQL (`SUBSTRING_INDEX` on the
//! newlines: the trailing newline makes one more, empty, field).

use super::micros;
use crate::domain::group_events_kept;
use crate::store::body::GroupSettleSql;

macro_rules! lease_columns {
    () => {
        concat!(
            "SELECT id, partition_no, msg_offset, token, attempts, owner, ",
            micros!("claimed_at"),
            ", lease_until > UTC_TIMESTAMP(6), ",
            micros!("UTC_TIMESTAMP(6)"),
            " FROM {p}group_leases "
        )
    };
}

pub(super) const SQL: GroupSettleSql = GroupSettleSql {
    lock_leases: concat!(
        lease_columns!(),
        "FORCE INDEX (PRIMARY) WHERE group_id = ? AND id IN ({list}) FOR UPDATE"
    ),
    claim_expired: concat!(
        lease_columns!(),
        "FORCE INDEX (expiry) WHERE group_id = ? AND lease_until <= UTC_TIMESTAMP(6) ",
        "ORDER BY lease_until LIMIT ? FOR UPDATE SKIP LOCKED"
    ),
    // The group's in-flight rows, filtered (rare: a member died or left).
    claim_owned: concat!(
        lease_columns!(),
        "FORCE INDEX (expiry) WHERE group_id = ? AND owner = ? LIMIT ? FOR UPDATE SKIP LOCKED"
    ),
    delete_leases: "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}group_leases t \
        FORCE INDEX (PRIMARY) ON t.group_id = ? AND t.id = v.id",
    upsert_history: concat!(
        "INSERT INTO {p}group_history ",
        "(group_id, partition_no, msg_offset, id, state, attempts, token, settled_at, events) ",
        "VALUES {list} ON DUPLICATE KEY UPDATE state = VALUES(state), ",
        "attempts = VALUES(attempts), token = VALUES(token), settled_at = VALUES(settled_at), ",
        "events = SUBSTRING_INDEX(CONCAT(events, VALUES(events)), CHAR(10), -(",
        group_events_kept!(),
        " + 1))"
    ),
    history_row: "(?,?,?,?,?,?,?,DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND),?)",
    upsert_retries: "INSERT INTO {p}group_retries \
        (group_id, id, partition_no, msg_offset, run_at, attempts, token) VALUES {list} \
        ON DUPLICATE KEY UPDATE run_at = VALUES(run_at), attempts = VALUES(attempts), \
        token = GREATEST(token, VALUES(token))",
    retry_row: "(?,?,?,?,DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND),?,?)",
    upsert_dead: "INSERT INTO {p}group_dead \
        (group_id, id, partition_no, msg_offset, attempts, token, died_at) VALUES {list} \
        ON DUPLICATE KEY UPDATE attempts = VALUES(attempts), \
        token = GREATEST(token, VALUES(token)), died_at = VALUES(died_at)",
    dead_row: "(?,?,?,?,?,?,DATE_ADD('1970-01-01 00:00:00', INTERVAL ? MICROSECOND))",
    extend: "UPDATE {p}group_leases FORCE INDEX (PRIMARY) \
        SET lease_until = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND) \
        WHERE group_id = ? AND id = ? AND token = ? AND lease_until > UTC_TIMESTAMP(6)",
};
