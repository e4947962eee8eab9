//! Topic statements: rows and partitions, publishing and sequencing, reading the log,
//! retention.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;

use super::Backend;
use super::rows::{PartitionRow, PendingBatch, PositionRow, RangeRemoval, TopicCursor, TopicRow};
use crate::domain::{MessageId, Result, StreamRecord, TopicConfig};

/// Topic rows and their partitions' counters. Names are compared by the backend's rules, as
/// queue names are ([`Queues`](super::Queues)).
pub trait Topics<B: Backend> {
    /// Create the topic (with its partitions and its groups' cursors for new partitions), or
    /// update its configuration; partitions only grow.
    fn upsert_topic(
        &self,
        conn: &mut B::Connection,
        name: &str,
        config: &TopicConfig,
    ) -> impl Future<Output = Result<TopicRow>> + Send;

    fn topic_by_name(
        &self,
        conn: &mut B::Connection,
        name: &str,
    ) -> impl Future<Output = Result<Option<TopicRow>>> + Send;

    fn topic_by_id(
        &self,
        conn: &mut B::Connection,
        id: i32,
    ) -> impl Future<Output = Result<Option<TopicRow>>> + Send;

    /// Every topic, by name.
    fn all_topics(
        &self,
        conn: &mut B::Connection,
    ) -> impl Future<Output = Result<Vec<TopicRow>>> + Send;

    /// The counters of every partition of the topic.
    fn partitions(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
    ) -> impl Future<Output = Result<Vec<PartitionRow>>> + Send;

    /// Step `step` (from 0) of deleting the topic (its groups are deleted first): delete up to
    /// about a thousand of its rows of one table (records, pending records, partitions), or,
    /// at the last step, the topic row. Returns rows deleted; `None` past the last step.
    fn delete_topic_rows(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        step: usize,
    ) -> impl Future<Output = Result<Option<u64>>> + Send;
}

/// A publish that commits by itself in one round trip, where the backend has such a path
/// (MySQL: one script of literals; SQLite, in-process, has nothing to save).
pub trait ScriptedPublish<B: Backend> {
    /// Whether this backend has the path at all: where it has not, the engine does not
    /// prepare the rows for it.
    const PUBLISH_SCRIPTS: bool = true;

    /// A publish, prepared: what [`ScriptedPublish::publish_script`] runs.
    type PublishScript: Send + Sync;

    /// Prepare `batch` (records of distinct ids) as one self-committing round trip, when this
    /// backend has such a path and the text fits `budget` bytes (`None`: the engine runs the
    /// full publish in a transaction of its own).
    fn prepare_publish_script(
        &self,
        batch: &PendingBatch<'_>,
        budget: usize,
    ) -> Result<Option<Self::PublishScript>>;

    /// Run a prepared publish on a connection outside any transaction: it begins, writes and
    /// commits. `false`: a record's id is published already (pending or in the log), and
    /// nothing was written (the engine's full publish answers which). On an error it ends the
    /// transaction it opened, unless the connection failed.
    fn publish_script(
        &self,
        conn: &mut B::Connection,
        script: &Self::PublishScript,
    ) -> impl Future<Output = Result<bool>> + Send;
}

/// Publishing, and giving published records their offsets.
pub trait Publish<B: Backend> {
    /// Whether `insert_pending` gives records their offsets itself, inside the publishing
    /// transaction (a backend with one writer at a time, whose commit order is its publish
    /// order): then nothing is ever pending, the engine runs no sequencers, and a publish's
    /// records can be claimed as soon as it commits. False where offsets are given after
    /// commit by sequencing steps.
    const OFFSETS_AT_PUBLISH: bool = false;

    /// Which of `ids` are already published (logged or waiting for an offset).
    fn known_topic_ids(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<HashSet<MessageId>>> + Send;

    /// Write published records in the caller's transaction (without offsets where offsets are
    /// given after commit).
    fn insert_pending(
        &self,
        conn: &mut B::Connection,
        batch: &PendingBatch<'_>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// One sequencing step of some partitions of a topic (distinct, in ascending order), in
    /// the caller's transaction: give up to `limit` committed records in all the next dense
    /// offsets of their partitions. Returns how many records it consumed.
    fn sequence_step(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partitions: &[i32],
        limit: usize,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Committed records without an offset yet, by partition.
    fn pending_partitions(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
    ) -> impl Future<Output = Result<BTreeMap<i32, i64>>> + Send;

    /// The topic and partition of a record still waiting for its offset.
    fn pending_by_id(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> impl Future<Output = Result<Option<(i32, i32)>>> + Send;
}

/// Reading the log without claiming it, and broadcast members' positions.
pub trait Stream<B: Backend> {
    /// Up to `limit` records of one partition from `offset` on, in offset order.
    fn read_from(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        offset: i64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<StreamRecord>>> + Send;

    /// A sequenced record of the topic by id.
    fn record_by_id(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        id: MessageId,
    ) -> impl Future<Output = Result<Option<StreamRecord>>> + Send;

    /// Records with `key`, by partition and offset.
    fn records_by_key(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        key: &str,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<StreamRecord>>> + Send;

    /// When the record at `offset` of one partition was sequenced (µs since the epoch);
    /// `None` when it is not retained.
    fn sequenced_at(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        offset: i64,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;

    /// A broadcast member's checkpointed positions, by partition.
    fn positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        member: &str,
    ) -> impl Future<Output = Result<HashMap<i32, i64>>> + Send;

    /// Every checkpointed position of a broadcast group.
    fn all_positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
    ) -> impl Future<Output = Result<Vec<PositionRow>>> + Send;

    /// Checkpoint a broadcast member's positions.
    fn save_positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        member: &str,
        positions: &[(i32, i64)],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Forget a broadcast member's checkpoints (`None`: every member's).
    fn delete_positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        member: Option<&str>,
    ) -> impl Future<Output = Result<u64>> + Send;
}

/// Removing a partition's oldest records.
pub trait Retention<B: Backend> {
    /// The body sizes of up to `limit` records of one partition from `from` on, in offset
    /// order: `(offset, bytes)`.
    fn body_sizes(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        from: i64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<(i64, i64)>>> + Send;

    /// Remove one range (the caller's transaction): the groups' history of it, the records,
    /// and the partition's counters. Returns (records, bytes) removed.
    fn remove_range(
        &self,
        conn: &mut B::Connection,
        range: &RangeRemoval<'_>,
    ) -> impl Future<Output = Result<(u64, i64)>> + Send;

    /// Every group's cursor in every partition of the topic.
    fn cursors_of_topic(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
    ) -> impl Future<Output = Result<Vec<TopicCursor>>> + Send;

    /// The smallest checkpointed position per partition of a broadcast group.
    fn min_positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
    ) -> impl Future<Output = Result<HashMap<i32, i64>>> + Send;
}
