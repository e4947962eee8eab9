//! Topic statements: rows and partitions, publishing and sequencing, reading the log,
//! retention.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;

use super::body::{Dialect, SqlStore};
use super::rows::PendingBatch;
use crate::domain::{MessageId, Result};

/// A publish that commits by itself in one round trip, where the backend has such a path
/// (MySQL: one script of literals; SQLite, in-process, has nothing to save).
pub trait ScriptedPublish: Dialect {
    /// Whether this backend has the path at all: where it has not, the engine does not
    /// prepare the rows for it.
    const PUBLISH_SCRIPTS: bool = true;

    /// A publish, prepared: what [`ScriptedPublish::publish_script`] runs.
    type PublishScript: Send + Sync;

    /// Prepare `batch` (records of distinct ids) as one store-committing round trip, when this
    /// backend has such a path and the text fits `budget` bytes (`None`: the engine runs the
    /// full publish in a transaction of its own).
    fn prepare_publish_script(
        store: &SqlStore<Self>,
        batch: &PendingBatch<'_>,
        budget: usize,
    ) -> Result<Option<Self::PublishScript>>;

    /// Run a prepared publish on a connection outside any transaction: it begins, writes and
    /// commits. `false`: a record's id is published already (pending or in the log), and
    /// nothing was written (the engine's full publish answers which). On an error it ends the
    /// transaction it opened, unless the connection failed.
    fn publish_script(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        script: &Self::PublishScript,
    ) -> impl Future<Output = Result<bool>> + Send;
}

/// Publishing, and giving published records their offsets.
pub trait Publish: Dialect {
    /// Whether `insert_pending` gives records their offsets itself, inside the publishing
    /// transaction (a backend with one writer at a time, whose commit order is its publish
    /// order): then nothing is ever pending, the engine runs no sequencers, and a publish's
    /// records can be claimed as soon as it commits. False where offsets are given after
    /// commit by sequencing steps.
    const OFFSETS_AT_PUBLISH: bool = false;

    /// Which of `ids` are already published (logged or waiting for an offset).
    fn known_topic_ids(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        ids: &[MessageId],
    ) -> impl Future<Output = Result<HashSet<MessageId>>> + Send;

    /// Write published records in the caller's transaction (without offsets where offsets are
    /// given after commit).
    fn insert_pending(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        batch: &PendingBatch<'_>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// One sequencing step of some partitions of a topic (distinct, in ascending order), in
    /// the caller's transaction: give up to `limit` committed records in all the next dense
    /// offsets of their partitions. Returns how many records it consumed.
    fn sequence_step(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        topic_id: i32,
        partitions: &[i32],
        limit: usize,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Committed records without an offset yet, by partition.
    fn pending_partitions(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        topic_id: i32,
    ) -> impl Future<Output = Result<BTreeMap<i32, i64>>> + Send;

    /// The topic and partition of a record still waiting for its offset.
    fn pending_by_id(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        id: MessageId,
    ) -> impl Future<Output = Result<Option<(i32, i32)>>> + Send;
}
