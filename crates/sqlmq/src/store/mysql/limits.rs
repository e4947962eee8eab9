//! A limited queue's gate: the locking read of its limits and what they are checked against (the body is
//! `store/body/limits.rs`).

use super::micros;
use crate::store::body::LimitSql;
use crate::store::body::limits::gate_read;

pub(super) const SQL: LimitSql = LimitSql {
    gate: gate_read!(micros!("UTC_TIMESTAMP(6)"), " FOR UPDATE"),
};
