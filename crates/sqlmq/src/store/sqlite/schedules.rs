//! Recurring schedules' statements of their own shape (the body is
//! `store/body/schedules.rs`).

use super::now_us;
use crate::store::body::ScheduleSql;

pub(super) const SQL: ScheduleSql = ScheduleSql {
    insert: "INSERT INTO {p}schedules \
        (name, spec, body, next_fire, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) \
        ON CONFLICT (name) DO NOTHING",
    // One writer at a time: the transaction that reads has the database to itself.
    lock: "SELECT name, spec, body, paused, next_fire, last_fired, fired, created_at, \
        updated_at FROM {p}schedules WHERE name = ?",
    next_due: concat!(
        "SELECT MIN(next_fire), ",
        now_us!(),
        " FROM {p}schedules WHERE paused = 0"
    ),
};
