//! A limited queue's gate: the read of its limits (the body is `store/body/limits.rs`).

use crate::store::body::LimitSql;

pub(super) const SQL: LimitSql = LimitSql {
    // One writer at a time: the transaction that reads has the database to itself.
    lock: "SELECT max_in_flight, rate_count, rate_window_us FROM {p}queue_limits \
        WHERE queue_id = ?",
};
