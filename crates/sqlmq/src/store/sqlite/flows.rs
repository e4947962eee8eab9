//! The flow tables' statements that lock on a server (the body is `store/body/flows.rs`): on
//! SQLite the write transaction has the database to itself, so they are plain reads.

use super::now_us;
use crate::store::body::FlowSql;

pub(super) const SQL: FlowSql = FlowSql {
    now: concat!("SELECT ", now_us!()),
    lock_nodes: "SELECT id, batch_id, role, state, queue_id FROM {p}flow_nodes \
        WHERE id IN ({list}) ORDER BY id",
    lock_lease: "SELECT id FROM {p}leases WHERE id = ?",
    lock_message: "SELECT queue_id, ordering_key FROM {p}messages WHERE id = ?",
    lock_batch: "SELECT state, pending, dead, cancelled FROM {p}batches WHERE id = ?",
};
