//! Recurring schedules' statements of their own shape (the body is
//! `store/body/schedules.rs`).

use super::micros;
use crate::store::body::ScheduleSql;

pub(super) const SQL: ScheduleSql = ScheduleSql {
    // `INSERT IGNORE` would also turn a too-long value into a warning: name the duplicate.
    insert: "INSERT INTO {p}schedules \
        (name, spec, body, next_fire, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) \
        ON DUPLICATE KEY UPDATE name = name",
    lock: "SELECT name, spec, body, paused, next_fire, last_fired, fired, created_at, \
        updated_at FROM {p}schedules WHERE name = ? FOR UPDATE",
    next_due: concat!(
        "SELECT MIN(next_fire), ",
        micros!("UTC_TIMESTAMP(6)"),
        " FROM {p}schedules WHERE paused = 0"
    ),
};
