//! Browsing a queue's messages: each page one range of the index its state is claimed or
//! moved by, joined to `messages` by primary key. Plain reads: no lock, no lease.

use super::micros;
use crate::store::body::BrowseSql;

/// The columns every statement ends with, from the message row.
macro_rules! message_columns {
    () => {
        concat!(
            "m.ordering_key, m.headers, m.body, ",
            micros!("m.created_at"),
            ", ",
            micros!("m.deadline_at"),
            ", m.run_timeout_us, m.errors, "
        )
    };
}

/// A time cursor's µs back as a `DATETIME(6)` (the inverse of `micros!`, exact).
macro_rules! at {
    () => {
        "TIMESTAMPADD(MICROSECOND, ?, '1970-01-01 00:00:00')"
    };
}

macro_rules! ready {
    ($($after:tt)*) => {
        concat!(
            "SELECT r.id, 0, r.priority, r.attempts, NULL, NULL, NULL, NULL, NULL, ",
            message_columns!(),
            "r.priority FROM {p}ready r FORCE INDEX (arrival) ",
            "STRAIGHT_JOIN {p}messages m ON m.id = r.id WHERE r.queue_id = ? ",
            $($after)*,
            "ORDER BY r.priority, r.id LIMIT ?"
        )
    };
}

macro_rules! scheduled {
    ($($after:tt)*) => {
        concat!(
            "SELECT s.id, 1, s.priority, s.attempts, ",
            micros!("s.run_at"),
            ", NULL, NULL, NULL, NULL, ",
            message_columns!(),
            micros!("s.run_at"),
            " FROM {p}scheduled s FORCE INDEX (due) ",
            "STRAIGHT_JOIN {p}messages m ON m.id = s.id WHERE s.queue_id = ? ",
            $($after)*,
            "ORDER BY s.run_at, s.id LIMIT ?"
        )
    };
}

macro_rules! blocked {
    ($($after:tt)*) => {
        concat!(
            "SELECT b.id, 2, b.priority, b.attempts, ",
            micros!("b.run_at"),
            ", NULL, NULL, NULL, NULL, ",
            message_columns!(),
            "b.seq FROM {p}blocked b FORCE INDEX (PRIMARY) ",
            "STRAIGHT_JOIN {p}messages m ON m.id = b.id WHERE b.queue_id = ? ",
            $($after)*,
            "ORDER BY b.ordering_key, b.seq LIMIT ?"
        )
    };
}

macro_rules! in_flight {
    ($($after:tt)*) => {
        concat!(
            "SELECT l.id, 3, l.priority, l.attempts, NULL, ",
            micros!("l.lease_until"),
            ", ",
            micros!("l.claimed_at"),
            ", NULL, l.owner, ",
            message_columns!(),
            micros!("l.lease_until"),
            " FROM {p}leases l FORCE INDEX (expiry) ",
            "STRAIGHT_JOIN {p}messages m ON m.id = l.id WHERE l.queue_id = ? ",
            $($after)*,
            "ORDER BY l.lease_until, l.id LIMIT ?"
        )
    };
}

macro_rules! waiting {
    ($($after:tt)*) => {
        concat!(
            "SELECT w.id, 5, w.priority, w.attempts, NULL, NULL, NULL, NULL, NULL, ",
            message_columns!(),
            "0 FROM {p}waiting w FORCE INDEX (queue) STRAIGHT_JOIN {p}messages m ON m.id = w.id ",
            "WHERE w.queue_id = ? ",
            $($after)*,
            "ORDER BY w.id LIMIT ?"
        )
    };
}

pub(super) const SQL: BrowseSql = BrowseSql {
    first: [
        ready!(""),
        scheduled!(""),
        blocked!(""),
        in_flight!(""),
        waiting!(""),
    ],
    after: [
        ready!("AND (r.priority > ? OR (r.priority = ? AND r.id > ?)) "),
        scheduled!(concat!(
            "AND (s.run_at > ",
            at!(),
            " OR (s.run_at = ",
            at!(),
            " AND s.id > ?)) "
        )),
        blocked!("AND (b.ordering_key > ? OR (b.ordering_key = ? AND b.seq > ?)) "),
        in_flight!(concat!(
            "AND (l.lease_until > ",
            at!(),
            " OR (l.lease_until = ",
            at!(),
            " AND l.id > ?)) "
        )),
        // Every waiting message has position 0: the page goes on by id.
        waiting!("AND (0 > ? OR (0 = ? AND w.id > ?)) "),
    ],
    find: concat!(
        "SELECT m.id, CASE WHEN r.id IS NOT NULL THEN 0 WHEN s.id IS NOT NULL THEN 1 ",
        "WHEN b.id IS NOT NULL THEN 2 WHEN l.id IS NOT NULL THEN 3 WHEN d.id IS NOT NULL THEN 4 ",
        "WHEN w.id IS NOT NULL THEN 5 WHEN c.id IS NOT NULL THEN 6 END, ",
        "m.priority, COALESCE(r.attempts, s.attempts, b.attempts, l.attempts, d.attempts, w.attempts, 0), ",
        micros!("COALESCE(s.run_at, b.run_at)"),
        ", ",
        micros!("COALESCE(l.lease_until, c.lease_until)"),
        ", ",
        micros!("l.claimed_at"),
        ", ",
        micros!("d.died_at"),
        ", l.owner, ",
        message_columns!(),
        "0 FROM {p}messages m ",
        "LEFT JOIN {p}ready r ON r.queue_id = m.queue_id AND r.priority = m.priority AND r.id = m.id ",
        "LEFT JOIN {p}scheduled s ON s.id = m.id LEFT JOIN {p}blocked b ON b.id = m.id ",
        "LEFT JOIN {p}leases l ON l.id = m.id LEFT JOIN {p}dead d ON d.id = m.id ",
        "LEFT JOIN {p}waiting w ON w.id = m.id LEFT JOIN {p}cancels c ON c.id = m.id ",
        "WHERE m.id = ? AND m.queue_id = ?"
    ),
    by_key: "SELECT head_id FROM {p}key_heads WHERE queue_id = ? AND ordering_key = ? \
        UNION ALL SELECT id FROM {p}dedup WHERE queue_id = ? AND idempotency_key = ? \
        UNION ALL SELECT id FROM (SELECT id FROM {p}blocked WHERE queue_id = ? \
        AND ordering_key = ? ORDER BY seq LIMIT ?) w",
};
