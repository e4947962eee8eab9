//! The flow tables' statements that lock (the body is `store/body/flows.rs`): a node, a batch,
//! and a dependency's lease and message rows are read `FOR UPDATE`, so that ends of the same
//! message, dependants of the same node and members of the same batch serialise on them.

use super::micros;
use crate::store::body::FlowSql;

pub(super) const SQL: FlowSql = FlowSql {
    now: concat!("SELECT ", micros!("UTC_TIMESTAMP(6)")),
    lock_nodes: "SELECT id, batch_id, role, state, queue_id FROM {p}flow_nodes \
        WHERE id IN ({list}) ORDER BY id FOR UPDATE",
    lock_lease: "SELECT id FROM {p}leases WHERE id = ? FOR UPDATE",
    lock_message: "SELECT queue_id, ordering_key FROM {p}messages WHERE id = ? FOR UPDATE",
    lock_batch: "SELECT state, pending, dead, cancelled FROM {p}batches WHERE id = ? FOR UPDATE",
};
