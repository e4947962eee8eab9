//! A limited queue's gate: the locking read of its limits (the body is
//! `store/body/limits.rs`).

use crate::store::body::LimitSql;

pub(super) const SQL: LimitSql = LimitSql {
    lock: "SELECT max_in_flight, rate_count, rate_window_us FROM {p}queue_limits \
        WHERE queue_id = ? FOR UPDATE",
};
