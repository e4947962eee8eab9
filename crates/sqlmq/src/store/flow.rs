//! Batches, dependencies and results: the flow tables (`body/flows.rs`).

use std::future::Future;

use super::Backend;
use super::rows::{DependencyRow, FlowItem, ParkedRecord};
use crate::domain::{BatchId, BatchStatus, MessageId, Result};

/// The flow tables' rows. A tracked message's end is recorded by the store itself, in the
/// transaction of the end; these are what the engine calls.
pub trait Flows<B: Backend> {
    /// Record tracked messages just inserted into a queue (their nodes, dependencies and
    /// batches' counts) and put each in line, or in `waiting` while something holds it.
    fn flow_send(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        items: &[FlowItem],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Create a batch, open or sealed (then it finishes when its last member does).
    fn create_batch_row(
        &self,
        conn: &mut B::Connection,
        id: BatchId,
        open: bool,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Keep a new batch's callbacks to topics until it finishes.
    fn park_records(
        &self,
        conn: &mut B::Connection,
        batch: BatchId,
        records: &[ParkedRecord],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Seal an open batch (finishing it if no member is pending); false when it is not open.
    fn seal_batch_row(
        &self,
        conn: &mut B::Connection,
        id: BatchId,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// A batch's counts and messages.
    fn batch_status(
        &self,
        conn: &mut B::Connection,
        id: BatchId,
    ) -> impl Future<Output = Result<Option<BatchStatus>>> + Send;

    /// Keep a result for an acked message, for `ttl_us`.
    fn put_result(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
        result: &[u8],
        ttl_us: i64,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The result an ack left, unless it expired.
    fn result_of(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> impl Future<Output = Result<Option<Vec<u8>>>> + Send;

    /// A message's dependencies: id, step name, result.
    fn dependency_results(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> impl Future<Output = Result<Vec<DependencyRow>>> + Send;

    /// Delete what ended before `cutoff_us` and expired results; a bounded step.
    fn prune_flows(
        &self,
        conn: &mut B::Connection,
        cutoff_us: i64,
    ) -> impl Future<Output = Result<usize>> + Send;
}
