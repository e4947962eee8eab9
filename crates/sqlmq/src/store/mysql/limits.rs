//! A limited queue's gate: the locking read of its limits (the body is
//! `store/body/limits.rs`).

use crate::store::body::LimitSql;
use crate::store::body::limits::limit_columns;

pub(super) const SQL: LimitSql = LimitSql {
    lock: concat!(
        "SELECT ",
        limit_columns!("l"),
        " FROM {p}queue_limits l WHERE l.queue_id = ? FOR UPDATE"
    ),
};
