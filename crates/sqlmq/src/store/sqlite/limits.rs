//! A limited queue's gate: the read of its limits (the body is `store/body/limits.rs`).

use super::now_us;
use crate::store::body::LimitSql;
use crate::store::body::limits::gate_read;

pub(super) const SQL: LimitSql = LimitSql {
    // One writer at a time: the transaction that reads has the database to itself.
    gate: gate_read!(now_us!(), ""),
};
