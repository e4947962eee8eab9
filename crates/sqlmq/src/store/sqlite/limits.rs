//! A limited queue's gate: the read of its limits (the body is `store/body/limits.rs`).

use crate::store::body::LimitSql;
use crate::store::body::limits::limit_columns;

pub(super) const SQL: LimitSql = LimitSql {
    // One writer at a time: the transaction that reads has the database to itself.
    lock: concat!(
        "SELECT ",
        limit_columns!("l"),
        " FROM {p}queue_limits l WHERE l.queue_id = ?"
    ),
};
